"""Intervals: Wilson, Clopper-Pearson, the exact binomial test, the percentile bootstrap over
items (Wilson at a bound, never [0, 0]), Newcombe's interval for a difference of two
proportions; the defaults every suite uses (95%, 2,000 resamples, seed 0)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from whitebox_eval.errors import WhiteboxError


LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 2000
SEED = 0
ALPHA = 0.05


# --------------------------------------------------------------------------- helpers


def as_vector(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64).reshape(-1) if np.ndim(values) else None
    if arr is None:
        raise WhiteboxError(f"{name} must be a sequence of per-item values, not a scalar")
    if arr.size == 0:
        raise WhiteboxError(f"{name} is empty: an interval needs at least one item")
    if not np.all(np.isfinite(arr)):
        raise WhiteboxError(f"{name} holds NaN or infinite values ({int(np.sum(~np.isfinite(arr)))} of {arr.size})")
    return arr


def as_indices(values: Sequence[int] | np.ndarray, name: str) -> np.ndarray:
    """Per-item option indices (0 = first option) as a 1-D int64 array, or one line saying what is wrong."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise WhiteboxError(f"{name} must be a 1-D array of option indices; got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise WhiteboxError(f"{name} must hold integer option indices (0 = first option)")
    return arr.astype(np.int64)


def as_binary(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = as_vector(values, name)
    if not np.all((arr == 0) | (arr == 1)):
        raise WhiteboxError(f"{name} must hold 0/1 (wrong/right) per item")
    return arr.astype(bool)


def checked_level(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise WhiteboxError(f"confidence level must be in (0, 1); got {level}")
    return level



# --------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval: ``value`` in [``lo``, ``hi``] over ``n`` items."""

    value: float
    lo: float
    hi: float
    n: int
    method: str  # "wilson" | "bootstrap"
    stderr: float
    level: float = LEVEL

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.value:.4g} [{self.lo:.4g}, {self.hi:.4g}] (n={self.n}, {self.method})"


def wilson(successes: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval for a proportion ``successes / n`` (Wilson 1927).

    Unlike the Wald interval it stays inside [0, 1] and is not degenerate at 0 or n.
    """
    checked_level(level)
    if n <= 0:
        raise WhiteboxError("a proportion's interval needs n >= 1 items")
    if not 0 <= successes <= n:
        raise WhiteboxError(f"successes must be in [0, n]; got {successes} of {n}")
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)  # exactly 0 (and 1) at the bounds
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def clopper_pearson(successes: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Clopper-Pearson (exact) interval for ``successes / n`` (Clopper and Pearson 1934):
    Beta quantiles; at 0 of n the upper bound is ``1 - (alpha / 2) ** (1 / n)``."""
    checked_level(level)
    if n <= 0 or not 0 <= successes <= n:
        raise WhiteboxError(f"a proportion's interval needs 0 <= successes <= n, n >= 1; got {successes} of {n}")
    from scipy.stats import beta

    a = 1 - level
    lo = 0.0 if successes == 0 else float(beta.ppf(a / 2, successes, n - successes + 1))
    hi = 1.0 if successes == n else float(beta.ppf(1 - a / 2, successes + 1, n - successes))
    return lo, hi


def binomial_p(successes: int, n: int, p0: float, alternative: str) -> float:
    """Exact binomial test of ``successes / n`` against ``p0`` (``greater``, ``less`` or
    ``two-sided``): the above-chance and below-chance checks of a reproduction."""
    from scipy.stats import binomtest

    return float(binomtest(int(successes), int(n), p0, alternative=alternative).pvalue)


def sample_stderr(values: Sequence[float] | np.ndarray) -> float:
    """lm-eval's standard error of a mean: sample sd (ddof=1) / sqrt(n); 0.0 for n = 1."""
    arr = as_vector(values, "values")
    if arr.size < 2:
        return 0.0
    return float(np.std(arr, ddof=1) / math.sqrt(arr.size))


def proportion(correct: Sequence[float] | np.ndarray, level: float = LEVEL) -> Estimate:
    """Accuracy of a 0/1 vector with its Wilson interval."""
    arr = as_binary(correct, "correct")
    k, n = int(arr.sum()), int(arr.size)
    lo, hi = wilson(k, n, level)
    return Estimate(k / n, lo, hi, n, "wilson", sample_stderr(arr), level)


def bootstrap_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(resamples, n))


def bootstrap(
    values: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float] | None = None,
    level: float = LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = SEED,
) -> Estimate:
    """Percentile bootstrap over items (fixed ``seed``) of ``statistic`` (default: the mean)."""
    checked_level(level)
    arr = as_vector(values, "values")
    if resamples < 100:
        raise WhiteboxError(f"a bootstrap needs at least 100 resamples; got {resamples}")
    if statistic is None:
        value = float(arr.mean())
        boots = arr[bootstrap_indices(arr.size, resamples, seed)].mean(axis=1)
    else:
        value = float(statistic(arr))
        boots = np.array([statistic(arr[idx]) for idx in bootstrap_indices(arr.size, resamples, seed)])
    if statistic is None and arr.size and at_one_bound(arr):
        # every item at 0 (or at 1): resampling cannot move the mean, so the percentile
        # interval would be [0, 0]; the items are n Bernoulli trials with no success (or
        # no failure): Wilson over the items (a conservative bound for pooled samples)
        lo, hi = wilson(int(round(arr.mean())) * arr.size, arr.size, level)
        return Estimate(value, lo, hi, int(arr.size), "wilson_at_bound", sample_stderr(arr), level)
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(value, float(lo), float(hi), int(arr.size), "bootstrap", sample_stderr(arr), level)


def at_one_bound(arr: np.ndarray) -> bool:
    """All values 0, or all 1 (a mean of 0/1 or of per-item rates pinned at a bound)."""
    return bool(np.all(arr == 0) or np.all(arr == 1))


def bootstrap_pairs(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], float],
    level: float = LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = SEED,
) -> tuple[Estimate | None, int]:
    """Percentile bootstrap over items of ``statistic(x, y)`` (a correlation, an alignment
    error): item pairs are resampled together. The statistic may be NaN on a resample
    (no variance): the interval comes from the defined resamples, and the count of the
    others is returned beside it; ``stderr`` is the bootstrap sd. ``(None, undefined)``
    when the statistic is undefined on the data itself or on every resample."""
    checked_level(level)
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise WhiteboxError("need two 1-D arrays with one value per item")
    value = float(statistic(a, b))
    boots = np.array([statistic(a[i], b[i]) for i in bootstrap_indices(a.size, resamples, seed)], dtype=np.float64)
    ok = boots[np.isfinite(boots)]
    undefined = int(resamples - ok.size)
    if ok.size == 0 or not np.isfinite(value):
        return None, undefined
    lo, hi = np.quantile(ok, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(value, float(lo), float(hi), int(a.size), "bootstrap", float(np.std(ok, ddof=1)), level), undefined



def newcombe(k1: int, n1: int, k2: int, n2: int, level: float = LEVEL) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p1 - p2 of two independent proportions (Newcombe
    1998, method 10): each side's Wilson bounds combined; at 0 of n1 and 0 of n2 it is
    [-upper(0, n2), upper(0, n1)]."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, level)
    l2, u2 = wilson(k2, n2, level)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


