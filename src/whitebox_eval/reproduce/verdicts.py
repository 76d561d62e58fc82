"""One rule for every claim's verdict (stated in the report as :data:`RULE`).

A claim has a statistic (a paired test, an estimate, a fit coefficient) with its 95%
interval, a direction (``greater`` or ``less`` than a boundary, 0 unless stated; or
``none``: no difference beyond a margin) and, where the child run has one, a p-value.

- **holds**: significant in the claimed direction (p < 0.05 where the test gives a p, else
  the interval excludes the boundary) — for a claim of no difference: not significant,
  and this n could have detected a difference as large as the margin;
- **contradicted**: significant the other way (for a claim of no difference: significant);
- **not shown at this n**: neither; the verdict gives the smallest effect this n could
  detect, :func:`whitebox_eval.power.minimum_detectable_effect` of the standard error the
  interval implies (two-sided alpha 0.05, 80% power).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from whitebox_eval import power, stats

HOLDS = "holds"
NOT_SHOWN = "not shown at this n"
CONTRADICTED = "contradicted"
NOT_RUN = "not run"  # its child run did not run (not at this scale, or failed: the reason is given)
NOT_TESTED = "not tested"  # the child ran but holds no such statistic (e.g. groups too small)
VERDICTS = (HOLDS, NOT_SHOWN, CONTRADICTED, NOT_RUN, NOT_TESTED)

RULE = ("holds = significant in the claimed direction (p < 0.05 where the test gives a p-value, "
        "else the 95% interval excludes the boundary); contradicted = significant the other way; "
        "not shown at this n = neither (the interval includes no effect), with the smallest effect this "
        "n could detect: (z_0.975 + z_0.80) x SE, SE = interval width / (2 x 1.96) (two-sided alpha 0.05, "
        "80% power). A claim of no difference holds when the test is not significant and that smallest "
        "detectable effect is within the claim's margin, and is contradicted when the test is significant.")


def verdict(stat: Mapping[str, Any], direction: str, than: float = 0.0, margin: float | None = None,
            alpha: float = stats.ALPHA) -> dict[str, Any]:
    """The verdict of one statistic: ``stat`` holds ``value`` (or ``diff``), ``lo``, ``hi`` and
    optionally ``p_value``; returns verdict, effect (value - than), significance and the
    smallest detectable effect."""
    value = float(stat["value"] if "value" in stat else stat["diff"])
    lo, hi = float(stat["lo"]), float(stat["hi"])
    p = stat.get("p_value")
    effect = value - than
    if p is not None and not (isinstance(p, float) and math.isnan(p)):
        significant = float(p) < alpha
        basis = "p-value"
    else:
        significant = lo > than or hi < than
        basis = "interval"
    se = power.standard_error_from_interval(lo, hi)
    mde = power.minimum_detectable_effect(se, alpha) if se > 0 else None
    if direction == "none":
        if significant:
            v = CONTRADICTED
        elif margin is not None and mde is not None and mde <= margin:
            v = HOLDS
        else:
            v = NOT_SHOWN
    else:
        sign = 1 if direction == "greater" else -1
        if significant and sign * effect > 0:
            v = HOLDS
        elif significant and sign * effect < 0:
            v = CONTRADICTED
        else:
            v = NOT_SHOWN
    return {"verdict": v, "effect": effect, "significant": bool(significant), "basis": basis,
            "minimum_detectable_effect": mde}
