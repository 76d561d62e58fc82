"""Intervals and group tests for MUI, a union over samples (paper 001 sec. 2.2, 3.7).

MUI is not a mean over items: it is ``|union_t N(t)| / (L x width)``, and a union
grows with the number of samples. Two consequences shape what is here:

* **Interval of a run's MUI**: delete-one jackknife over samples (Quenouille-Tukey, as
  used for species counts; a with-replacement bootstrap is biased low here because a
  resample holds only ~63% distinct items). The interval is ``MUI +- z * se_jack``,
  clipped to [0, 1], for the expected MUI of ``n`` samples of the task. In a simulation
  (4 layers x 500 units, Zipf(1.6) unit popularity, 6 units per layer per sample, 300
  runs each) its 95% coverage was 0.947 / 0.953 / 0.977 at n = 24 / 48 / 100. The
  shared ``stats`` module has no jackknife, so it lives here.
* **Correct vs incorrect (sec. 3.7)**: the paper compares equal numbers of correct and
  incorrect responses with a Mann-Whitney U test over re-drawn subsets; those draws are
  not independent observations (pseudo-replication: p shrinks as draws grow). Here both
  groups are rarefied to the same size ``r`` (the exact expected MUI of ``r`` random
  samples of the group, Hurlbert's rarefaction, so no subsets are drawn), the
  difference's null distribution comes from permuting the correct/incorrect labels of
  the samples (:func:`whitebox_eval.stats.permutation_test`), and its interval from a
  delete-one jackknife (a with-replacement bootstrap would shrink the smaller group's
  union more than the larger's). Groups smaller than :data:`MIN_GROUP` are not tested.
"""

from __future__ import annotations

import math

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.utilization import KeySets

MIN_GROUP = 5
"""Fewest samples per group for the correct-vs-incorrect test (fewer cannot show a difference)."""

PERMUTATIONS = 1000


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
    return stats.PairedTest("jackknife", float(diff), float(diff - z * se), float(diff + z * se), p, len(idx),
                            ci_method="jackknife")


GROUPS = "correct = right, incorrect = wrong (an answer, not the gold); off-format responses left out (n_off_format)"
"""What ``correct_vs_incorrect``'s groups are (recorded in it: a run written before the off-format class
has no ``groups`` and folds its off-format responses into ``incorrect``)."""


def rarefied_union(flats: list[np.ndarray], r: int) -> float:
    """Expected number of distinct units in the union of ``r`` samples drawn without replacement
    from ``flats`` (rarefaction, Hurlbert 1971): ``sum_u 1 - C(n - c_u, r) / C(n, r)`` where
    ``c_u`` is the number of samples holding unit ``u``. Exact; no subsets are drawn."""
    n = len(flats)
    if not 1 <= r <= n:
        raise WhiteboxError(f"rarefaction size must be in [1, {n}], got {r}")
    if not flats:
        return 0.0
    _, c = np.unique(np.concatenate(flats), return_counts=True)
    i = np.arange(r)
    miss = np.clip(n - c[:, None] - i[None, :], 0, None) / (n - i)[None, :]
    return float((1.0 - miss.prod(axis=1)).sum())


