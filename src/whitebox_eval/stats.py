"""Statistics every suite reports with: intervals, paired tests, controls.

One module so that every headline number in every suite is computed, named and worded
the same way:

- **Intervals.** ``wilson`` for a proportion (accuracy-like metrics, counts of k/n),
  ``clopper_pearson`` where an exact one is wanted; ``bootstrap`` (percentile, over items,
  fixed seed) for a mean of continuous per-item scores -- except when every item sits at 0
  (or every one at 1), where resampling cannot move and Wilson over the items is given
  instead (``wilson_at_bound``): no interval is [0, 0]. All are 95% by default.
- **Paired tests** for "X beats Y on the same items": ``mcnemar`` (exact, two-sided
  binomial on the discordant pairs, with ``mcnemar_interval``, the exact interval that
  agrees with it) for two 0/1 vectors; ``paired_bootstrap`` for two continuous vectors
  (difference of means, percentile interval, two-sided bootstrap p); ``wilcoxon``
  (signed-rank) on per-unit differences.
- **Group tests**: ``permutation_test`` of group labels (difference of a statistic);
  ``clustered_difference`` for tokens nested in sequences (cluster-robust).
- **Families and equivalence**: ``holm`` (adjusted p-values), ``tost`` (two one-sided
  tests against a margin), ``binomial_p`` (exact, against chance).
- **Controls**: ``draws`` summarises random-control draws (mean, sd, every draw).
- **Power** lives in :mod:`whitebox_eval.power` (the smallest effect a test detects).

Results go into ``results.json`` under lm-eval-style keys (``metric,filter``) built by
``add_proportion`` / ``add_mean`` / ``add_paired``: ``acc,qk_head`` keeps the value, and
beside it ``acc_ci,qk_head`` = [lo, hi], ``acc_n,qk_head``, ``acc_stderr,qk_head`` (lm-eval's
sample standard error) and ``acc_ci_method,qk_head`` (``wilson`` or ``bootstrap``).
``verdict`` words a paired test for the CLI summary and the report, so a reader is told
in words when n is too small for the difference claimed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError

LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 2000
SEED = 0
ALPHA = 0.05


# --------------------------------------------------------------------------- helpers


def _vector(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64).reshape(-1) if np.ndim(values) else None
    if arr is None:
        raise WhiteboxError(f"{name} must be a sequence of per-item values, not a scalar")
    if arr.size == 0:
        raise WhiteboxError(f"{name} is empty: an interval needs at least one item")
    if not np.all(np.isfinite(arr)):
        raise WhiteboxError(f"{name} holds NaN or infinite values ({int(np.sum(~np.isfinite(arr)))} of {arr.size})")
    return arr


def _binary(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = _vector(values, name)
    if not np.all((arr == 0) | (arr == 1)):
        raise WhiteboxError(f"{name} must hold 0/1 (wrong/right) per item")
    return arr.astype(bool)


def _level(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise WhiteboxError(f"confidence level must be in (0, 1); got {level}")
    return level


def split_key(key: str) -> tuple[str, str | None]:
    """``"acc,qk_head"`` -> (``"acc"``, ``"qk_head"``); ``"acc"`` -> (``"acc"``, None)."""
    name, _, filt = key.partition(",")
    return name, (filt or None)


DERIVED_SUFFIXES = ("ci", "n", "stderr", "ci_method")
"""What :func:`add_estimate` writes beside ``name,filter``: ``name_ci,filter`` = [lo, hi],
``name_n,filter``, ``name_stderr,filter``, ``name_ci_method,filter``."""


def derived_key(key: str, suffix: str) -> str:
    """The key beside ``key`` for one of its statistics: ``("acc,qk", "ci")`` -> ``"acc_ci,qk"``."""
    name, filt = split_key(key)
    return f"{name}_{suffix}" + (f",{filt}" if filt else "")


def is_derived(key: str) -> bool:
    """Whether ``key`` is one of the statistics beside an estimate (``acc_ci,qk``, ``acc_stderr,qk``, ...)."""
    return split_key(key)[0].endswith(tuple("_" + s for s in DERIVED_SUFFIXES))


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
    _level(level)
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
    _level(level)
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
    arr = _vector(values, "values")
    if arr.size < 2:
        return 0.0
    return float(np.std(arr, ddof=1) / math.sqrt(arr.size))


def proportion(correct: Sequence[float] | np.ndarray, level: float = LEVEL) -> Estimate:
    """Accuracy of a 0/1 vector with its Wilson interval."""
    arr = _binary(correct, "correct")
    k, n = int(arr.sum()), int(arr.size)
    lo, hi = wilson(k, n, level)
    return Estimate(k / n, lo, hi, n, "wilson", sample_stderr(arr), level)


def _bootstrap_indices(n: int, resamples: int, seed: int) -> np.ndarray:
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
    _level(level)
    arr = _vector(values, "values")
    if resamples < 100:
        raise WhiteboxError(f"a bootstrap needs at least 100 resamples; got {resamples}")
    if statistic is None:
        value = float(arr.mean())
        boots = arr[_bootstrap_indices(arr.size, resamples, seed)].mean(axis=1)
    else:
        value = float(statistic(arr))
        boots = np.array([statistic(arr[idx]) for idx in _bootstrap_indices(arr.size, resamples, seed)])
    if statistic is None and arr.size and _at_one_bound(arr):
        # every item at 0 (or at 1): resampling cannot move the mean, so the percentile
        # interval would be [0, 0]; the items are n Bernoulli trials with no success (or
        # no failure): Wilson over the items (a conservative bound for pooled samples)
        lo, hi = wilson(int(round(arr.mean())) * arr.size, arr.size, level)
        return Estimate(value, lo, hi, int(arr.size), "wilson_at_bound", sample_stderr(arr), level)
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(value, float(lo), float(hi), int(arr.size), "bootstrap", sample_stderr(arr), level)


def _at_one_bound(arr: np.ndarray) -> bool:
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
    _level(level)
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise WhiteboxError("need two 1-D arrays with one value per item")
    value = float(statistic(a, b))
    boots = np.array([statistic(a[i], b[i]) for i in _bootstrap_indices(a.size, resamples, seed)], dtype=np.float64)
    ok = boots[np.isfinite(boots)]
    undefined = int(resamples - ok.size)
    if ok.size == 0 or not np.isfinite(value):
        return None, undefined
    lo, hi = np.quantile(ok, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(value, float(lo), float(hi), int(a.size), "bootstrap", float(np.std(ok, ddof=1)), level), undefined


# --------------------------------------------------------------------------- paired tests


@dataclass(frozen=True)
class PairedTest:
    """X vs Y on the same items: ``diff`` = mean(X) - mean(Y), its interval and p-value.

    For McNemar, ``b`` = items X got right and Y wrong, ``c`` = the reverse.
    """

    test: str  # "mcnemar_exact" | "paired_bootstrap" | "wilcoxon" | "permutation"
    diff: float
    lo: float
    hi: float
    p_value: float
    n: int
    b: int | None = None
    c: int | None = None
    alpha: float = ALPHA
    #: how [lo, hi] was made; McNemar's ("exact_cp_product") agrees with its p-value
    ci_method: str = "paired_bootstrap"

    @property
    def significant(self) -> bool:
        return bool(self.p_value < self.alpha)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["significant"] = self.significant
        return {k: v for k, v in out.items() if v is not None}


def _paired(a, b, name_a: str, name_b: str, binary: bool) -> tuple[np.ndarray, np.ndarray]:
    conv = _binary if binary else _vector
    x, y = conv(a, name_a), conv(b, name_b)
    if x.shape != y.shape:
        raise WhiteboxError(f"a paired test needs the same items: {name_a} has {x.size}, {name_b} has {y.size}")
    return x, y


def _paired_diff_interval(x: np.ndarray, y: np.ndarray, level: float, resamples: int, seed: int):
    d = x.astype(np.float64) - y.astype(np.float64)
    boots = d[_bootstrap_indices(d.size, resamples, seed)].mean(axis=1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return d, boots, float(lo), float(hi)


def mcnemar_interval(b: int, c: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """An interval for the paired difference ``(b - c) / n`` that agrees with the exact
    McNemar test. The difference is ``rho (2 pi - 1)``: ``rho`` the share of discordant
    items (``m = b + c`` of ``n``), ``pi`` the share of them going X's way (``b`` of ``m``).
    The interval spans ``rho (2 pi - 1)`` over both Clopper-Pearson intervals. Its sign is
    ``pi``'s alone, so it excludes 0 exactly when pi's interval excludes 1/2, i.e. when the
    exact two-sided McNemar p < 1 - level (at pi = 1/2 the two-sided p is twice the smaller
    tail); letting ``rho`` vary keeps the uncertainty in how many items differ, which the
    interval conditional on ``m`` drops (its coverage falls to ~55-85% for large effects;
    this one's was 98-99.8% in simulation). No discordant item: +- the 0-of-n upper bound."""
    if n <= 0 or b < 0 or c < 0 or b + c > n:
        raise WhiteboxError(f"need 0 <= b + c <= n, n >= 1; got b={b}, c={c}, n={n}")
    m = b + c
    if m == 0:
        u = clopper_pearson(0, n, level)[1]
        return -u, u
    p_lo, p_hi = clopper_pearson(b, m, level)
    r_lo, r_hi = clopper_pearson(m, n, level)
    ends = [r * (2 * q - 1) for r in (r_lo, r_hi) for q in (p_lo, p_hi)]
    d = (b - c) / n
    return min([d, *ends]), max([d, *ends])  # d: rounding at the bounds


def mcnemar(
    x_correct: Sequence[float] | np.ndarray,
    y_correct: Sequence[float] | np.ndarray,
    level: float = LEVEL,
    seed: int = SEED,
) -> PairedTest:
    """Exact McNemar test of two 0/1 vectors on the same items (two-sided).

    Under H0 the b + c discordant items fall to either side with probability 1/2, so
    p = P(Binomial(b + c, 1/2) as or more extreme than b). The difference of accuracies
    gets the exact interval that agrees with it (:func:`mcnemar_interval`).
    """
    x, y = _paired(x_correct, y_correct, "x_correct", "y_correct", binary=True)
    b = int(np.sum(x & ~y))
    c = int(np.sum(~x & y))
    if b + c == 0:
        p = 1.0
    else:
        from scipy.stats import binomtest

        p = float(binomtest(b, b + c, 0.5).pvalue)
    lo, hi = mcnemar_interval(b, c, int(x.size), _level(level))
    return PairedTest("mcnemar_exact", (b - c) / x.size, lo, hi, p, int(x.size), b, c,
                      ci_method="exact_cp_product")


def paired_bootstrap(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    level: float = LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = SEED,
) -> PairedTest:
    """Paired bootstrap of mean(x - y) over items: percentile interval and two-sided p.

    p = 2 * min(share of resampled mean differences <= 0, share >= 0), capped at 1
    (the interval and the p-value come from the same resamples, so p < 1 - level exactly
    when the interval excludes 0, up to resampling ties).
    """
    xa, ya = _paired(x, y, "x", "y", binary=False)
    _level(level)
    d, boots, lo, hi = _paired_diff_interval(xa, ya, level, resamples, seed)
    if np.all(d == 0):
        p = 1.0
        if _within_unit(xa) and _within_unit(ya):  # no item differs: not "exactly 0" but
            u = clopper_pearson(0, d.size, level)[1]  # a 0-of-n rate of differing items
            lo, hi = -u, u
    else:
        p = float(min(1.0, 2 * min(np.mean(boots <= 0), np.mean(boots >= 0))))
        p = max(p, 1.0 / resamples)  # a bootstrap cannot resolve p below 1 / resamples
    return PairedTest("paired_bootstrap", float(d.mean()), lo, hi, p, int(d.size))


def _within_unit(arr: np.ndarray) -> bool:
    return bool(arr.size and np.all((arr >= 0) & (arr <= 1)))


def wilcoxon(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    level: float = LEVEL,
    seed: int = SEED,
) -> PairedTest:
    """Wilcoxon signed-rank test on per-unit differences x - y (two-sided).

    Zero differences are dropped (Wilcoxon's rule); all-zero differences give p = 1.
    The interval is the paired bootstrap of the mean difference.
    """
    xa, ya = _paired(x, y, "x", "y", binary=False)
    d, _, lo, hi = _paired_diff_interval(xa, ya, _level(level), BOOTSTRAP_RESAMPLES, seed)
    if np.count_nonzero(d) == 0:
        p = 1.0
    else:
        from scipy.stats import wilcoxon as _w

        p = float(_w(d, zero_method="wilcox", alternative="two-sided").pvalue)
    return PairedTest("wilcoxon", float(d.mean()), lo, hi, p, int(d.size))


def permutation_test(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float] | None = None,
    permutations: int = BOOTSTRAP_RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> PairedTest:
    """Two-group permutation test of statistic(x) - statistic(y) (default: means).

    Group labels are shuffled ``permutations`` times (fixed seed); p = (1 + #|perm diff| >=
    |observed|) / (1 + permutations). The interval is a percentile bootstrap of the
    difference, resampling each group on its own. Refuses groups of fewer than 2.
    """
    xa, ya = _vector(x, "x"), _vector(y, "y")
    if xa.size < 2 or ya.size < 2:
        raise WhiteboxError(
            f"groups too small to compare: {xa.size} vs {ya.size} (a permutation test needs >= 2 in each)"
        )
    stat = statistic or (lambda v: float(np.mean(v)))
    observed = stat(xa) - stat(ya)
    pooled = np.concatenate([xa, ya])
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(permutations):
        perm = rng.permutation(pooled)
        if abs(stat(perm[: xa.size]) - stat(perm[xa.size :])) >= abs(observed) - 1e-12:
            hits += 1
    p = (1 + hits) / (1 + permutations)
    rng_b = np.random.default_rng(seed + 1)
    boots = np.array(
        [
            stat(xa[rng_b.integers(0, xa.size, xa.size)]) - stat(ya[rng_b.integers(0, ya.size, ya.size)])
            for _ in range(min(permutations, BOOTSTRAP_RESAMPLES))
        ]
    )
    lo, hi = np.quantile(boots, [(1 - _level(level)) / 2, (1 + level) / 2])
    method = "bootstrap_per_group"
    if statistic is None and lo == hi and _at_one_bound(xa) and _at_one_bound(ya):
        lo, hi = newcombe(int(xa.sum()), xa.size, int(ya.sum()), ya.size, level)  # not [d, d] from constants
        method = "newcombe"
    return PairedTest("permutation", float(observed), float(lo), float(hi), float(p), int(xa.size + ya.size),
                      ci_method=method)


def newcombe(k1: int, n1: int, k2: int, n2: int, level: float = LEVEL) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p1 - p2 of two independent proportions (Newcombe
    1998, method 10): each side's Wilson bounds combined; at 0 of n1 and 0 of n2 it is
    [-upper(0, n2), upper(0, n1)]."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, level)
    l2, u2 = wilson(k2, n2, level)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def against_draws(
    selected: Sequence[float] | np.ndarray, draws: Sequence[Sequence[float] | np.ndarray], seed: int = SEED
) -> tuple[PairedTest, list[PairedTest]]:
    """Selected units (heads) vs random draws of as many, on the same items (0/1 per item):
    a paired bootstrap of ``selected`` against the per-item mean over the draws, and an
    exact McNemar test against each draw."""
    if not len(draws):
        raise WhiteboxError("a random control needs at least one draw")
    per_item = np.mean([_binary(d, "draw").astype(np.float64) for d in draws], axis=0)
    sel = _binary(selected, "selected").astype(np.float64)
    return paired_bootstrap(sel, per_item, seed=seed), [mcnemar(selected, d, seed=seed) for d in draws]


# --------------------------------------------------------------------------- families, equivalence, clusters


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input's order: the i-th
    smallest p times (m - i + 1), made monotone and capped at 1. Rejecting where the
    adjusted p < alpha controls the family-wise error rate at alpha."""
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or np.any((p < 0) | (p > 1)) or np.any(np.isnan(p)):
        raise WhiteboxError("Holm's adjustment needs p-values in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted
    return [float(v) for v in out]


@dataclass(frozen=True)
class Equivalence:
    """Two one-sided tests (Schuirmann 1987) of ``|true difference| < margin``: ``p`` is the
    larger one-sided p; equivalence is shown when ``p < alpha``, i.e. when the
    (1 - 2 alpha) interval [``lo``, ``hi``] lies inside (-margin, margin)."""

    value: float
    se: float
    margin: float
    p: float
    lo: float
    hi: float
    alpha: float = ALPHA

    @property
    def equivalent(self) -> bool:
        return bool(self.p < self.alpha)

    def as_dict(self) -> dict:
        return {**asdict(self), "equivalent": self.equivalent, "test": "TOST (normal)"}


def tost(value: float, se: float, margin: float, alpha: float = ALPHA) -> Equivalence:
    """TOST of an estimate with standard error ``se`` against +-``margin`` (normal
    approximation; ``se`` of the statistic on the scale the margin is stated on)."""
    from scipy.stats import norm

    if margin <= 0 or se < 0 or not math.isfinite(se):
        raise WhiteboxError(f"TOST needs a margin > 0 and a finite se >= 0; got {margin}, {se}")
    if se == 0:
        p = 0.0 if abs(value) < margin else 1.0
    else:
        p = float(max(norm.sf((value + margin) / se), norm.sf((margin - value) / se)))
    z = float(norm.ppf(1 - alpha))
    return Equivalence(float(value), float(se), float(margin), p, value - z * se, value + z * se, alpha)


def clustered_difference(values: Sequence[float] | np.ndarray, in_a: Sequence[bool] | np.ndarray,
                         clusters: Sequence[Any] | np.ndarray, level: float = LEVEL) -> PairedTest:
    """Pooled mean of group A minus group B where observations (tokens) come in clusters
    (sequences): OLS of value on a group indicator with a cluster-robust (CR1) standard
    error (Liang and Zeger 1986; Cameron and Miller 2015), t with G - 1 degrees of freedom.
    Tokens of one sequence are not independent; the sequence is the unit. ``n`` is G."""
    from scipy.stats import t as t_dist

    y = _vector(values, "values")
    a = np.asarray(in_a, dtype=bool)
    g = np.asarray(clusters)
    if a.shape != y.shape or g.shape != y.shape:
        raise WhiteboxError("values, groups and clusters need one entry per observation")
    ids, gi = np.unique(g, return_inverse=True)
    if a.all() or not a.any() or ids.size < 3:
        raise WhiteboxError(f"a clustered comparison needs both groups and >= 3 clusters; got {ids.size} clusters, "
                            f"{int(a.sum())} vs {int((~a).sum())} observations")
    x = np.column_stack([np.ones_like(y), a.astype(np.float64)])
    bread = np.linalg.inv(x.T @ x)
    coef = bread @ x.T @ y
    e = y - x @ coef
    scores = np.zeros((ids.size, 2))
    np.add.at(scores, gi, x * e[:, None])
    n_obs, k, n_g = y.size, 2, ids.size
    cov = bread @ (scores.T @ scores) @ bread * (n_g / (n_g - 1)) * ((n_obs - 1) / (n_obs - k))
    se = float(math.sqrt(cov[1, 1]))
    diff = float(coef[1])
    df = n_g - 1
    q = float(t_dist.ppf(0.5 + _level(level) / 2, df))
    p = 1.0 if se == 0 else float(2 * t_dist.sf(abs(diff / se), df))
    return PairedTest("cluster_robust_t", diff, diff - q * se, diff + q * se, p, int(n_g), ci_method="cluster_robust_t")


# --------------------------------------------------------------------------- controls


@dataclass(frozen=True)
class Draws:
    """Random-control draws: mean, sample sd and every draw (never just the mean)."""

    mean: float
    sd: float
    draws: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.draws)

    def as_dict(self) -> dict:
        return {"mean": self.mean, "sd": self.sd, "n": self.n, "draws": list(self.draws)}

    def __str__(self) -> str:
        return f"{self.mean:.4g} ± {self.sd:.2g} (sd over {self.n} draws)"


def draws(values: Sequence[float] | np.ndarray) -> Draws:
    arr = _vector(values, "draws")
    sd = float(np.std(arr, ddof=1)) if arr.size > 1 else 0.0
    return Draws(float(arr.mean()), sd, tuple(float(v) for v in arr))


# --------------------------------------------------------------------------- results.json


def add_estimate(results: MutableMapping, key: str, est: Estimate) -> None:
    """Write ``key`` and, beside it, its ``_ci``, ``_n``, ``_stderr`` and ``_ci_method``."""
    results[key] = est.value
    results[derived_key(key, "ci")] = [est.lo, est.hi]
    results[derived_key(key, "n")] = est.n
    results[derived_key(key, "stderr")] = est.stderr
    results[derived_key(key, "ci_method")] = est.method


def add_proportion(results: MutableMapping, key: str, correct, level: float = LEVEL) -> Estimate:
    est = proportion(correct, level)
    add_estimate(results, key, est)
    return est


def add_mean(results: MutableMapping, key: str, values, level: float = LEVEL, seed: int = SEED) -> Estimate:
    est = bootstrap(values, level=level, seed=seed)
    add_estimate(results, key, est)
    return est


def add_paired(results: MutableMapping, name: str, test: PairedTest) -> PairedTest:
    """Record a paired comparison under ``results["paired_tests"][name]``."""
    results.setdefault("paired_tests", {})[name] = test.as_dict()
    return test


def add_difference(results: MutableMapping, key: str, test: PairedTest | Mapping) -> None:
    """Write a paired test's difference as an estimate: ``key`` = diff, ``_ci``, ``_n``, ``_ci_method``."""
    t = test if isinstance(test, Mapping) else test.as_dict()
    results[key] = t["diff"]
    results[derived_key(key, "ci")] = [t["lo"], t["hi"]]
    results[derived_key(key, "n")] = t["n"]
    results[derived_key(key, "ci_method")] = t.get("ci_method", t["test"])


# --------------------------------------------------------------------------- words


def fmt_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def verdict(test: PairedTest | Mapping, what: str = "the difference") -> str:
    """One sentence for the summary: the difference, its interval, p, n, and what it means."""
    t = test if isinstance(test, Mapping) else test.as_dict()
    head = (
        f"{what}: {t['diff']:+.4g} [{t['lo']:+.4g}, {t['hi']:+.4g}], {t['test']} {fmt_p(t['p_value'])}, n = {t['n']}"
    )
    if t["p_value"] < t.get("alpha", ALPHA):
        return head + " -- significant at 0.05"
    if t["lo"] > 0 or t["hi"] < 0:
        return head + " -- NOT significant by the test (its interval excludes 0, but too few items differ)"
    return head + " -- NOT significant: n is too small to tell this difference from chance"
