"""The shared statistics module against independent references (scipy, hand sums)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (81, 263), (250, 500), (1, 1)])
def test_wilson_equals_scipy(k, n):
    ref = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = stats.wilson(k, n)
    assert lo == pytest.approx(ref.low, abs=1e-12)
    assert hi == pytest.approx(ref.high, abs=1e-12)


def test_proportion_records_n_method_and_lm_eval_stderr():
    correct = [1, 0, 1, 1, 0, 1, 1, 1]
    est = stats.proportion(correct)
    assert est.value == 6 / 8 and est.n == 8 and est.method == "wilson"
    # lm-eval: sample sd (ddof=1) / sqrt(n)
    p = 6 / 8
    assert est.stderr == pytest.approx(math.sqrt(p * (1 - p) * 8 / 7) / math.sqrt(8))
    assert est.lo < est.value < est.hi


def _mcnemar_by_hand(b: int, c: int) -> float:
    m = b + c
    k = min(b, c)
    tail = sum(math.comb(m, i) for i in range(k + 1)) / 2**m
    return min(1.0, 2 * tail)


@pytest.mark.parametrize("b,c,same", [(10, 2, 30), (5, 5, 0), (0, 7, 3), (1, 0, 9), (40, 22, 100)])
def test_mcnemar_exact_equals_binomial_tail(b, c, same):
    x = np.array([1] * b + [0] * c + [1] * same + [0] * same)
    y = np.array([0] * b + [1] * c + [1] * same + [0] * same)
    t = stats.mcnemar(x, y)
    assert (t.b, t.c, t.n) == (b, c, b + c + 2 * same)
    assert t.p_value == pytest.approx(_mcnemar_by_hand(b, c), rel=1e-9)
    assert t.diff == pytest.approx((b - c) / t.n)
    assert t.lo <= t.diff <= t.hi


def test_mcnemar_no_discordant_pairs_is_p_one():
    t = stats.mcnemar([1, 0, 1], [1, 0, 1])
    assert t.p_value == 1.0 and t.diff == 0.0 and not t.significant


def test_paired_tests_refuse_unpaired_and_non_binary():
    with pytest.raises(WhiteboxError, match="same items"):
        stats.mcnemar([1, 0], [1, 0, 1])
    with pytest.raises(WhiteboxError, match="0/1"):
        stats.mcnemar([0.5, 1], [1, 0])
    with pytest.raises(WhiteboxError, match="empty"):
        stats.proportion([])


def test_bootstrap_mean_interval_is_seeded_and_covers_the_mean():
    rng = np.random.default_rng(1)
    v = rng.normal(0.3, 1.0, 400)
    a, b = stats.bootstrap(v), stats.bootstrap(v)
    assert a == b
    assert a.lo < v.mean() < a.hi
    # percentile bootstrap of a mean ~ normal interval: half-width ~ 1.96 sd / sqrt(n)
    half = 1.96 * v.std(ddof=1) / math.sqrt(v.size)
    assert (a.hi - a.lo) / 2 == pytest.approx(half, rel=0.15)


def test_paired_bootstrap_detects_a_shift_and_not_noise():
    rng = np.random.default_rng(2)
    base = rng.normal(0, 1, 300)
    shifted = base + 0.5 + rng.normal(0, 0.1, 300)
    t = stats.paired_bootstrap(shifted, base)
    assert t.significant and t.lo > 0
    same = stats.paired_bootstrap(base, base)
    assert same.p_value == 1.0 and same.diff == 0.0


def test_wilcoxon_equals_scipy():
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.2, 1, 50), rng.normal(0, 1, 50)
    t = stats.wilcoxon(x, y)
    assert t.p_value == pytest.approx(sps.wilcoxon(x - y).pvalue)


def test_permutation_test_matches_exhaustive_enumeration():
    # 3 vs 3: C(6,3) = 20 relabellings, exhaustive p for |mean diff| >= observed
    from itertools import combinations

    x, y = np.array([5.0, 6.0, 7.0]), np.array([1.0, 2.0, 3.5])
    pooled = np.concatenate([x, y])
    obs = x.mean() - y.mean()
    extreme = sum(
        abs(pooled[list(c)].mean() - np.delete(pooled, list(c)).mean()) >= abs(obs) - 1e-12
        for c in combinations(range(6), 3)
    )
    exact = extreme / 20
    t = stats.permutation_test(x, y, permutations=4000)
    assert t.p_value == pytest.approx(exact, abs=0.02)
    with pytest.raises(WhiteboxError, match="too small"):
        stats.permutation_test([1.0], [2.0, 3.0])


def test_results_keys_beside_the_metric():
    res: dict = {}
    stats.add_proportion(res, "acc,qk_head", [1, 1, 0, 1])
    assert res["acc,qk_head"] == 0.75
    assert res["acc_n,qk_head"] == 4
    assert res["acc_ci_method,qk_head"] == "wilson"
    lo, hi = res["acc_ci,qk_head"]
    assert 0 <= lo < 0.75 < hi <= 1
    stats.add_mean(res, "p_correct", [0.1, 0.2, 0.4])
    assert res["p_correct_ci_method"] == "bootstrap"
    t = stats.add_paired(res, "qk_head_vs_baseline", stats.mcnemar([1, 1, 0, 1], [0, 1, 0, 0]))
    assert res["paired_tests"]["qk_head_vs_baseline"]["b"] == 2
    assert "NOT significant" in stats.verdict(t)


def test_draws_report_every_draw():
    d = stats.draws([0.1, 0.3, 0.2])
    assert d.as_dict()["draws"] == [0.1, 0.3, 0.2]
    assert d.sd == pytest.approx(0.1)


def test_mcnemar_interval_agrees_with_its_exact_p_value():
    # 5 discordant items all one way: exact p = 2 / 2**5 = 0.0625 -- and the interval, now
    # exact too, includes 0 (the bootstrap's excluded it: the two disagreed)
    x = np.array([1] * 13 + [0] * 19)
    y = np.array([1] * 8 + [0] * 24)
    t = stats.mcnemar(x, y)
    assert t.p_value == pytest.approx(0.0625)
    assert t.lo < 0 < t.hi
    assert t.as_dict()["ci_method"] == "exact_cp_product"
    # every (b, c) with b + c <= 30 on n = 60: excludes 0 exactly when p < 0.05
    from scipy.stats import binomtest
    for b in range(31):
        for c in range(31 - b):
            lo, hi = stats.mcnemar_interval(b, c, 60)
            p = 1.0 if b + c == 0 else binomtest(b, b + c, 0.5).pvalue
            assert (lo > 0 or hi < 0) == (p < 0.05), (b, c)
            assert lo <= (b - c) / 60 <= hi


def test_mcnemar_interval_worked_value_and_no_discordant_item():
    # b = 8, c = 2 of n = 40: Clopper-Pearson of pi = 8/10 is [0.4439, 0.9748], of rho = 10/40
    # [0.1269, 0.4120] (both checked against scipy's exact binomial interval below); the
    # difference rho (2 pi - 1) spans [0.4120 x (2 x 0.4439 - 1), 0.4120 x (2 x 0.9748 - 1)]
    from scipy.stats import binomtest
    pi = binomtest(8, 10).proportion_ci(0.95, "exact")
    rho = binomtest(10, 40).proportion_ci(0.95, "exact")
    assert (pi.low, pi.high) == pytest.approx((0.443905, 0.974789), abs=1e-6)
    lo, hi = stats.mcnemar_interval(8, 2, 40)
    assert lo == pytest.approx(rho.high * (2 * pi.low - 1)) and hi == pytest.approx(rho.high * (2 * pi.high - 1))
    # nothing differs on 60 items: +- the 0-of-60 upper bound, 1 - 0.025 ** (1 / 60)
    lo, hi = stats.mcnemar_interval(0, 0, 60)
    assert hi == pytest.approx(1 - 0.025 ** (1 / 60)) and lo == -hi


def test_mcnemar_interval_covers_the_true_difference():
    """By simulation, where the interval conditional on the discordant count covers 55-85%:
    a strong effect on few discordant items (rho = 0.15, pi = 0.95, n = 40)."""
    rng = np.random.default_rng(0)
    n, rho, pi = 40, 0.15, 0.95
    d = rho * (2 * pi - 1)
    hits = 0
    for _ in range(1000):
        m = rng.binomial(n, rho)
        b = rng.binomial(m, pi) if m else 0
        lo, hi = stats.mcnemar_interval(b, m - b, n)
        hits += lo <= d <= hi
    assert hits / 1000 >= 0.95


def test_an_all_zero_estimate_is_not_zero_width():
    """0 of 12: Wilson's upper bound is z^2 / (n + z^2) = 0.2425 (closed form at k = 0),
    Clopper-Pearson's 1 - (alpha/2)^(1/n) = 0.2646; a bootstrap of twelve 0s used to give [0, 0]."""
    z2 = 1.959964 ** 2
    assert stats.wilson(0, 12) == pytest.approx((0.0, z2 / (12 + z2)), abs=1e-6)
    assert stats.clopper_pearson(0, 12) == pytest.approx((0.0, 1 - 0.025 ** (1 / 12)), abs=1e-9)
    assert stats.clopper_pearson(12, 12)[0] == pytest.approx(0.025 ** (1 / 12), abs=1e-9)
    est = stats.bootstrap([0.0] * 12)
    assert (est.value, est.lo, est.method) == (0.0, 0.0, "wilson_at_bound")
    assert est.hi == pytest.approx(z2 / (12 + z2), abs=1e-6)
    assert stats.bootstrap([1.0] * 12).lo == pytest.approx(12 / (12 + z2), abs=1e-6)
    # paired 0/1 vectors that never differ: +- the 0-of-n rate of differing items
    t = stats.paired_bootstrap([0.0] * 12, [0.0] * 12)
    assert t.p_value == 1.0 and t.hi == pytest.approx(1 - 0.025 ** (1 / 12)) and t.lo == -t.hi
    # Clopper-Pearson against scipy's own exact interval
    from scipy.stats import binomtest
    ci = binomtest(7, 30).proportion_ci(0.95, method="exact")
    assert stats.clopper_pearson(7, 30) == pytest.approx((ci.low, ci.high))