def correct_vs_incorrect(
    ks: KeySets, correct: np.ndarray, *, off_format: np.ndarray | None = None, seed: int = 0,
    permutations: int = PERMUTATIONS, min_group: int = MIN_GROUP, level: float = stats.LEVEL,
) -> dict:
    """Sec. 3.7 at equal subset size: MUI(correct) - MUI(incorrect), permutation p, interval.

    The groups are the right and the wrong responses (:mod:`whitebox_eval.mui.answer_classes`):
    ``off_format`` marks the responses with no answer to score, left out of both groups and of the
    permutation and counted beside (``n_off_format``; None: no response is off-format).

    Both groups are rarefied to the same size ``r = min(n_correct, n_incorrect) - 1``: the
    statistic is the exact expected MUI of ``r`` samples of each group (:func:`rarefied_union`),
    so a larger group does not get a larger union. p: permutation of the correct/incorrect
    labels (:func:`whitebox_eval.stats.permutation_test`); interval: delete-one jackknife over
    the samples (``r`` stays feasible when one sample leaves the smaller group), normal.

    Returns a dict for results.json; ``{"refused": reason}`` when the groups are too
    small or every sample has the same key set (then no subset MUI can differ).
    Values are fractions; ``diff`` has ``diff_ci``, ``diff_stderr`` and ``diff_ci_method`` beside it.
    """
    correct = np.asarray(correct, dtype=bool)
    off = np.zeros(correct.shape, dtype=bool) if off_format is None else np.asarray(off_format, dtype=bool)
    if correct.shape != (len(ks),) or off.shape != correct.shape:
        raise WhiteboxError(f"correct and off_format must have one entry per sample ({len(ks)}), "
                            f"got {correct.shape} and {off.shape}")
    if (correct & off).any():
        raise WhiteboxError("a response cannot be both correct and off-format")
    ok, bad = np.flatnonzero(correct), np.flatnonzero(~correct & ~off)
    r = int(min(ok.size, bad.size)) - 1
    base = {"n_correct": int(ok.size), "n_incorrect": int(bad.size), "n_off_format": int(off.sum()),
            "groups": GROUPS, "subset_size": max(r, 0)}
    if r + 1 < min_group:
        return {**base, "refused": f"groups too small to differ: {ok.size} correct vs {bad.size} incorrect "
                                   f"(the test needs >= {min_group} in each)"}
    flats = ks._flat
    if len({f.tobytes() for f in flats}) == 1:
        return {**base, "refused": "every sample has the same key set, so no subset MUI can differ"}
    total = ks.total_units

    def statistic(v: np.ndarray) -> float:
        return rarefied_union([flats[int(i)] for i in v], r) / total

    test = stats.permutation_test(ok.astype(float), bad.astype(float), statistic=statistic,
                                  permutations=permutations, seed=seed)
    a, b = statistic(ok), statistic(bad)
    loo = np.array([statistic(np.delete(ok, j)) - b for j in range(ok.size)]
                   + [a - statistic(np.delete(bad, j)) for j in range(bad.size)])
    se = _jackknife_se(loo)
    z = _z(level)
    diff = a - b
    lo, hi = diff - z * se, diff + z * se
    return {
        **base, "permutations": permutations,
        "mui_correct_at_r": a, "mui_incorrect_at_r": b,
        "diff": diff, "diff_ci": [lo, hi], "diff_stderr": se, "diff_ci_method": "jackknife",
        "relative_diff": diff / ((a + b) / 2) if a + b > 0 else 0.0,
        "p_value": test.p_value, "significant": test.significant, "test": "permutation of group labels",
        "note": "MUI is a union and grows with n: both groups are rarefied to the same size r",
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


def lm_eval_metrics(items, samples: dict) -> dict:
    """Per lm-eval task, each ``metric,filter`` averaged over its documents as lm-eval aggregates
    it (mean), with an interval (Wilson for 0/1 metrics, bootstrap otherwise)."""
    values: dict[str, dict[str, list[float]]] = {}
    for it in items:
        got = samples[it.id].get("lm_eval")
        if not got:
            continue
        for filt, metrics in got["filters"].items():
            for m, v in metrics.items():
                if m != "filtered" and isinstance(v, (int, float)):  # bool included
                    values.setdefault(it.group or "", {}).setdefault(f"{m},{filt}", []).append(float(v))
    out: dict = {}
    for task, per in values.items():
        entry: dict = {}
        for key, v in per.items():
            arr = np.asarray(v)
            if np.isin(arr, (0.0, 1.0)).all():
                stats.add_proportion(entry, key, arr.astype(bool))
            else:
                stats.add_mean(entry, key, arr)
        out[task] = entry
    return out


def samples_budget(cfg: MUIConfig) -> int:
    """The generation budget the study used (``--max-new-tokens`` or the task's default)."""
    return cfg.max_new_tokens or cfg.spec.record.generation.max_new_tokens
