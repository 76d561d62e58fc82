"""Tests that decide a claim: Holm's adjustment within a family, TOST equivalence against a
margin, and the cluster-robust difference for tokens nested in sequences."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError


from whitebox_eval.stats.intervals import ALPHA, LEVEL, checked_level, as_vector
from whitebox_eval.stats.paired import PairedTest


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

    y = as_vector(values, "values")
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
    q = float(t_dist.ppf(0.5 + checked_level(level) / 2, df))
    p = 1.0 if se == 0 else float(2 * t_dist.sf(abs(diff / se), df))
    return PairedTest("cluster_robust_t", diff, diff - q * se, diff + q * se, p, int(n_g), ci_method="cluster_robust_t")


