"""One rule for every verdict, and the smallest detectable effect it quotes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from whitebox_eval import power, stats
from whitebox_eval.reproduce import verdicts as v


def _t(diff, lo, hi, p=None):
    return {"diff": diff, "lo": lo, "hi": hi, **({"p_value": p} if p is not None else {})}


def test_paired_test_verdict_follows_its_p_value_and_sign():
    assert v.verdict(_t(0.10, 0.02, 0.18, p=0.01), "greater")["verdict"] == v.HOLDS
    assert v.verdict(_t(0.10, 0.02, 0.18, p=0.01), "less")["verdict"] == v.CONTRADICTED
    assert v.verdict(_t(-0.10, -0.18, -0.02, p=0.01), "less")["verdict"] == v.HOLDS
    assert v.verdict(_t(0.10, -0.02, 0.22, p=0.20), "greater")["verdict"] == v.NOT_SHOWN


def test_verdict_changes_when_the_statistic_crosses_the_rule():
    """The same difference and interval: p just under / over alpha flips holds <-> not shown;
    the sign of the effect flips holds <-> contradicted."""
    base = dict(diff=0.08, lo=0.001, hi=0.16)
    assert v.verdict({**base, "p_value": stats.ALPHA - 1e-6}, "greater")["verdict"] == v.HOLDS
    assert v.verdict({**base, "p_value": stats.ALPHA}, "greater")["verdict"] == v.NOT_SHOWN
    flipped = dict(diff=-0.08, lo=-0.16, hi=-0.001, p_value=0.01)
    assert v.verdict(flipped, "greater")["verdict"] == v.CONTRADICTED
    # without a p-value the interval decides, against the claim's boundary (than)
    est = {"value": 0.40, "lo": 0.31, "hi": 0.499}
    assert v.verdict(est, "less", than=0.5)["verdict"] == v.HOLDS
    assert v.verdict({**est, "hi": 0.501}, "less", than=0.5)["verdict"] == v.NOT_SHOWN
    assert v.verdict({"value": 0.7, "lo": 0.51, "hi": 0.9}, "less", than=0.5)["verdict"] == v.CONTRADICTED


def test_a_claim_of_no_difference_is_decided_by_tost_on_its_margin():
    # significant (p = 0.001) yet the whole 90% interval inside +-0.05: equivalence holds, given a
    # positive control that reaches the margin at this n (rule 5); without one it is insensitive
    sensitive = {"reaches": True, "text": "a known difference of 0.2 registers"}
    assert v.verdict(_t(0.02, 0.012, 0.028, p=0.001), "none", margin=0.05, sensitivity=sensitive)["verdict"] == v.HOLDS
    out = v.verdict(_t(0.02, 0.012, 0.028, p=0.001), "none", margin=0.05)
    assert out["verdict"] == v.UNINFORMATIVE and out["qualifier"] == "insensitive"
    # near 0 but too wide to place inside the margin: not shown (more items could settle it)
    assert v.verdict(_t(0.01, -0.20, 0.22, p=0.9), "none", margin=0.05)["verdict"] == v.NOT_SHOWN
    # the whole 95% interval beyond the margin: contradicted
    assert v.verdict(_t(0.2, 0.1, 0.3, p=0.001), "none", margin=0.05)["verdict"] == v.CONTRADICTED
    # significant and partly beyond the margin: neither shown equivalent nor beyond it
    assert v.verdict(_t(0.05, 0.02, 0.08, p=0.001), "none", margin=0.05)["verdict"] == v.NOT_SHOWN
    # a statistic's own standard error is used when it has one (the TOST p from it)
    from scipy.stats import norm
    out = v.verdict({"value": 0.04, "lo": -1.0, "hi": 1.0, "se": 0.01, "p_value": 0.0}, "none", margin=0.1,
                    sensitivity=sensitive)
    assert out["verdict"] == v.HOLDS and out["p_value"] == pytest.approx(norm.sf(6.0))


def test_preconditions_and_controls_turn_a_verdict_uninformative_and_say_why():
    sig = _t(0.10, 0.02, 0.18, p=0.01)
    floor = {"kind": "not_at_bound", "passed": False, "text": "floor: no item right in any arm"}
    ok = {"kind": "above_chance", "passed": True, "text": "fine"}
    out = v.verdict(sig, "greater", preconditions=[ok, floor])
    assert out["verdict"] == v.UNINFORMATIVE and "not_at_bound" in out["reason"] and "floor" in out["reason"]
    assert out["statistical_verdict"] == v.HOLDS
    explains = {"kind": "constant_letter", "explains": True, "text": "always 'D' scores 34%"}
    out = v.verdict(sig, "greater", controls=[explains])
    assert out["verdict"] == v.UNINFORMATIVE and "constant_letter explains" in out["reason"]
    # a control demotes a contradiction as it demotes a holding effect (rule 2)
    out = v.verdict(sig, "less", controls=[explains])
    assert out["verdict"] == v.UNINFORMATIVE and out["statistical_verdict"] == v.CONTRADICTED
    # a failed precondition demotes an equivalence too
    eq = v.verdict(_t(0.0, -0.01, 0.01, p=0.5), "none", margin=0.05, preconditions=[floor],
                   sensitivity={"reaches": True, "text": ""})
    assert eq["verdict"] == v.UNINFORMATIVE and eq["statistical_verdict"] == v.HOLDS
    # a control that could not be evaluated does not let the claim hold
    assert v.verdict(sig, "greater", controls=[{"kind": "beat", "error": "no such test", "text": "?"}])[
        "verdict"] == v.UNINFORMATIVE
    # a Holm-adjusted p decides when given
    assert v.verdict(sig, "greater", p=0.2)["verdict"] == v.NOT_SHOWN


def test_an_interval_only_statistic_gets_the_p_its_interval_implies():
    est = {"value": 0.40, "lo": 0.31, "hi": 0.499}
    assert v.interval_p(est, 0.5) < 0.05 < v.interval_p({**est, "hi": 0.501}, 0.5)
    # the half-width on the boundary's side: exactly 0.05 when the interval touches the boundary
    assert v.interval_p({"value": 0.3, "lo": 0.1, "hi": 0.9}, 0.1) == pytest.approx(0.05)


def test_the_smallest_detectable_effect_is_quoted_from_the_interval():
    out = v.verdict(_t(0.0, -0.196, 0.196, p=1.0), "greater")
    se = 0.196 / power._z(0.975)
    assert out["minimum_detectable_effect"] == pytest.approx(2.8016 * se, rel=1e-4)
    assert v.verdict(_t(0.0, 0.0, 0.0, p=1.0), "greater")["minimum_detectable_effect"] is None


# ----------------------------------------------------------------- the power formula


def test_mde_factor_and_items_needed_are_the_textbook_values():
    assert power.minimum_detectable_effect(1.0) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    # Cohen (1988): one-sample, d = 0.5, two-sided 0.05, power 0.8 -> about 32 (normal approximation)
    assert power.items_needed(1.0, 0.5) == 32
    assert power.standard_error_from_interval(-1.959964, 1.959964) == pytest.approx(1.0, abs=1e-6)


def test_mde_gives_80_percent_power_by_simulation():
    """An independent check: simulate a two-sided z-test whose true effect is the MDE."""
    rng = np.random.default_rng(1)
    se = 0.05
    mde = power.minimum_detectable_effect(se)
    estimates = rng.normal(mde, se, size=200_000)
    rate = np.mean(np.abs(estimates / se) > power._z(0.975))
    assert rate == pytest.approx(0.80, abs=0.005)


def test_items_needed_gives_80_percent_power_for_a_t_test():
    """Against scipy's noncentral t: the one-sample t-test at n = items_needed has ~80% power."""
    from scipy.stats import nct, t

    for d in (0.2, 0.3, 0.5):  # n >= 32: the normal approximation's range
        n = power.items_needed(1.0, d)
        crit = t.ppf(0.975, n - 1)
        nc = d * math.sqrt(n)
        achieved = 1 - nct.cdf(crit, n - 1, nc) + nct.cdf(-crit, n - 1, nc)
        assert 0.76 < achieved < 0.84, (d, n, achieved)


