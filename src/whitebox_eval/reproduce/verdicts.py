"""One rule for every claim's verdict (stated in the report as :data:`RULE`).

A claim has a statistic (a paired test, an estimate, a fit coefficient) with its 95%
interval, a direction (``greater`` or ``less`` than a boundary, 0 unless stated; or
``none``: no difference beyond a margin), the preconditions and controls its paper file
declares (:mod:`.claim_checks`) and, within its paper, a Holm-adjusted p-value beside the raw one.

- **uninformative**: a precondition failed (named), or the claim would hold but a control
  explains the effect (named);
- **holds**: significant in the claimed direction (p < 0.05); for a claim of no difference,
  the two one-sided tests (TOST) show the difference inside the margin (p < 0.05, i.e. the
  90% interval inside +-margin), on the statistic's own scale;
- **contradicted**: significant the other way; for a claim of no difference, the whole 95%
  interval outside the margin;
- **not shown at this n**: neither, with the smallest effect this n could detect,
  :func:`whitebox_eval.power.minimum_detectable_effect` of the standard error (two-sided
  alpha 0.05, 80% power): more items could settle it;
- **not run** (the child did not run) / **not tested** (it ran, but holds no such statistic).

Where a statistic has no p-value (an interval only), p is the two-sided normal p its
interval implies (:func:`interval_p`): p < 0.05 exactly when the interval excludes the boundary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from whitebox_eval import power, stats

HOLDS = "holds"
NOT_SHOWN = "not shown at this n"
CONTRADICTED = "contradicted"
UNINFORMATIVE = "uninformative"
NOT_RUN = "not run"  # its child run did not run (not at this scale, or failed: the reason is given)
NOT_TESTED = "not tested"  # the child ran but holds no such statistic
VERDICTS = (HOLDS, CONTRADICTED, NOT_SHOWN, UNINFORMATIVE, NOT_RUN, NOT_TESTED)

RULE = ("uninformative = a declared precondition failed (named, with its value), or the claim would hold "
        "but a declared control explains the effect (named: e.g. the head does not beat always answering "
        "the most frequent letter, or the same edit on random heads does as well); "
        "holds = significant in the claimed direction (p < 0.05; a statistic with only an interval gets the "
        "normal p it implies, below 0.05 exactly when the interval excludes the boundary); contradicted = significant the other way; not shown at this n = neither, "
        "with the smallest effect this n could detect, (z_0.975 + z_0.80) x SE (two-sided alpha 0.05, 80% "
        "power): more items could settle it; not run = its child run did not run; not tested = the child "
        "ran but holds no such statistic. A claim of no difference is decided by two one-sided tests "
        "(TOST) against its margin on the statistic's own scale: holds when the 90% interval lies inside "
        "+-margin, contradicted when the whole 95% interval lies outside it. Within each paper, Holm's "
        "adjustment of the deciding p-values gives a second verdict beside the raw one (the overview "
        "counts both); a control's own test is not adjusted. Effects of accuracies are in percentage points.")


def _se(stat: Mapping[str, Any]) -> float:
    if stat.get("se") is not None:
        return float(stat["se"])
    return power.standard_error_from_interval(float(stat["lo"]), float(stat["hi"]))


def _value(stat: Mapping[str, Any]) -> float:
    return float(stat["value"] if "value" in stat else stat["diff"])


def interval_p(stat: Mapping[str, Any], than: float = 0.0) -> float:
    """The two-sided normal p of a statistic that has only an interval: SE is the interval's
    half-width on the side of the boundary over z_0.975, so p < 0.05 exactly when the 95%
    interval excludes the boundary (an asymmetric interval keeps its shape)."""
    from scipy.stats import norm

    value, lo, hi = _value(stat), float(stat["lo"]), float(stat["hi"])
    effect = value - than
    half = (value - lo) if effect > 0 else (hi - value)
    if half <= 0:
        return 1.0 if effect == 0 else 0.0
    return float(min(1.0, 2 * norm.sf(abs(effect) / (half / power._z(0.5 + stats.LEVEL / 2)))))


def decide(stat: Mapping[str, Any], direction: str, than: float = 0.0, margin: float | None = None,
           p: float | None = None, alpha: float = stats.ALPHA) -> dict[str, Any]:
    """The statistical verdict alone (no preconditions or controls): holds, contradicted or
    not shown at this n, with the deciding p-value (``p`` overrides it: a Holm-adjusted p)."""

    value = _value(stat)
    effect = value - than
    se = _se(stat)
    mde = power.minimum_detectable_effect(se, alpha) if se > 0 else None
    out: dict[str, Any] = {"effect": effect, "minimum_detectable_effect": mde}
    if direction == "none":
        if margin is None:
            raise ValueError("a claim of no difference needs a margin")
        eq = stats.tost(effect, se, margin, alpha)
        out["equivalence"] = eq.as_dict()
        p_dec = eq.p if p is None else p
        outside = float(stat["lo"]) - than > margin or float(stat["hi"]) - than < -margin
        v = HOLDS if p_dec < alpha else CONTRADICTED if outside else NOT_SHOWN
        out.update(verdict=v, p_value=p_dec, basis="TOST (two one-sided tests, normal) against +-margin")
        return out
    raw = stat.get("p_value")
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        raw = interval_p(stat, than)
        basis = "p from the 95% interval (normal, its half-width on the boundary's side)"
    else:
        basis = "the test's p-value"
    p_dec = float(raw) if p is None else p
    sign = 1 if direction == "greater" else -1
    significant = p_dec < alpha
    v = HOLDS if significant and sign * effect > 0 else CONTRADICTED if significant and sign * effect < 0 else NOT_SHOWN
    out.update(verdict=v, p_value=p_dec, basis=basis, significant=bool(significant))
    return out


def verdict(stat: Mapping[str, Any], direction: str, than: float = 0.0, margin: float | None = None,
            preconditions: Sequence[Mapping[str, Any]] = (), controls: Sequence[Mapping[str, Any]] = (),
            p: float | None = None, alpha: float = stats.ALPHA) -> dict[str, Any]:
    """The verdict of one claim: :func:`decide`, then its preconditions (a failed one, or
    one the child could not evaluate, makes it uninformative) and controls (one that
    explains a holding effect makes it uninformative). ``reason`` names what decided."""
    out = decide(stat, direction, than, margin, p, alpha)
    failed = [c for c in preconditions if not c.get("passed", False)]
    if failed:
        out["statistical_verdict"] = out["verdict"]
        out["verdict"] = UNINFORMATIVE
        out["reason"] = "; ".join(f"precondition {c['kind']} failed: {c['text']}" for c in failed)
        return out
    explaining = [c for c in controls if c.get("explains") or "error" in c]
    if out["verdict"] == HOLDS and explaining:
        out["statistical_verdict"] = HOLDS
        out["verdict"] = UNINFORMATIVE
        out["reason"] = "; ".join(f"control {c['kind']} explains the effect: {c['text']}" for c in explaining)
    return out


def failed_precondition(preconditions: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The uninformative verdict of a claim whose statistic is undefined because a
    precondition failed (e.g. a group with too few items), or None."""
    failed = [c for c in preconditions if not c.get("passed", False)]
    if not failed:
        return None
    return {"verdict": UNINFORMATIVE,
            "reason": "; ".join(f"precondition {c['kind']} failed: {c['text']}" for c in failed)}
