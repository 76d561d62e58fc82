"""Utility Law, directions, PUR, rank correlations, Mann-Whitney (paper 001 sec. 3.2-3.7)."""

import math

import numpy as np
import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.utility_law import (
    Direction,
    classify_direction,
    compare_rankings,
    fit_utility_law,
    mann_whitney,
    performance_utilization_ratio,
    rank_correlation,
    rank_descending,
    ranking_agreement,
)


def test_fit_recovers_a_and_b_from_synthetic_points():
    p = np.array([5.0, 12.0, 30.0, 55.0, 80.0, 95.0])
    fit = fit_utility_law(p, -4.632 * np.log(p) + 28.305)
    assert fit.a == pytest.approx(-4.632) and fit.b == pytest.approx(28.305)
    assert fit.r2 == pytest.approx(1.0) and fit.n_points == 6
    # the paper's overall law reaches about 6.97 % MUI at 100 % performance (sec. 3.2)
    assert float(fit.predict(100.0)) == pytest.approx(6.97, abs=0.005)
    assert float(fit.performance_at(fit.predict(42.0))) == pytest.approx(42.0)


def test_fit_with_noise_by_hand():
    # ln P = (0, 1, 2), MUI = (1, 2, 4): slope = 3 / 2 = 1.5, intercept = 7/3 - 1.5 = 5/6
    # residuals (1/6, -1/3, 1/6): SS_res = 1/6; SS_tot = 42/9; R^2 = 1 - (1/6)/(42/9) = 27/28
    fit = fit_utility_law([1.0, math.e, math.e ** 2], [1.0, 2.0, 4.0])
    assert fit.a == pytest.approx(1.5)
    assert fit.b == pytest.approx(5 / 6)
    assert fit.r2 == pytest.approx(27 / 28)


def test_fit_errors():
    with pytest.raises(WhiteboxError, match="> 0"):
        fit_utility_law([0.0, 10.0], [1.0, 2.0])
    with pytest.raises(WhiteboxError, match="distinct"):
        fit_utility_law([10.0, 10.0], [1.0, 2.0])
    with pytest.raises(WhiteboxError, match="same length"):
        fit_utility_law([10.0, 20.0], [1.0])


@pytest.mark.parametrize("after,expected", [
    ((60.0, 4.0), Direction.EVOLVING),       # better, less utilization
    ((60.0, 6.0), Direction.ACCUMULATING),   # better, more utilization
    ((40.0, 6.0), Direction.COARSENING),     # worse, more utilization
    ((40.0, 4.0), Direction.COLLAPSING),     # worse, less utilization
    ((50.0, 4.0), Direction.UNDETERMINED),   # performance unchanged
])
def test_direction_quadrants(after, expected):
    assert classify_direction((50.0, 5.0), after) is expected


def test_direction_tolerance_and_paper_example():
    assert classify_direction((50.0, 5.0), (50.5, 4.0), tol_performance=1.0) is Direction.UNDETERMINED
    # Table 9: CodeLlama vs Llama-2 on MBPP 24.8/1.4 -> 44.7/2.9 is accumulating (fig. 5),
    # on GSM8K 25.8/3.8 -> 23.0/4.5 is coarsening
    assert classify_direction((24.8, 1.4), (44.7, 2.9)) is Direction.ACCUMULATING
    assert classify_direction((25.8, 3.8), (23.0, 4.5)) is Direction.COARSENING


def test_pur_by_hand_and_against_table1():
    # 50 / 4^0.5 = 25; alpha = 1: 50 / 4 = 12.5
    assert float(performance_utilization_ratio(50.0, 4.0)) == pytest.approx(25.0)
    assert float(performance_utilization_ratio(50.0, 4.0, alpha=1.0)) == pytest.approx(12.5)
    # Table 5 Vicuna GSM8K 11.9 / 5.4 and Llama-2 25.8 / 3.8 -> Table 1 PUR 5.1 and 13.2
    pur = performance_utilization_ratio([11.9, 25.8], [5.4, 3.8])
    assert np.round(pur, 1).tolist() == [5.1, 13.2]
    with pytest.raises(WhiteboxError):
        performance_utilization_ratio(10.0, 0.0)


def test_rank_descending_ties():
    assert rank_descending([3.0, 1.0, 3.0, 2.0]).tolist() == [1.5, 4.0, 1.5, 3.0]


def test_rank_correlation_by_hand():
    # reference: model0 best. scores (3, 1, 2) rank the models (1, 3, 2): d = (0, 1, -1)
    # Spearman = 1 - 6 * 2 / (3 * (9 - 1)) = 0.5. Kendall: pairs (0,1) and (0,2) concordant,
    # (1,2) discordant -> (2 - 1) / 3
    c = rank_correlation([3.0, 1.0, 2.0], [1, 2, 3])
    assert c.spearman == pytest.approx(0.5)
    assert c.kendall == pytest.approx(1 / 3)


