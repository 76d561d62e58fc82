"""Intervals and group tests for MUI, a union over samples (paper 001 sec. 2.2, 3.7).

MUI is not a mean over items: it is ``|union_t N(t)| / (L x width)``, and a union
grows with the number of samples. Two consequences shape what is here:

* **Interval of a run's MUI**: delete-one jackknife over samples (Quenouille-Tukey;
  the standard variance estimate for a union / species count, where a with-replacement
  bootstrap is biased low because a resample holds only ~63% distinct items). The
  interval is ``MUI +- z * se_jack``, clipped to [0, 1]. The shared ``stats`` module
  has no jackknife, so it lives here.
* **Correct vs incorrect (sec. 3.7)**: the paper compares equal numbers of correct and
  incorrect responses with a Mann-Whitney U test over re-drawn subsets; those draws are
  not independent observations (pseudo-replication: p shrinks as draws grow). Here the
  statistic is the MUI difference of equal-size subsets (size ``m`` = the smaller
  group), averaged over a fixed set of subset draws, and its null distribution comes
  from permuting the correct/incorrect labels of the samples
  (:func:`whitebox_eval.stats.permutation_test`). The interval resamples each group
  with replacement before drawing the subsets (duplicates make both unions a little
  smaller; the difference is what is reported). Groups smaller than
  :data:`MIN_GROUP` are not tested.
"""

from __future__ import annotations

import math

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.utilization import KeySets

MIN_GROUP = 5
"""Fewest samples per group for the correct-vs-incorrect test (fewer cannot show a difference)."""

SUBSET_DRAWS = 10
"""Subset draws averaged inside the statistic (they reduce its noise; they are not observations)."""

PERMUTATIONS = 1000


def _union_size(flats: list[np.ndarray], idx) -> int:
    parts = [flats[int(i)] for i in idx]
    return int(np.unique(np.concatenate(parts)).size) if parts else 0


def _leave_one_out(ks: KeySets, idx: list[int]) -> tuple[float, np.ndarray]:
    """MUI of the samples ``idx`` and, for each, the MUI without it (only units unique to it drop)."""
    flats = [ks._flat[i] for i in idx]
    total = ks.total_units
    allu = np.concatenate(flats) if flats else np.zeros(0, dtype=np.int64)
    units, counts = np.unique(allu, return_counts=True)
    once = set(units[counts == 1].tolist())
    loo = np.array([(units.size - sum(1 for u in f.tolist() if u in once)) / total for f in flats])
    return units.size / total, loo


def _jackknife_se(loo: np.ndarray) -> float:
    n = loo.size
    return math.sqrt((n - 1) / n * float(((loo - loo.mean()) ** 2).sum()))


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))


def jackknife_mui(ks: KeySets, samples=None, level: float = stats.LEVEL) -> stats.Estimate:
    """MUI of ``samples`` (all by default) with a delete-one jackknife interval.

    ``se^2 = (n-1)/n * sum_i (theta_(i) - mean theta_(.))^2`` where ``theta_(i)`` is the
    MUI without sample ``i``; only units found in exactly one sample change it.
    """
    idx = ks._resolve(samples)
    n = len(idx)
    if n == 0:
        raise WhiteboxError("cannot compute MUI of an empty set of samples")
    theta, loo = _leave_one_out(ks, idx)
    if n < 2:
        return stats.Estimate(theta, theta, theta, n, "jackknife", 0.0, level)
    se = _jackknife_se(loo)
    z = _z(level)
    return stats.Estimate(theta, max(0.0, theta - z * se), min(1.0, theta + z * se), n, "jackknife", se, level)


def jackknife_mui_difference(before: KeySets, after: KeySets, level: float = stats.LEVEL) -> stats.PairedTest:
    """MUI(after) - MUI(before) on the same items (e.g. two checkpoints, Corollary 1), paired by item:
    the delete-one jackknife drops item ``i`` from both runs; normal interval and two-sided p."""
    if before.sample_ids != after.sample_ids:
        raise WhiteboxError("the two runs must hold the same items in the same order to compare MUI item by item")
    if (before.n_layers, before.width) != (after.n_layers, after.width):
        raise WhiteboxError("the two runs' key sets have different shapes (layers x width); MUI is still comparable "
                            "as a fraction, but not item by item")
    idx = list(range(len(before)))
    if len(idx) < 2:
        raise WhiteboxError("a paired MUI comparison needs at least 2 items")
    ta, la = _leave_one_out(before, idx)
    tb, lb = _leave_one_out(after, idx)
    diff = tb - ta
    se = _jackknife_se(lb - la)
    z = _z(level)
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
    else:
        from scipy.stats import norm

        p = float(2 * norm.sf(abs(diff) / se))
    return stats.PairedTest("jackknife", float(diff), float(diff - z * se), float(diff + z * se), p, len(idx))


