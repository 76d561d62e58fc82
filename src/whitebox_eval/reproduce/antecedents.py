"""A claim's antecedents: its manipulation checks (the antecedent of a conditional claim:
contamination raised the trained items' accuracy, an edit kept the answer on the candidates,
fine-tuning raised ID accuracy, a trained model answers the items its claims read above chance) and
its substance condition. Each returns a record with its values
and one line of text, as :mod:`.claim_checks` does (which also holds the reliability warnings
every claim gets, :func:`.claim_checks.reliability`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.reproduce import chance
from whitebox_eval.reproduce.claim_checks import _significant_in, _stage_rows, _test_of, arm, arm_of, pct
from whitebox_eval.reproduce.values import Missing, at, estimate, record


def raised(spec, results, samples) -> dict[str, Any]:
    """The manipulation moved what it must (``paired``/``test_at``: the child's test, significant
    in ``direction``, default greater): e.g. contamination raised the in-domain accuracy."""
    t = _test_of(results, spec)
    direction = spec.get("direction", "greater")
    ok = _significant_in(t, direction)
    return {"passed": ok, "test": t,
            "text": f"{spec.get('label', t['source'])}: {100 * t['value']:+.1f} pp [{100 * t['lo']:+.1f}, "
                    f"{100 * t['hi']:+.1f}] n={t['n']}, {t['test']} {stats.fmt_p(t['p_value'])}"
                    + ("" if ok else f" -- not significantly {'up' if direction == 'greater' else 'down'}")}


def choice_mass(spec, results, samples) -> dict[str, Any]:
    """An intervention left the answer on the candidates: the mean probability on the candidates'
    first tokens after the edit (``at``) is at least ``min`` (default 0.5: most of the next-token
    mass stays on the answers whose accuracy is read)."""
    after = float(at(results, list(spec["at"])))
    before = float(at(results, list(spec["before"]))) if spec.get("before") else None
    floor = float(spec.get("min", 0.5))
    ok = after >= floor
    return {"passed": ok, "after": after, "before": before, "min": floor,
            "text": f"{spec.get('label', 'choice mass')} after the edit {after:.2f}"
                    + (f" (before {before:.2f})" if before is not None else "") + f"; needs >= {floor:g}"
                    + ("" if ok else " -- the edit moves the answer off the candidates")}


def finetuned(spec, results, samples) -> dict[str, Any]:
    """Fine-tuning reached its in-distribution accuracy: exact accuracy on the ID split after
    (stage ``<phase>/id``) above before (``base/id``) on the same items, exact McNemar (greater).
    A child not fine-tuned at this scale passes (nothing to check)."""
    phase = str(results.get("phase", "base"))
    if phase == "base":
        return {"passed": True, "text": "not fine-tuned at this scale (nothing to check)"}
    before, after = _stage_rows(samples, "base/id"), _stage_rows(samples, f"{phase}/id")
    keys = [k for k in after if k in before]
    if not keys:
        raise Missing("no ID item scored both before and after fine-tuning")
    field = spec.get("field", "exact")
    x = np.array([bool(after[k][field]) for k in keys])
    y = np.array([bool(before[k][field]) for k in keys])
    t = record(stats.mcnemar(x, y), f"samples.jsonl {field}: {phase}/id vs base/id")
    ok = _significant_in(t, "greater")
    return {"passed": ok, "test": t, "before": float(y.mean()), "after": float(x.mean()),
            "text": f"ID exact accuracy {pct(float(y.mean()))} before fine-tuning -> {pct(float(x.mean()))} after "
                    f"({len(keys)} items), exact McNemar {stats.fmt_p(t['p_value'])}"
                    + ("" if ok else " -- fine-tuning did not raise it significantly")}


def above_uninformed(spec, results, samples) -> dict[str, Any]:
    """The model answers the items the claims read above their uninformed level: the child's own
    per-item arm (``samples``, default ``correct``, filtered by ``where`` as a claim's arm; ``items_at``:
    only the item ids listed at that results.json path, e.g. the report split) against the better of
    a constant answer and a uniform guess on those items (:func:`.chance.above`: exact binomial,
    greater). E.g. a trained column's own check that the trained model is above chance on the
    truth tasks' report examples before any edit."""
    a = arm(results, samples, {"label": spec.get("label", "accuracy"), "samples": spec.get("samples", "correct"),
                               **{k: spec[k] for k in ("where", "answers", "gold", "options") if k in spec}})
    if spec.get("items_at"):
        keep = {str(k) for k in at(results, list(spec["items_at"]))}
        items = {i: v for i, v in a["items"].items() if i in keep}
        if not items:
            raise Missing(f"no sample of {a['source']} is among the items at {'/'.join(map(str, spec['items_at']))}")
        a = {**a, **arm_of(a["label"], items), "answers": {i: v for i, v in (a.get("answers") or {}).items() if i in keep}}
    r = chance.above(a)
    ok = r["above"] is True
    return {"passed": ok, "n": r.get("n", a["n"]), "k": a.get("k"), "level": r["level"], "p_value": r.get("p_value"),
            "test": r.get("test"), "source": a["source"] + (f", items at {'/'.join(map(str, spec['items_at']))}"
                                                           if spec.get("items_at") else ""),
            "text": f"H1: above its uninformed level (one-sided; H0: at it). {r['text']}"
                    + ("" if ok or r["above"] is False else " -- not tested, so not passed")}


def substance(spec, results) -> dict[str, Any]:
    """The claim's substance (``stat``: an estimate with its interval) against ``value``: shown when
    the 95% interval lies above it, *below* when it lies under it (the claim fails significantly),
    else *unshown*."""
    est = estimate(results, spec["stat"])
    if "lo" not in est:
        raise Missing(f"{est['source']} has no interval")
    v, lo, hi, bound = est["value"], float(est["lo"]), float(est["hi"]), float(spec["value"])
    state = "shown" if lo >= bound else "below" if hi < bound else "unshown"
    return {"state": state, "value": v, "lo": lo, "hi": hi, "bound": bound,
            "text": f"{spec.get('label', est['source'])} = {v:.3g} [{lo:.3g}, {hi:.3g}] (needs >= {bound:g}"
                    + {"shown": ": shown)", "below": ": significantly below)", "unshown": ": not shown)"}[state]}
