"""The Utility Law and its corollaries (paper 001 sec. 3.2-3.7).

Units: the paper reports performance ``P`` and MUI in percent (e.g. Table 5:
``86.5 / 2.7``), and its constants depend on that: the overall fit
``MUI = -4.632 ln(P) + 28.305`` gives MUI ~ 6.97 % at ``P = 100`` (sec. 3.2), and
Table 1's PUR values are ``P% / sqrt(MUI%)``. Pass percentages to reproduce them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from whitebox_eval.errors import WhiteboxError

DEFAULT_PUR_ALPHA = 0.5
"""alpha of eq. 7 ("We set it to 0.5 in experiments")."""


def _vector(name: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.asarray(values, dtype=float).reshape(-1)
    if a.size == 0:
        raise WhiteboxError(f"{name} is empty")
    if not np.all(np.isfinite(a)):
        raise WhiteboxError(f"{name} contains NaN or infinite values")
    return a


# ---------------------------------------------------------------- sec. 3.2
MIN_POINTS_FOR_R2 = 3
"""Two points always lie on the fitted curve (R^2 = 1 says nothing); R^2 and the intervals need >= 3."""


@dataclass(frozen=True)
class UtilityLawFit:
    """``MUI = a ln(P) + b`` fitted by least squares, with R^2 and 95% intervals of ``a`` and ``b``.

    ``r2``, ``a_ci`` and ``b_ci`` are None below :data:`MIN_POINTS_FOR_R2` points. The
    intervals are the OLS t-intervals (``n - 2`` degrees of freedom), which assume
    independent, normal residuals around the law.
    """

    a: float
    b: float
    r2: float | None
    n_points: int
    a_ci: tuple[float, float] | None = None
    b_ci: tuple[float, float] | None = None
    level: float = 0.95

    def predict(self, performance: float | Sequence[float] | np.ndarray) -> np.ndarray:
        """MUI predicted at ``performance``."""
        p = np.asarray(performance, dtype=float)
        if np.any(p <= 0):
            raise WhiteboxError("performance must be > 0 to take its logarithm")
        return self.a * np.log(p) + self.b

    def performance_at(self, mui: float | Sequence[float] | np.ndarray) -> np.ndarray:
        """Inverse of the law: ``P = exp((MUI - b) / a)``."""
        if self.a == 0:
            raise WhiteboxError("the fit is flat (a = 0); it cannot be inverted")
        return np.exp((np.asarray(mui, dtype=float) - self.b) / self.a)


def fit_utility_law(performance: Sequence[float] | np.ndarray, mui: Sequence[float] | np.ndarray,
                    level: float = 0.95) -> UtilityLawFit:
    """Fit the Utility Law ``MUI = A ln(P) + B`` (sec. 3.2) by ordinary least squares.

    ``R^2 = 1 - SS_res / SS_tot`` of the fit in MUI units, and t-intervals of A and B,
    from 3 points on. Needs at least two distinct performance values, all > 0.
    """
    p = _vector("performance", performance)
    m = _vector("mui", mui)
    if p.shape != m.shape:
        raise WhiteboxError(f"performance and mui must have the same length, got {p.size} and {m.size}")
    if np.any(p <= 0):
        raise WhiteboxError("performance must be > 0 for the logarithmic fit; drop models scoring 0")
    x = np.log(p)
    if np.unique(x).size < 2:
        raise WhiteboxError("need at least two distinct performance values to fit the Utility Law")
    design = np.column_stack([x, np.ones_like(x)])
    (a, b), *_ = np.linalg.lstsq(design, m, rcond=None)
    n = int(p.size)
    if n < MIN_POINTS_FOR_R2:
        return UtilityLawFit(a=float(a), b=float(b), r2=None, n_points=n, level=level)
    resid = m - (a * x + b)
    ss_res = float((resid ** 2).sum())
    ss_tot = float(((m - m.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    sxx = float(((x - x.mean()) ** 2).sum())
    s2 = ss_res / (n - 2)
    se_a = math.sqrt(s2 / sxx)
    se_b = math.sqrt(s2 * (1.0 / n + x.mean() ** 2 / sxx))
    t = float(stats.t.ppf(0.5 + level / 2, n - 2))
    return UtilityLawFit(a=float(a), b=float(b), r2=r2, n_points=n, a_ci=(float(a - t * se_a), float(a + t * se_a)),
                         b_ci=(float(b - t * se_b), float(b + t * se_b)), level=level)


# ---------------------------------------------------------------- sec. 3.3
class Direction(enum.Enum):
    """Optimization directions of sec. 3.3 / fig. 4 (change from one (P, MUI) point to another)."""

    EVOLVING = "evolving"          # performance up, MUI down: genuinely stronger
    ACCUMULATING = "accumulating"  # performance up, MUI up: ability emphasised
    COARSENING = "coarsening"      # performance down, MUI up: ability on this task reduced
    COLLAPSING = "collapsing"      # performance down, MUI down: overall breakdown
    UNDETERMINED = "undetermined"  # a change within tolerance on either axis


def classify_direction(
    before: tuple[float, float], after: tuple[float, float], *, tol_performance: float = 0.0,
    tol_mui: float = 0.0,
) -> Direction:
    """Direction of the move ``before -> after``, each a ``(performance, MUI)`` pair (sec. 3.3).

    Definitions follow sec. 3.3's list (sec. 3.4 once calls a joint decrease
    "coarsening"; the list's definitions are used here). A change with
    ``|dP| <= tol_performance`` or ``|dMUI| <= tol_mui`` is ``UNDETERMINED``.
    """
    dp = float(after[0]) - float(before[0])
    dm = float(after[1]) - float(before[1])
    if abs(dp) <= tol_performance or abs(dm) <= tol_mui:
        return Direction.UNDETERMINED
    if dp > 0:
        return Direction.EVOLVING if dm < 0 else Direction.ACCUMULATING
    return Direction.COARSENING if dm > 0 else Direction.COLLAPSING


# ---------------------------------------------------------------- sec. 3.5
def performance_utilization_ratio(
    performance: float | Sequence[float] | np.ndarray, mui: float | Sequence[float] | np.ndarray,
    alpha: float = DEFAULT_PUR_ALPHA,
) -> np.ndarray:
    """PUR of eq. 7: ``P / MUI^alpha`` (alpha = 0.5 in the paper; both in percent as in Table 1)."""
    p = np.asarray(performance, dtype=float)
    m = np.asarray(mui, dtype=float)
    if np.any(m <= 0):
        raise WhiteboxError("MUI must be > 0 to compute PUR")
    return p / m ** alpha


def rank_descending(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """Ranks with 1 = highest score; ties share their average rank."""
    s = _vector("scores", scores)
    return stats.rankdata(-s, method="average")


@dataclass(frozen=True)
class RankCorrelation:
    """Agreement of one score list with a reference ranking."""

    spearman: float
    spearman_p: float
    kendall: float
    kendall_p: float


def rank_correlation(scores: Sequence[float] | np.ndarray, reference_rank: Sequence[float] | np.ndarray) -> RankCorrelation:
    """Spearman's rho and Kendall's tau-b between ``scores`` (higher = better) and a
    reference rank (1 = best), as in Table 1 (sec. 3.5)."""
    s = _vector("scores", scores)
    r = _vector("reference_rank", reference_rank)
    if s.shape != r.shape:
        raise WhiteboxError(f"scores and reference_rank must have the same length, got {s.size} and {r.size}")
    if s.size < 2:
        raise WhiteboxError("rank correlation needs at least two models")
    sp = stats.spearmanr(s, -r)
    kt = stats.kendalltau(s, -r)
    return RankCorrelation(float(sp.statistic), float(sp.pvalue), float(kt.statistic), float(kt.pvalue))


@dataclass(frozen=True)
class RankingAgreement:
    """Per-dataset correlations with the reference and their mean and variance (Table 1)."""

    per_dataset: dict[str, RankCorrelation]
    spearman_mean: float
    spearman_variance: float
    kendall_mean: float
    kendall_variance: float


def ranking_agreement(
    scores_by_dataset: Mapping[str, Sequence[float] | np.ndarray], reference_rank: Sequence[float] | np.ndarray,
) -> RankingAgreement:
    """Correlate each dataset's scores with the reference ranking; summarise across datasets (sec. 3.5).

    The variance is the population variance (ddof = 0) of the coefficients; Table 1
    prints it times 100 (Spearman of performance: mean 0.864, variance 0.018 -> "86.4 delta 1.8").
    """
    if not scores_by_dataset:
        raise WhiteboxError("scores_by_dataset is empty")
    per = {name: rank_correlation(v, reference_rank) for name, v in scores_by_dataset.items()}
    sp = np.array([c.spearman for c in per.values()])
    kt = np.array([c.kendall for c in per.values()])
    return RankingAgreement(per, float(sp.mean()), float(sp.var()), float(kt.mean()), float(kt.var()))


def compare_rankings(
    performance_by_dataset: Mapping[str, Sequence[float] | np.ndarray],
    mui_by_dataset: Mapping[str, Sequence[float] | np.ndarray],
    reference_rank: Sequence[float] | np.ndarray,
    alpha: float = DEFAULT_PUR_ALPHA,
) -> tuple[RankingAgreement, RankingAgreement]:
    """Table 1 in one call: agreement of the performance ranking and of the PUR ranking
    (eq. 7) with the reference, per dataset and summarised (sec. 3.5)."""
    missing = set(performance_by_dataset) ^ set(mui_by_dataset)
    if missing:
        raise WhiteboxError(f"performance and MUI must cover the same datasets; mismatched: {sorted(missing)}")
    pur = {
        name: performance_utilization_ratio(p, mui_by_dataset[name], alpha)
        for name, p in performance_by_dataset.items()
    }
    return ranking_agreement(performance_by_dataset, reference_rank), ranking_agreement(pur, reference_rank)


# ---------------------------------------------------------------- sec. 3.6-3.7
@dataclass(frozen=True)
class MannWhitneyResult:
    """Mann-Whitney U test of two groups (sec. 3.7, fig. 9-10, 16-21)."""

    u: float
    p_value: float
    significant: bool
    alpha: float


def mann_whitney(
    group_a: Sequence[float] | np.ndarray, group_b: Sequence[float] | np.ndarray, *,
    alternative: str = "two-sided", alpha: float = 0.05,
) -> MannWhitneyResult:
    """Mann-Whitney U of ``group_a`` vs ``group_b`` (e.g. per-sample or per-draw MUI of
    correct vs incorrect responses). ``u`` is the statistic of ``group_a``: the number
    of pairs ``(x in a, y in b)`` with ``x > y``, ties counting 1/2. Significant at 95 %
    by default, as in the paper.
    """
    a = _vector("group_a", group_a)
    b = _vector("group_b", group_b)
    if alternative not in ("two-sided", "less", "greater"):
        raise WhiteboxError(f"alternative must be two-sided, less or greater, got {alternative!r}")
    res = stats.mannwhitneyu(a, b, alternative=alternative)
    return MannWhitneyResult(float(res.statistic), float(res.pvalue), bool(res.pvalue < alpha), alpha)
