"""Paired and group tests: exact McNemar with its agreeing interval, the paired bootstrap,
Wilcoxon's signed rank, the permutation test of group labels, and selected units against
random draws."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from whitebox_eval.errors import WhiteboxError


from whitebox_eval.stats.intervals import (ALPHA, BOOTSTRAP_RESAMPLES, LEVEL, SEED, at_one_bound, as_binary,
                                           bootstrap_indices, checked_level, as_vector, clopper_pearson, newcombe)


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
    conv = as_binary if binary else as_vector
    x, y = conv(a, name_a), conv(b, name_b)
    if x.shape != y.shape:
        raise WhiteboxError(f"a paired test needs the same items: {name_a} has {x.size}, {name_b} has {y.size}")
    return x, y


def _paired_diff_interval(x: np.ndarray, y: np.ndarray, level: float, resamples: int, seed: int):
    d = x.astype(np.float64) - y.astype(np.float64)
    boots = d[bootstrap_indices(d.size, resamples, seed)].mean(axis=1)
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
    lo, hi = mcnemar_interval(b, c, int(x.size), checked_level(level))
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
    checked_level(level)
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
    d, _, lo, hi = _paired_diff_interval(xa, ya, checked_level(level), BOOTSTRAP_RESAMPLES, seed)
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
    xa, ya = as_vector(x, "x"), as_vector(y, "y")
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
    lo, hi = np.quantile(boots, [(1 - checked_level(level)) / 2, (1 + level) / 2])
    method = "bootstrap_per_group"
    if statistic is None and lo == hi and at_one_bound(xa) and at_one_bound(ya):
        lo, hi = newcombe(int(xa.sum()), xa.size, int(ya.sum()), ya.size, level)  # not [d, d] from constants
        method = "newcombe"
    return PairedTest("permutation", float(observed), float(lo), float(hi), float(p), int(xa.size + ya.size),
                      ci_method=method)



def against_draws(
    selected: Sequence[float] | np.ndarray, draws: Sequence[Sequence[float] | np.ndarray], seed: int = SEED
) -> tuple[PairedTest, list[PairedTest]]:
    """Selected units (heads) vs random draws of as many, on the same items (0/1 per item):
    a paired bootstrap of ``selected`` against the per-item mean over the draws, and an
    exact McNemar test against each draw."""
    if not len(draws):
        raise WhiteboxError("a random control needs at least one draw")
    per_item = np.mean([as_binary(d, "draw").astype(np.float64) for d in draws], axis=0)
    sel = as_binary(selected, "selected").astype(np.float64)
    return paired_bootstrap(sel, per_item, seed=seed), [mcnemar(selected, d, seed=seed) for d in draws]