def test_two_groups_all_at_zero_get_newcombes_interval_not_zero_width():
    # Newcombe (1998) Table II, example (h): 0/10 vs 0/20 -> [-0.1611, 0.2775]
    assert stats.newcombe(0, 10, 0, 20) == pytest.approx((-0.1611, 0.2775), abs=1e-4)
    # example (a): 56/70 vs 48/80 -> [0.0524, 0.3339]
    assert stats.newcombe(56, 70, 48, 80) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    t = stats.permutation_test([0.0] * 10, [0.0] * 20)
    assert t.p_value == 1.0 and t.ci_method == "newcombe" and (t.lo, t.hi) == pytest.approx((-0.1611, 0.2775), abs=1e-4)


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(3)
    for m in (1, 2, 5, 17):
        p = np.concatenate([rng.uniform(0, 0.05, m // 2), rng.uniform(0, 1, m - m // 2)])
        rng.shuffle(p)
        ref = multipletests(p, method="holm")[1]
        assert stats.holm(p) == pytest.approx(list(ref))
    # a textbook case (Holm 1979's procedure by hand): 0.01, 0.04, 0.03 -> 0.03, 0.06, 0.06
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    with pytest.raises(WhiteboxError):
        stats.holm([0.5, 1.2])


def test_tost_shows_equivalence_only_when_the_90_interval_is_inside_the_margin():
    from scipy.stats import norm

    # significant difference (z = 4) yet inside the margin: equivalent
    e = stats.tost(0.04, 0.01, margin=0.1)
    assert e.equivalent and 2 * norm.sf(4) < 0.05
    assert e.p == pytest.approx(norm.sf((0.1 - 0.04) / 0.01))
    assert e.hi == pytest.approx(0.04 + 1.644854 * 0.01, abs=1e-6)
    # near zero but too uncertain: not equivalent
    assert not stats.tost(0.0, 0.1, margin=0.1).equivalent
    # the boundary: the 90% interval touching the margin gives p = alpha
    se = 0.02
    v = 0.1 - 1.644854 * se
    assert stats.tost(v, se, margin=0.1).p == pytest.approx(0.05, abs=1e-5)


def test_clustered_difference_matches_statsmodels_cluster_robust_ols():
    import statsmodels.api as sm

    rng = np.random.default_rng(7)
    values, groups, clusters = [], [], []
    for seq in range(25):
        shift = rng.normal(0, 0.5)  # a per-sequence effect: tokens of one sequence correlate
        for _ in range(rng.integers(3, 12)):
            g = rng.random() < 0.6
            values.append(shift + 0.3 * g + rng.normal(0, 0.2))
            groups.append(g)
            clusters.append(seq)
    t = stats.clustered_difference(values, groups, clusters)
    x = sm.add_constant(np.asarray(groups, dtype=float))
    ref = sm.OLS(np.asarray(values), x).fit(cov_type="cluster", cov_kwds={"groups": np.asarray(clusters)}, use_t=True)
    assert t.diff == pytest.approx(ref.params[1])
    assert t.p_value == pytest.approx(ref.pvalues[1], rel=1e-6)
    lo, hi = ref.conf_int()[1]
    assert (t.lo, t.hi) == pytest.approx((lo, hi), rel=1e-6)
    assert t.n == 25
    # the pooled difference is the difference of pooled means
    v, gr = np.asarray(values), np.asarray(groups)
    assert t.diff == pytest.approx(v[gr].mean() - v[~gr].mean())
    with pytest.raises(WhiteboxError, match="clusters"):
        stats.clustered_difference([1.0, 2.0], [True, False], [0, 1])


def test_bootstrap_pairs_resamples_item_pairs_and_counts_undefined_resamples():
    rng = np.random.default_rng(4)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)
    # mean difference: the same item resamples as the paired bootstrap, so the same interval
    est, undefined = stats.bootstrap_pairs(x, y, lambda a, b: float(np.mean(a - b)))
    ref = stats.paired_bootstrap(x, y)
    assert undefined == 0 and est.n == 30
    assert (est.lo, est.hi) == pytest.approx((ref.lo, ref.hi))
    # Pearson r is undefined on a resample with no variance: counted, not in the interval
    xs, ys = np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.2, 0.1, 0.4, 0.9])

    def r(a, b):
        return float(np.corrcoef(a, b)[0, 1]) if np.ptp(a) and np.ptp(b) else float("nan")

    est, undefined = stats.bootstrap_pairs(xs, ys, r, resamples=400)
    idx = np.random.default_rng(stats.SEED).integers(0, 4, size=(400, 4))
    assert undefined == sum(np.ptp(xs[i]) == 0 for i in idx)  # by hand: resamples without a 1
    assert est.value == pytest.approx(np.corrcoef(xs, ys)[0, 1])
    assert stats.bootstrap_pairs(np.zeros(3), ys[:3], r) == (None, stats.BOOTSTRAP_RESAMPLES)  # undefined on the data


