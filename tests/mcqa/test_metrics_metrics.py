"""Metrics of paper 000 (accuracy, PA, selection bias) and paper 004 (P(correct), EAE, EM)."""

from __future__ import annotations

import numpy as np
import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.formats import metrics as fm
from whitebox_eval.mcqa import metrics as m
from whitebox_eval.tasks import numbers


def test_accuracy_by_hand():
    # 3 of 4 match
    assert m.accuracy([0, 1, 2, 0], [0, 1, 2, 3]) == 0.75
    with pytest.raises(WhiteboxError, match="differ in length"):
        m.accuracy([0, 1], [0])


def test_per_layer_accuracy():
    # 2 items, 2 layers, 2 options, gold (0, 1)
    # layer 0 argmax: item0 -> 0 (ok), item1 -> 0 (wrong) = 0.5; layer 1: 0 (ok), 1 (ok) = 1.0
    s = np.array([[[2.0, 1.0], [3.0, 0.0]], [[5.0, 1.0], [0.0, 2.0]]])
    np.testing.assert_allclose(m.per_layer_accuracy(s, [0, 1]), [0.5, 1.0])


def test_permutation_accuracy_four_items():
    # original:  gold (0,1,2,3), pred (0,1,0,3) -> correct T T F T
    # permuted:  gold (2,0,1,3), pred (2,3,1,0) -> correct T F T F
    # both correct only for item 0 -> PA = 1/4
    pa = m.permutation_accuracy([0, 1, 0, 3], [0, 1, 2, 3], [2, 3, 1, 0], [2, 0, 1, 3])
    assert pa == 0.25
    assert m.accuracy([0, 1, 0, 3], [0, 1, 2, 3]) == 0.75  # PA <= accuracy


def test_selection_bias_app_j():
    # gold (A,A,B,B,C,C), pred (A,A,A,B,A,C); 4 letters, D never gold
    # prediction shares: A 4/6, B 1/6, C 1/6, D 0
    # recalls: A 2/2 = 1, B 1/2, C 1/2, D undefined
    # std over (1, .5, .5): mean 2/3, squared deviations 1/9, 1/36, 1/36 -> var 1/18 -> 0.2357
    sb = m.selection_bias([0, 0, 0, 1, 0, 2], [0, 0, 1, 1, 2, 2], n_options=4)
    np.testing.assert_allclose(sb.prediction_distribution, [4 / 6, 1 / 6, 1 / 6, 0])
    np.testing.assert_allclose(sb.recall[:3], [1.0, 0.5, 0.5])
    assert np.isnan(sb.recall[3])
    assert sb.gold_counts.tolist() == [2, 2, 2, 0]
    assert sb.recall_std == pytest.approx(np.sqrt(1 / 18))


def test_p_correct_renormalized_and_raw():
    # row 0: letters (0.2, 0.2, 0.1, 0.0), gold A -> raw 0.2, within letters 0.2 / 0.5 = 0.4
    # row 1: (0.1, 0.1, 0.1, 0.7), gold D -> raw 0.7, within letters 0.7 / 1.0 = 0.7
    probs = np.array([[0.2, 0.2, 0.1, 0.0], [0.1, 0.1, 0.1, 0.7]])
    np.testing.assert_allclose(fm.p_correct(probs, [0, 3]), [0.4, 0.7])
    np.testing.assert_allclose(fm.p_correct(probs, [0, 3], renormalize=False), [0.2, 0.7])
    assert fm.mean_p_correct({"mcq": [0.4, 0.7], "free": [0.1, 0.2]}) == pytest.approx(
        {"mcq": 0.55, "free": 0.15}
    )


def test_format_correlation_by_hand():
    # x = (0,1,2), y = (1,3,2): deviations (-1,0,1), (-1,1,0); Σ dx dy = 1, Σ dx² = Σ dy² = 2
    # r = 1 / sqrt(2 * 2) = 0.5
    assert fm.format_correlation([0, 1, 2], [1, 3, 2]) == pytest.approx(0.5)
    assert np.isnan(fm.format_correlation([0.3, 0.3, 0.3], [0.1, 0.5, 0.9]))


