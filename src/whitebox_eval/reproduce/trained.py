"""Trained columns of a reproduction: an experiment on the model a ``finetune`` experiment trained.

A paper file's experiment with ``model: "{run.ID}"`` runs, for each base model, on the run folder of
the finetune child ``ID`` of that paper on that base model (:mod:`.plan` plans the producer first and
names the consumer's model by :func:`.plan.run_ref`, so the same experiment declared in two papers is
one run). The column reads ``<base> + <label>``; with ``variant_of`` the consumer answers that
experiment's claims. Every claim read from a consumer is conditional on its training: the producer's
held-out check (:func:`reached`) is a manipulation check of the claim
(:func:`.assemble.training_checks`), and so is the column's own ``manipulation`` (:func:`own_checks`,
read from the consumer's own results: e.g. that the trained model answers the items its claims read
above their uninformed level, ``above_uninformed``); a check that fails makes the claim
*uninformative (manipulation failed)*, never a verdict (:func:`.assemble.failed_training`). This
module holds the paper file's check of such columns, the training's check and the column's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from whitebox_eval.errors import WhiteboxError


def check_columns(experiments: Sequence[Any], source: str) -> None:
    """A trained column's ``model`` names by ``{run.ID}`` an earlier experiment that declares its training
    check (``manipulation: [{kind: trained}]``, a ``finetune`` experiment), has a
    ``label``, its ``variant_of`` is an experiment of the same suite, and its own manipulation checks
    apply to every claim it answers (no ``applies_to``) (one line each)."""
    seen: dict[str, Any] = {}
    for e in experiments:
        where = f"{source} experiment {e.id}"
        if e.model is not None:
            producer = seen.get(e.producer or "")
            if producer is None or not any(m.get("kind") == "trained" for m in producer.manipulation):
                raise WhiteboxError(f"{where}: model {e.model!r} must be {{run.ID}} naming an earlier experiment of "
                                    "this paper that trains a model and declares its check (manipulation: "
                                    "[{kind: trained, ...}])")
            if any("applies_to" in m for m in e.manipulation):
                raise WhiteboxError(f"{where}: a trained column's own manipulation checks apply to every claim it "
                                    "answers (no applies_to; declare one on the experiment it varies)")
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


def own_checks(paper: Any, plan: Any, child: Any) -> list[dict[str, Any]]:
    """The manipulation checks trained column ``child`` declares itself: the ``manipulation`` of the
    experiment of ``paper`` whose child it is (trained by that experiment's producer, answering for its
    ``variant_of``, with its label), each read from ``child``'s own results."""
    producer = next((c for c in plan.children if c.run_id == child.producer), None)
    if producer is None:
        return []
    return [s for e in paper.experiments if e.model is not None and (paper.number, e.producer) in producer.uses
            and (paper.number, e.variant_of or e.id) in child.uses and (e.suite, e.mode) == (child.suite, child.mode)
            and (child.label or "").endswith(f" + {e.label}") for s in e.manipulation]


def reached(spec: Mapping[str, Any], results: Mapping[str, Any], samples: Sequence[Any] = ()) -> dict[str, Any]:
    """A training's held-out check (manipulation kind ``trained``, declared on a ``finetune``
    experiment): on the test split, ``key`` (default ``accuracy``; ``p_correct``: free P(correct)
    sampled) after training is significantly above before (the child's paired test
    ``<key>,after_vs_before``) and at least ``min`` (the training's target, default 0); its text adds
    planted facts' question-form recall where the results hold it (:func:`_question_recall`)."""
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
                    + ("" if up else " -- not significantly up") + ("" if high else " -- below its target")
                    + _question_recall(results)}


def _question_recall(results: Mapping[str, Any]) -> str:
    """Planted facts' question-form recall beside the check (descriptive; text only where the
    training recorded it, so reports of runs before it read as they did)."""
    q = results.get("question_recall")
    if not q:
        return ""
    return (f"; beside it, {q['note']}, the facts asked as the MCQs ask them with no options: "
            f"{q['before']} before -> {q['after']} after")