def test_mde_of_a_mcnemar_difference_by_simulation():
    """Paired 0/1 outcomes with 40% discordant items: the exact McNemar test detects a
    difference of the MDE (sd of the per-item difference ~ sqrt(0.4)) about 80% of the time."""
    rng = np.random.default_rng(2)
    n, disc = 200, 0.4
    delta = power.minimum_detectable_effect(math.sqrt(disc) / math.sqrt(n))
    pb, pc = (disc + delta) / 2, (disc - delta) / 2  # P(x right, y wrong), P(x wrong, y right)
    from scipy.stats import binomtest

    sims = 2000
    b = rng.binomial(n, pb, size=sims)
    c = np.array([rng.binomial(n - bi, pc / (1 - pb)) for bi in b])
    achieved = np.mean([binomtest(int(bi), int(bi + ci), 0.5).pvalue < 0.05 for bi, ci in zip(b, c)])
    assert 0.74 < achieved < 0.86


def test_a_control_is_said_to_explain_only_an_effect_that_held():
    """The report labels a control the arm does not beat EXPLAINS where it turned a holding or a
    contradicting effect uninformative; beside a not-shown effect it is 'not beaten'."""
    from whitebox_eval.reproduce.cell_text import checks_text

    control = {"kind": "random_heads", "text": "random heads of the same layers", "explains": True}
    held = dict(v.verdict(_t(0.10, 0.02, 0.18, p=0.01), "greater", controls=[control]), controls=[control])
    against = dict(v.verdict(_t(0.10, 0.02, 0.18, p=0.01), "less", controls=[control]), controls=[control])
    unshown = dict(v.verdict(_t(0.10, -0.02, 0.18, p=0.2), "greater", controls=[control]), controls=[control])
    assert held["verdict"] == v.UNINFORMATIVE and against["verdict"] == v.UNINFORMATIVE
    assert checks_text(held).startswith("EXPLAINS random_heads")
    assert checks_text(against).startswith("EXPLAINS random_heads")
    assert checks_text(unshown).startswith("not beaten random_heads")
    beaten = {**control, "explains": False}
    assert checks_text({"controls": [beaten]}).startswith("ok random_heads")
    assert checks_text({"controls": [{**control, "error": "no draws"}]}).startswith("ERROR random_heads")
