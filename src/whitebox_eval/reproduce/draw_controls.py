"""Controls against random draws of as many units (heads, neurons): the same edit on random heads
per item (``random_heads``, read from the child's samples) and the child's own random-draw values
(``random_draws``), both tested by the selected units' rank among the draws (:func:`draw_rank`) in
the direction of the verdict they could demote. Each control reads its own stage: draws of another
edit are refused (*control not run*)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.reproduce.claim_checks import _stage_rows, pct
from whitebox_eval.reproduce.values import Missing, at, estimate, record


def random_heads(spec, arms, results, samples, direction) -> dict[str, Any]:
    """The edit on the selected heads (stage ``stage``) against the same edit on random
    heads (stages ``<draws>0``, ``<draws>1``...) on the same items: paired bootstrap of the
    selected 0/1 ``field`` against the per-item mean over draws. Each control reads its own stage:
    draws that repeat another stage's edit (``draws_of``, default ``stage``) are refused, and so are
    draws the child did not run -- *control not run* (never explaining, never passed)."""
    field = spec.get("field", "correct")
    sel = _stage_rows(samples, spec["stage"])
    draws = sorted({s["stage"] for s in samples if str(s.get("stage", "")).startswith(spec["draws"])
                    and str(s["stage"])[len(spec["draws"]):].isdigit()})
    of = spec.get("draws_of", spec["stage"])
    if of != spec["stage"]:
        return {"not_run": True, "explains": False,
                "text": f"the random draws {spec['draws']}* repeat stage {of}'s edit, not stage {spec['stage']}'s: "
                        f"the child ran no draws of this edit, so none are read in their place"}
    if sel and not draws:
        return {"not_run": True, "explains": False,
                "text": f"the child ran no random draws {spec['draws']}* of stage {spec['stage']}'s edit"}
    if not sel:
        raise Missing(f"no samples of stage {spec['stage']!r}")
    per_draw = [_stage_rows(samples, d) for d in draws]
    keys = [k for k in sel if all(k in d for d in per_draw)]
    x = [bool(sel[k][field]) for k in keys]
    ys = [[bool(d[k][field]) for k in keys] for d in per_draw]
    vs_mean, _ = stats.against_draws(x, ys)
    t = record(vs_mean, f"samples.jsonl {field}: stage {spec['stage']} vs {', '.join(draws)}")
    acc = [float(np.mean(y)) for y in ys]
    rank = draw_rank(float(np.mean(x)), acc, direction)
    out = {"explains": rank["explains"], "descriptive": rank["descriptive"], "rank": rank, "test": t,
           "selected_accuracy": float(np.mean(x)), "random_accuracy": acc, "n": len(keys),
           "draw_items": {d: {k: float(bool(r[k][field])) for k in keys} for d, r in zip(draws, per_draw)},
           "text": f"the same edit on {len(draws)} random head sets: {pct(float(np.mean(acc)))} "
                   f"({', '.join(pct(a) for a in acc)}) vs the selected heads {pct(float(np.mean(x)))}; {rank['text']}; "
                   f"per item, selected - mean of the draws {100 * t['value']:+.1f} pp [{100 * t['lo']:+.1f}, "
                   f"{100 * t['hi']:+.1f}], {t['test']} {stats.fmt_p(t['p_value'])}"}
    return out


MIN_DRAWS = 20
"""Fewest random draws whose rank test can reach p < 0.05: 1 / (1 + 20) = 0.048."""


def draw_rank(selected: float, draws: Sequence[float], direction: str) -> dict[str, Any]:
    """The selected units against random draws of as many, as a test: p = (1 + draws at least as
    far in ``direction`` as the selected) / (1 + draws) (the draws' permutation distribution). With
    fewer than :data:`MIN_DRAWS` draws no p reaches 0.05: the draws are *descriptive* (the claim's
    specificity is untested), never a control that passed nor one that explains."""
    sign = -1 if direction == "less" else 1
    n = len(draws)
    at_least = sum(1 for d in draws if sign * (d - selected) >= 0)
    p = (1 + at_least) / (1 + n)
    descriptive = n < MIN_DRAWS
    return {"p_value": p, "draws": n, "at_least_selected": at_least, "descriptive": descriptive, "direction": direction,
            "explains": (not descriptive) and p >= stats.ALPHA, "test": "rank among random draws",
            "text": f"{at_least} of {n} random draws at least as {'low' if sign < 0 else 'high'}: rank p = "
                    f"(1 + {at_least}) / (1 + {n}) = {p:.3f}"
                    + (f" -- {n} draws cannot reach p < 0.05 (needs >= {MIN_DRAWS}): descriptive, specificity untested"
                       if descriptive else "")}


def random_draws(spec, arms, results, samples, direction) -> dict[str, Any]:
    """The arm (``value``: an estimate spec) against the child's random-head draws of the
    same thing (``draws``: a path to their values): explains unless the arm lies beyond every
    draw in the claimed direction (no per-item test exists for these draws)."""
    sel = estimate(results, spec["value"])["value"]
    draws = [float(v) for v in at(results, list(spec["draws"]))]
    if not draws:
        raise Missing("no random draws in the child run")
    rank = draw_rank(sel, draws, direction)
    shown = pct if all(0 <= v <= 1 for v in (sel, *draws)) else (lambda v: f"{v:.3g}")  # a share, else a number (nats)
    return {"explains": rank["explains"], "descriptive": rank["descriptive"], "rank": rank, "selected": sel,
            "draws": draws, "text": f"{spec.get('label', 'the same on random heads')}: {', '.join(shown(d) for d in draws)} "
                                    f"vs {shown(sel)} selected; {rank['text']}"}
