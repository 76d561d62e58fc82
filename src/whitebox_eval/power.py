"""Power: the smallest effect a test detects, and the items it needs (one formula).

Every test :mod:`whitebox_eval.stats` reports comes with a 95% interval; the standard error
that interval implies gives the smallest true effect the test would detect with 80% power,
``(z_{1-alpha/2} + z_{power}) se`` (the normal approximation; Bloom 1995, "Minimum detectable
effects"). ``whitebox-eval reproduce`` quotes it for every claim not shown at its n and
sizes its quick scale with :func:`items_needed`.
"""

from __future__ import annotations

import math

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.stats.intervals import ALPHA, LEVEL, checked_level

POWER = 0.80


def _z(q: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(q))


def standard_error_from_interval(lo: float, hi: float, level: float = LEVEL) -> float:
    """The standard error a 95% (``level``) interval implies under the normal approximation:
    ``(hi - lo) / (2 z_{(1 + level) / 2})``."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise WhiteboxError(f"an interval needs finite bounds lo <= hi; got [{lo}, {hi}]")
    return (hi - lo) / (2 * _z(0.5 + checked_level(level) / 2))


def minimum_detectable_effect(se: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true effect a two-sided test at ``alpha`` detects with probability
    ``power``, for an estimate with standard error ``se``: ``(z_{1-alpha/2} + z_{power}) se``
    (the normal approximation of every test here; Bloom 1995, "Minimum detectable effects").

    With ``se`` = sd / sqrt(n) this is the usual sample-size formula solved for the effect;
    at alpha = 0.05 and 80% power the factor is 2.80."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise WhiteboxError(f"alpha and power must be in (0, 1); got {alpha}, {power}")
    if se < 0 or not math.isfinite(se):
        raise WhiteboxError(f"a standard error must be finite and >= 0; got {se}")
    return (_z(1 - alpha / 2) + _z(power)) * se


def items_needed(sd: float, effect: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Items for which :func:`minimum_detectable_effect` of ``sd / sqrt(n)`` is at most
    ``effect``: ``ceil(((z_{1-alpha/2} + z_{power}) sd / effect)^2)``. For two accuracies
    on the same items (McNemar) ``sd`` is the sd of the per-item difference, about the
    square root of the share of items on which they differ."""
    if effect == 0 or not math.isfinite(effect):
        raise WhiteboxError(f"an effect to detect must be finite and non-zero; got {effect}")
    return max(1, math.ceil((minimum_detectable_effect(sd, alpha, power) / abs(effect)) ** 2 - 1e-9))