def correct_vs_incorrect(
    ks: KeySets, correct: np.ndarray, *, seed: int = 0, draws: int = SUBSET_DRAWS,
    permutations: int = PERMUTATIONS, min_group: int = MIN_GROUP,
) -> dict:
    """Sec. 3.7 at equal subset size: MUI(correct) - MUI(incorrect), permutation p, interval.

    Returns a dict for results.json; ``{"refused": reason}`` when the groups are too
    small or every sample has the same key set (then no subset MUI can differ).
    Values are fractions; ``diff_percent`` etc. are in percentage points.
    """
    correct = np.asarray(correct, dtype=bool)
    if correct.shape != (len(ks),):
        raise WhiteboxError(f"correct must have one entry per sample ({len(ks)}), got {correct.shape}")
    ok, bad = np.flatnonzero(correct), np.flatnonzero(~correct)
    m = int(min(ok.size, bad.size))
    base = {"n_correct": int(ok.size), "n_incorrect": int(bad.size), "subset_size": m}
    if m < min_group:
        return {**base, "refused": f"groups too small to differ: {ok.size} correct vs {bad.size} incorrect "
                                   f"(the test needs >= {min_group} in each)"}
    flats = ks._flat
    if len({f.tobytes() for f in flats}) == 1:
        return {**base, "refused": "every sample has the same key set, so no subset MUI can differ"}
    total = ks.total_units

    def statistic(v: np.ndarray) -> float:
        rng = np.random.default_rng(seed)  # the same subset positions for every group and permutation
        ids = v.astype(np.int64)
        return float(np.mean([_union_size(flats, rng.choice(ids, size=m, replace=False)) for _ in range(draws)])) / total

    test = stats.permutation_test(ok.astype(float), bad.astype(float), statistic=statistic,
                                  permutations=permutations, seed=seed)
    a, b = statistic(ok.astype(float)), statistic(bad.astype(float))
    return {
        **base, "draws": draws, "permutations": permutations,
        "mui_correct_at_m": a, "mui_incorrect_at_m": b,
        "diff": test.diff, "diff_ci": [test.lo, test.hi],
        "diff_percent": 100 * test.diff, "diff_ci_percent": [100 * test.lo, 100 * test.hi],
        "relative_diff": test.diff / ((a + b) / 2) if a + b > 0 else 0.0,
        "p_value": test.p_value, "significant": test.significant, "test": "permutation of group labels",
        "note": "MUI is a union and grows with n: groups are compared at the same subset size m",
    }


def threshold_summary(method: str, value: float | None, width: int, n_layers: int, unit: str,
                      nominal_fraction: float | None = None) -> dict:
    """What the threshold really selects: ``k`` and the effective fraction ``k / width``.

    ``k = floor(0.001 * d_ff)`` is 1 (0.065%) on SmolLM2's d_ff = 1536, not the nominal 0.1%;
    cross-model comparisons should read ``effective_fraction``.
    """
    from whitebox_eval.mui.thresholds import DEFAULT_TOP_FRACTION, top_fraction_k

    out: dict = {"method": method, "value": value, "unit": unit}
    if method == "top_fraction":
        frac = DEFAULT_TOP_FRACTION if value is None else float(value)
        k = top_fraction_k(width, frac)
        out.update(nominal_fraction=frac, k_per_layer=k, effective_fraction=k / width)
    elif method == "topk":
        out.update(nominal_fraction=nominal_fraction, k_per_layer=int(value), effective_fraction=int(value) / width)
    elif method == "global_topk":
        out.update(nominal_fraction=nominal_fraction, k_total=int(value),
                   effective_fraction=int(value) / (width * n_layers))
    else:
        out.update(effective_fraction=None)
    out["max_units_per_layer_per_sample"] = out.get("k_per_layer")
    return out