REFERENCE = [9, 8, 7, 6, 5, 4, 3, 2, 1]  # Table 1 "Ref." column, Vicuna ... DeepSeek-Qwen
TABLE1_ACC = {
    "gsm8k": [11.9, 25.8, 58.7, 79.5, 86.5, 82.3, 84.5, 71.6, 82.6],
    "math": [4.0, 5.4, 17.9, 26.6, 48.1, 33.5, 61.9, 74.1, 80.1],
    "arc": [54.0, 60.0, 76.2, 82.1, 81.9, 89.5, 86.8, 82.6, 81.1],
    "humaneval": [13.4, 16.4, 39.0, 59.8, 62.2, 63.4, 71.3, 68.9, 71.9],
    "mbpp": [23.6, 24.8, 39.8, 56.5, 57.9, 61.2, 62.1, 60.3, 62.5],
    "bbh": [28.6, 26.2, 41.3, 64.0, 65.4, 57.5, 66.0, 76.8, 66.5],
}
TABLE1_PUR = {
    "gsm8k": [5.1, 13.2, 33.9, 43.8, 52.6, 55.5, 61.3, 40.7, 51.2],
    "math": [1.7, 2.4, 9.4, 11.7, 24.7, 18.7, 37.0, 39.1, 42.2],
    "arc": [19.6, 25.8, 30.6, 34.4, 42.0, 47.2, 42.4, 43.5, 44.0],
    "humaneval": [12.2, 17.3, 41.1, 54.6, 56.8, 75.8, 85.2, 72.6, 85.9],
    "mbpp": [17.6, 21.0, 33.6, 41.0, 39.0, 58.4, 62.1, 49.2, 57.1],
    "bbh": [9.9, 9.0, 14.2, 23.9, 23.6, 26.3, 28.7, 33.4, 30.4],
}


def test_ranking_agreement_reproduces_table1():
    acc = ranking_agreement(TABLE1_ACC, REFERENCE)
    # Table 1 Spearman row (accuracy): 68.3 98.3 66.7 98.3 95.0 91.7, mean 86.4, variance "1.8"
    assert [round(100 * c.spearman, 1) for c in acc.per_dataset.values()] == [68.3, 98.3, 66.7, 98.3, 95.0, 91.7]
    assert round(100 * acc.spearman_mean, 1) == 86.4
    assert round(100 * acc.spearman_variance, 1) == 1.8
    pur = ranking_agreement(TABLE1_PUR, REFERENCE)
    assert [round(100 * c.spearman, 1) for c in pur.per_dataset.values()] == [68.3, 98.3, 90.0, 95.0, 85.0, 95.0]
    assert round(100 * pur.spearman_mean, 1) == 88.6
    assert round(100 * pur.spearman_variance, 1) == 1.0
    # Kendall, GSM8K and ARC columns: 55.6 / 61.1 and 50.0 / 83.3
    assert round(100 * acc.per_dataset["gsm8k"].kendall, 1) == 55.6
    assert round(100 * pur.per_dataset["gsm8k"].kendall, 1) == 61.1
    assert round(100 * acc.per_dataset["arc"].kendall, 1) == 50.0
    assert round(100 * pur.per_dataset["arc"].kendall, 1) == 83.3


def test_mann_whitney_by_hand():
    # a = (1, 4), b = (2, 3): pairs with a > b: (4,2), (4,3) -> U = 2
    assert mann_whitney([1.0, 4.0], [2.0, 3.0]).u == pytest.approx(2.0)
    # a = (1, 2, 3) all below b = (4, 5): U = 0; exact two-sided p = 2 / C(5, 2) = 0.2
    r = mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0])
    assert r.u == 0.0 and r.p_value == pytest.approx(0.2) and not r.significant
    # a tie counts one half
    assert mann_whitney([2.0], [2.0]).u == pytest.approx(0.5)
    # well separated larger groups are significant
    assert mann_whitney(np.arange(10.0), np.arange(10.0) + 20).significant
    with pytest.raises(WhiteboxError):
        mann_whitney([1.0], [2.0], alternative="bigger")


def test_compare_rankings_matches_table1():
    # MUI recovered from Table 1's PUR (MUI = (P / PUR)^2) gives back the PUR ranking exactly
    mui = {k: (np.array(TABLE1_ACC[k]) / np.array(TABLE1_PUR[k])) ** 2 for k in TABLE1_ACC}
    acc, pur = compare_rankings(TABLE1_ACC, mui, REFERENCE)
    assert round(100 * acc.spearman_mean, 1) == 86.4
    assert round(100 * pur.spearman_mean, 1) == 88.6
    with pytest.raises(WhiteboxError, match="same datasets"):
        compare_rankings(TABLE1_ACC, {"gsm8k": mui["gsm8k"]}, REFERENCE)