def test_expected_alignment_error_equal_count_bins():
    # sorted by x: (0.1, y 0.0), (0.2, 0.1) | (0.3, 0.6), (0.5, 0.2) | (0.7, 0.5), (0.9, 1.0)
    # bin means: (0.15, 0.05), (0.40, 0.40), (0.80, 0.75)
    # |x - y|: 0.10, 0.00, 0.05 -> mean over 3 bins = 0.05
    x = [0.9, 0.1, 0.5, 0.3, 0.7, 0.2]
    y = [1.0, 0.0, 0.2, 0.6, 0.5, 0.1]
    res = fm.expected_alignment_error(x, y, n_bins=3)
    np.testing.assert_allclose(res.bin_x, [0.15, 0.40, 0.80])
    np.testing.assert_allclose(res.bin_y, [0.05, 0.40, 0.75])
    assert res.error == pytest.approx(0.05)
    assert res.bin_sizes.tolist() == [2, 2, 2]


def test_expected_alignment_error_uneven_and_invalid():
    # 7 questions, 3 bins -> sizes 3, 2, 2; x = y everywhere -> error 0
    v = np.linspace(0, 1, 7)
    res = fm.expected_alignment_error(v, v, n_bins=3)
    assert res.bin_sizes.tolist() == [3, 2, 2]
    assert res.error == pytest.approx(0.0)
    with pytest.raises(WhiteboxError, match="n_bins"):
        fm.expected_alignment_error([0.1, 0.2], [0.1, 0.2], n_bins=3)


def test_triviaqa_normalization():
    # cut at first ".", lowercase, drop article "the", collapse whitespace
    assert fm.normalize_generation("The  Eiffel Tower. It is in Paris") == "eiffel tower"
    # cut at newline; punctuation becomes space
    assert fm.normalize_generation(" Rock-and-Roll!\nQuestion: next") == "rock and roll"
    assert fm.normalize_answer("A Tale of Two Cities") == "tale of two cities"
    # article only as a whole word: "Theatre" keeps its "the"
    assert fm.normalize_answer("Theatre") == "theatre"


def test_exact_match_with_aliases():
    golds = ["Richard Nixon", "Richard M. Nixon", "Nixon"]
    assert fm.exact_match("nixon.", golds)
    assert fm.exact_match("Richard  Nixon\nQuestion:", golds)
    assert not fm.exact_match("Gerald Ford", golds)
    assert not fm.exact_match(".", golds)  # empty after truncation never matches
    # the generation is cut at its first "." (004), the gold is not
    assert not fm.exact_match("Richard M. Nixon", ["Richard M. Nixon"])
    assert fm.exact_match("Richard M. Nixon", ["Richard M. Nixon"], truncate_gold=True)


def test_first_number_extraction():
    assert numbers.first_number("The answer is -37.") == -37
    assert numbers.first_number("6,237 apples and 5 pears") == 6237
    assert numbers.first_number("Answer: 117\nQuestion: 4 + 4") == 117
    assert numbers.first_number("about 3.5") == 3.5
    assert numbers.first_number("10.0") == 10
    assert numbers.first_number("\u221214053") == -14053
    assert numbers.first_number("no digits here") is None


def test_fraction_correct_of_twenty_samples():
    # 5 of 20 samples name Paris -> 0.25
    samples = ["Paris."] * 5 + ["Lyon"] * 15
    assert len(samples) == fm.FREE_GENERATION_SAMPLES
    assert fm.fraction_correct(samples, ["Paris", "Paris, France"]) == 0.25
    # arithmetic: first numbers 629, 629, 630, none -> 2 of 4
    nums = ["629", " 629 is the sum", "630", "I don't know"]
    assert fm.fraction_correct(nums, np.int64(629), answer_type="number") == 0.5
    with pytest.raises(WhiteboxError, match="numeric gold"):
        fm.fraction_correct(nums, "629", answer_type="number")