def test_against_draws_is_the_bootstrap_vs_the_draw_mean_and_mcnemar_per_draw():
    sel = np.array([1, 1, 1, 0, 1, 1, 0, 1])
    draws = [np.array([0, 1, 0, 0, 1, 0, 0, 0]), np.array([1, 0, 0, 0, 0, 1, 0, 0])]
    vs_mean, vs_each = stats.against_draws(sel, draws)
    mean = (draws[0] + draws[1]) / 2  # by hand: the per-item share of draws right
    assert vs_mean.diff == pytest.approx(sel.mean() - mean.mean())
    assert vs_mean == stats.paired_bootstrap(sel.astype(float), mean)
    assert [t.p_value for t in vs_each] == [_mcnemar_by_hand(4, 0), _mcnemar_by_hand(4, 0)]
    with pytest.raises(WhiteboxError, match="at least one draw"):
        stats.against_draws(sel, [])


def test_derived_keys_name_the_statistics_beside_an_estimate():
    est = stats.proportion([1, 0, 1, 1])
    out: dict = {}
    stats.add_estimate(out, "acc,qk_head", est)
    assert list(out) == ["acc,qk_head", "acc_ci,qk_head", "acc_n,qk_head", "acc_stderr,qk_head", "acc_ci_method,qk_head"]
    assert [stats.is_derived(k) for k in out] == [False, True, True, True, True]
    assert stats.derived_key("pa", "ci") == "pa_ci" and not stats.is_derived("n_items") and not stats.is_derived("pa")
