"""Trained columns of a reproduction: an experiment on the model a ``finetune`` experiment trained.

A paper file's experiment with ``model: "{run.ID}"`` runs, for each base model, on the run folder of
the finetune child ``ID`` of that paper on that base model (:mod:`.plan` plans the producer first and
names the consumer's model by :func:`.plan.run_ref`, so the same experiment declared in two papers is
one run). The column reads ``<base> + <label>``; with ``variant_of`` the consumer answers that
experiment's claims. Every claim read from a consumer is conditional on its training: the producer's
held-out check (:func:`reached`) is a manipulation check of the claim (:func:`training_checks`),
and a training that did not reach its target makes the claim *uninformative (manipulation failed)*,
never a verdict. This module holds the paper file's check of such columns and the training's check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from whitebox_eval.errors import WhiteboxError


def check_columns(experiments: Sequence[Any], source: str) -> None:
    """A trained column's ``model`` names by ``{run.ID}`` an earlier experiment that declares its training
    check (``manipulation: [{kind: trained}]``, a ``finetune`` experiment), has a
    ``label``, and its ``variant_of`` is an experiment of the same suite (one line each)."""
    seen: dict[str, Any] = {}
    for e in experiments:
        where = f"{source} experiment {e.id}"
        if e.model is not None:
            producer = seen.get(e.producer or "")
            if producer is None or not any(m.get("kind") == "trained" for m in producer.manipulation):
                raise WhiteboxError(f"{where}: model {e.model!r} must be {{run.ID}} naming an earlier experiment of "
                                    "this paper that trains a model and declares its check (manipulation: "
                                    "[{kind: trained, ...}])")
            if not e.label:
                raise WhiteboxError(f"{where}: a trained model needs a label (its column: <base model> + <label>)")
        elif e.label or e.variant_of:
            raise WhiteboxError(f"{where}: label and variant_of apply to an experiment on a trained model "
                                "(model: \"{run.ID}\")")
        if e.variant_of is not None:
            base = next((x for x in experiments if x.id == e.variant_of), None)
            if base is None or base.suite != e.suite or base.mode != e.mode or base.model is not None:
                raise WhiteboxError(f"{where}: variant_of {e.variant_of!r} must be an experiment of this paper on "
                                    f"the base models with the same suite ({e.suite})")
        seen[e.id] = e


def reached(spec: Mapping[str, Any], results: Mapping[str, Any], samples: Sequence[Any] = ()) -> dict[str, Any]:
    """A training's held-out check (manipulation kind ``trained``, declared on a ``finetune``
    experiment): on the test split, ``key`` (default ``accuracy``; ``p_correct``: free P(correct)
    sampled) after training is significantly above before (the child's paired test
    ``<key>,after_vs_before``) and at least ``min`` (the training's target, default 0)."""
    from whitebox_eval import stats
    from whitebox_eval.reproduce.claim_checks import _significant_in, pct
    from whitebox_eval.reproduce.values import estimate, test

    key = spec.get("key", "accuracy")
    before, after = estimate(results, {"key": f"{key},before"}), estimate(results, {"key": f"{key},after"})
    t = test(results, {"paired": f"{key},after_vs_before"})
    floor = float(spec.get("min", 0.0))
    up, high = _significant_in(t, "greater"), after["value"] >= floor
    return {"passed": bool(up and high), "test": t, "before": before["value"], "after": after["value"], "min": floor,
            "text": f"{spec.get('label', 'training check')}: {key} {pct(before['value'])} before -> "
                    f"{pct(after['value'])} [{pct(after.get('lo', after['value']))}, {pct(after.get('hi', after['value']))}] "
                    f"after on the test split (n={t['n']}), {t['test']} {stats.fmt_p(t['p_value'])}; target >= {pct(floor)}"
                    + ("" if up else " -- not significantly up") + ("" if high else " -- below its target")}


def training_checks(paper: Any, plan: Any, outcomes: Mapping[str, Any], child: Any) -> list[dict[str, Any]]:
    """For a child on a trained model, its producer's declared checks (its finetune experiments'
    ``manipulation``) on the producer's results, a producer that did not finish failing the check;
    none for a child on a base model (or none at all)."""
    from whitebox_eval.reproduce import claim_checks, vocabulary

    pid = child.producer if child is not None else None
    if pid is None:
        return []
    o = outcomes.get(pid)
    if o is None or o.status != "done":
        return [{"kind": "trained", "passed": False,
                 "text": f"its training {pid} did not finish" + (f" ({o.reason})" if o is not None and o.reason else "")}]
    producer = next(ch for ch in plan.children if ch.run_id == pid)
    specs = [s for p, e in producer.uses if p == paper.number for s in paper.experiment(e).manipulation]
    study = o.study()
    return [claim_checks.evaluate(vocabulary.checks("manipulation"), s, study.results, study.samples) for s in specs]


def failed_training(paper: Any, plan: Any, outcomes: Mapping[str, Any], child: Any) -> dict[str, Any] | None:
    """The verdict of a claim whose statistic is undefined (a floor) on a trained column whose training
    missed its check: *uninformative (manipulation failed)*, as with a statistic (that the model did not
    learn comes before what it then measured); None otherwise."""
    from whitebox_eval.reproduce.verdicts import UNINFORMATIVE

    failed = [m for m in training_checks(paper, plan, outcomes, child) if not m.get("passed")]
    if not failed:
        return None
    return {"rules": {"manipulation": failed}, "verdict": UNINFORMATIVE, "qualifier": "manipulation failed",
            "reason": "; ".join(f"manipulation check {m['kind']} failed: {m['text']}" for m in failed)}
