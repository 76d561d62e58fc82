"""Head scores and head selection of paper 000 (sec. 4 eq. 3, sec. 5.3, sec. 6, App. D, E, I)."""

from __future__ import annotations

import numpy as np
import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mcqa import head_scores as hs


def test_qk_scores_is_plain_dot_product_per_option():
    # q = (1, 2); keys of three options: (3, 0), (0, 1), (1, 1)
    # q·k = 1*3 + 2*0 = 3,  1*0 + 2*1 = 2,  1*1 + 2*1 = 3
    q = np.array([1.0, 2.0]).reshape(1, 1, 1, 2)
    k = np.array([[3.0, 0.0], [0.0, 1.0], [1.0, 1.0]]).reshape(1, 1, 1, 3, 2)
    s = hs.qk_scores(q, k)
    assert s.shape == (1, 1, 1, 3)
    np.testing.assert_allclose(s[0, 0, 0], [3.0, 2.0, 3.0])
    # options 0 and 2 tie: the prediction is one of them (a seeded draw, see the tie tests)
    assert hs.qk_predictions(s)[0, 0, 0] in (0, 2)


def test_qk_scores_rejects_mismatched_shapes():
    with pytest.raises(WhiteboxError, match="queries must be"):
        hs.qk_scores(np.zeros((1, 1, 1, 2)), np.zeros((1, 1, 1, 3, 4)))


def _two_head_scores() -> tuple[np.ndarray, np.ndarray]:
    # 3 items, 1 layer, 2 heads, 3 options; gold = [0, 1, 2]
    # head 0 argmaxes: item0 -> 0, item1 -> 1, item2 -> 0  => 2/3 correct
    # head 1 argmaxes: item0 -> 2, item1 -> 2, item2 -> 2  => 1/3 correct
    s = np.zeros((3, 1, 2, 3))
    s[0, 0, 0] = [5, 1, 0]
    s[1, 0, 0] = [0, 4, 1]
    s[2, 0, 0] = [3, 0, 2]
    s[:, 0, 1] = [0, 0, 1]
    return s, np.array([0, 1, 2])


def test_predictions_and_accuracy_table():
    s, gold = _two_head_scores()
    preds = hs.attention_predictions(s)
    assert preds[:, 0, 0].tolist() == [0, 1, 0]
    assert preds[:, 0, 1].tolist() == [2, 2, 2]
    np.testing.assert_allclose(hs.head_accuracy(s, gold), [[2 / 3, 1 / 3]])
    assert hs.head_correct_counts(s, gold).tolist() == [[2, 1]]


def test_option_probabilities_softmax():
    # softmax(0, ln 3) = (1, 3) / 4
    p = hs.option_probabilities(np.array([0.0, np.log(3.0)]))
    np.testing.assert_allclose(p, [0.25, 0.75])


def test_gold_out_of_range_is_a_user_error():
    s, _ = _two_head_scores()
    with pytest.raises(WhiteboxError, match=r"\[0, 2\]"):
        hs.head_accuracy(s, np.array([0, 1, 3]))


def test_best_head_ties_go_to_lower_layer_then_lower_head():
    # (0,1), (1,0) and (1,1) all have 0.7; (0,1) is in the lowest layer
    table = np.array([[0.5, 0.7], [0.7, 0.7]])
    assert hs.best_head(table) == (0, 1)
    # same layer: the lower head wins
    assert hs.best_head(np.array([[0.2, 0.9, 0.9]])) == (0, 1)
    assert hs.rank_heads(table) == [(0, 1), (1, 0), (1, 1), (0, 0)]


def test_validation_split_sizes_and_seed():
    # 5% of 2000 = 100 >= 50 -> 100 validation items
    s = hs.validation_split(2000, seed=3)
    assert len(s.val) == 100 and len(s.test) == 1900
    assert sorted(np.concatenate([s.val, s.test]).tolist()) == list(range(2000))
    # 5% of 200 = 10 < 50 -> the floor of 50 applies
    assert len(hs.validation_split(200).val) == 50
    # same seed, same split; other seed, other split
    np.testing.assert_array_equal(hs.validation_split(200, seed=1).val, hs.validation_split(200, seed=1).val)
    assert not np.array_equal(hs.validation_split(200, seed=1).val, hs.validation_split(200, seed=2).val)


def test_validation_minimum_enforced_with_clear_error():
    with pytest.raises(WhiteboxError, match="min_val_items"):
        hs.validation_split(40)  # needs 50 validation + 1 test item
    with pytest.raises(WhiteboxError, match="only 50 items"):
        hs.validation_split(50)
    # caller override: ceil(0.05 * 40) = 2 validation items
    assert len(hs.validation_split(40, min_val_items=2).val) == 2


def test_select_best_head_too_few_items_raises():
    s = np.zeros((30, 1, 1, 4))
    with pytest.raises(WhiteboxError, match="min_val_items"):
        hs.select_best_head(s, np.zeros(30, dtype=int))


def test_select_best_head_uses_validation_then_reports_test():
    # 6 items, 2 layers, 2 heads, 2 options; gold all 0; split val = {0,1,2}, test = {3,4,5}
    # head (1,1): correct on all val items, on test only item 3       -> val 3/3, test 1/3
    # head (0,0): correct on val items 0,1, wrong on 2; right on test -> val 2/3, test 3/3
    # others always predict option 1 -> 0 correct
    n = 6
    s = np.zeros((n, 2, 2, 2))
    s[..., 1] = 1.0  # default: every head prefers option 1 (wrong)
    s[[0, 1, 2, 3], 1, 1] = [1.0, 0.0]
    s[[0, 1, 3, 4, 5], 0, 0] = [1.0, 0.0]
    gold = np.zeros(n, dtype=int)
    split = hs.Split(val=np.array([0, 1, 2]), test=np.array([3, 4, 5]))
    sel = hs.select_best_head(s, gold, split=split)
    assert sel.head_id == (1, 1)
    assert sel.val_accuracy == pytest.approx(1.0)
    assert sel.test_accuracy == pytest.approx(1 / 3)
    assert sel.test_predictions.tolist() == [0, 1, 1]
    assert sel.test_accuracy_table[0, 0] == pytest.approx(1.0)


def test_select_best_head_tie_prefers_lower_layer():
    # two heads perfect on every item: (2, 0) and (1, 3); the lower layer (1, 3) wins
    rng = np.random.default_rng(0)
    n, layers, heads, opts = 120, 3, 4, 4
    gold = rng.integers(0, opts, n)
    s = rng.normal(size=(n, layers, heads, opts))
    s[np.arange(n), 2, 0, gold] = 100.0
    s[np.arange(n), 1, 3, gold] = 100.0
    sel = hs.select_best_head(s, gold, seed=5)
    assert sel.head_id == (1, 3)
    assert len(sel.split.val) == 50  # max(ceil(0.05 * 120) = 6, 50)
    assert sel.test_accuracy == 1.0


def test_head_score_app_i_tiny_example():
    # 4 items, 1 layer, 3 heads, 3 options: attention a_{N,t_i}
    a = np.zeros((4, 1, 3, 3))
    # head 0: sums .8 .8 .6 .6 -> mean mass 0.7; argmax 0,1,0,2 -> mode 0 (2 of 4)
    #         share not the mode = 2/4 = 0.5 -> HeadScore = 0.7 * 0.5 = 0.35
    a[:, 0, 0] = [[0.5, 0.2, 0.1], [0.1, 0.6, 0.1], [0.3, 0.2, 0.1], [0.1, 0.1, 0.4]]
    # head 1: always picks option 0 with mass 1 -> 1 * 0 = 0
    a[:, 0, 1] = [0.9, 0.05, 0.05]
    # head 2: mass 0.1 each; argmax 0,1,2,0 -> mode 0 (2/4), not-mode 0.5 -> 0.1 * 0.5 = 0.05
    a[:, 0, 2] = [[0.05, 0.02, 0.03], [0.02, 0.05, 0.03], [0.03, 0.02, 0.05], [0.05, 0.03, 0.02]]
    np.testing.assert_allclose(hs.head_score(a), [[0.35, 0.0, 0.05]])
    assert hs.rank_heads(hs.head_score(a))[0] == (0, 0)


def test_top_heads_and_intersections():
    # 2 layers x 5 heads = 10 heads; top 20% = floor(0.2 * 10) = 2 heads
    t1 = np.array([[0.9, 0.1, 0.2, 0.3, 0.4], [0.8, 0.5, 0.1, 0.1, 0.1]])
    t2 = np.array([[0.9, 0.1, 0.2, 0.3, 0.4], [0.1, 0.5, 0.1, 0.1, 0.95]])
    assert hs.top_heads(t1, 0.2) == [(0, 0), (1, 0)]
    assert hs.top_heads(t2, 0.2) == [(1, 4), (0, 0)]
    assert hs.intersect_top_heads([t1, t2], 0.2) == [(0, 0)]
    assert hs.union_top_heads([t1, t2], 0.2) == [(0, 0), (1, 0), (1, 4)]
    # mean of t1, t2: (0,0)=0.9, (1,0)=0.45, (1,4)=0.525, (1,1)=0.5 -> top 2: (0,0), (1,4)
    assert hs.mixed_top_heads([t1, t2], 0.2) == [(0, 0), (1, 4)]
    # fewer than one head would round to zero: at least one head is kept
    assert hs.top_fraction_count(10, 0.01) == 1
    assert hs.top_fraction_count(1024, 0.01) == 10


def test_universal_heads_listing_9():
    # shot 0: union over datasets of top-2 = {(0,0),(1,0)} ∪ {(1,4),(0,0)}
    # shot 1: dataset tables give {(0,0),(0,4)} ∪ {(1,4),(0,4)}
    # intersection over shots: {(0,0),(1,4)}
    t1 = np.array([[0.9, 0.1, 0.2, 0.3, 0.4], [0.8, 0.5, 0.1, 0.1, 0.1]])
    t2 = np.array([[0.9, 0.1, 0.2, 0.3, 0.4], [0.1, 0.5, 0.1, 0.1, 0.95]])
    t3 = np.array([[0.9, 0.1, 0.2, 0.3, 0.8], [0.1, 0.5, 0.1, 0.1, 0.1]])
    t4 = np.array([[0.1, 0.1, 0.2, 0.3, 0.8], [0.1, 0.5, 0.1, 0.1, 0.9]])
    got = hs.universal_heads({0: {"mmlu": t1, "hellaswag": t2}, 1: {"mmlu": t3, "hellaswag": t4}}, 0.2)
    assert got == [(0, 0), (1, 4)]


def test_min_percentile_app_e():
    # table a: values 0.1, 0.3 / 0.2, 0.4 -> heads strictly below: 0, 2 / 1, 3 -> /(4-1)
    a = np.array([[0.1, 0.3], [0.2, 0.4]])
    b = np.array([[0.4, 0.1], [0.3, 0.2]])  # -> 3, 0 / 2, 1 -> /3
    np.testing.assert_allclose(hs.percentile_table(a), [[0, 2 / 3], [1 / 3, 1]])
    np.testing.assert_allclose(hs.min_percentile([a, b]), [[0, 0], [1 / 3, 1 / 3]])
    # ties: two heads at 0.5 each beat only the 0.1 head -> 1/2
    np.testing.assert_allclose(hs.percentile_table(np.array([[0.5, 0.5, 0.1]])), [[0.5, 0.5, 0.0]])


# ----------------------------------------------------------------- ties and degenerate heads


def test_tied_items_uses_a_relative_tolerance_for_tiny_attention_values():
    s = np.array([[1e-7, 1e-7 * (1 + 1e-8), 5e-8],   # within 1e-6 relative: tied
                  [1e-7, 1.1e-7, 5e-8],              # 10% apart: not tied
                  [0.0, 0.0, -1.0],                  # exact zeros: tied
                  [2.0, -np.inf, -np.inf]])          # padding never ties with a finite top
    assert hs.tied_items(s).tolist() == [True, False, True, False]


def test_tied_items_are_drawn_seeded_not_always_the_first_option():
    """Regression: a constant head predicted option 0 ("A") on every item."""
    s = np.zeros((400, 1, 1, 4))  # every option ties on every item
    pred = hs.option_predictions(s, seed=3)[:, 0, 0]
    counts = np.bincount(pred, minlength=4)
    # 400 draws, uniform over 4: each count ~ Binomial(400, 1/4), sd 8.7; 60..140 is > 4.5 sd
    assert counts.min() > 60 and counts.max() < 140
    np.testing.assert_array_equal(pred, hs.option_predictions(s, seed=3)[:, 0, 0])  # seeded
    assert not np.array_equal(pred, hs.option_predictions(s, seed=4)[:, 0, 0])
    # only the tied options are drawn from
    s2 = np.zeros((50, 1, 1, 4))
    s2[..., 1] = s2[..., 3] = 1.0
    assert set(hs.option_predictions(s2)[:, 0, 0].tolist()) == {1, 3}


def test_predictions_of_one_head_equal_those_of_the_full_array():
    rng = np.random.default_rng(0)
    s = np.round(rng.normal(size=(30, 2, 3, 4)))  # rounding makes many ties
    full = hs.option_predictions(s, seed=1)
    one = hs.option_predictions(s[:, 1, 2], seed=1)
    np.testing.assert_array_equal(full[:, 1, 2], one)


def test_degenerate_head_is_marked_and_never_selected():
    """Regression: with gold always "A", a head whose scores are constant across options
    (e.g. layer-0 QK on identical keys) had validation accuracy 100% and was selected."""
    rng = np.random.default_rng(0)
    n = 120
    gold = np.zeros(n, dtype=int)
    s = rng.normal(size=(n, 2, 2, 4))
    s[:, 0, 0] = 0.7  # constant across options: ties on every item
    s[np.arange(n), 1, 1, gold] += 1.5  # an informative head, right on most items
    split = hs.validation_split(n, min_val_items=60, seed=0)
    sel = hs.select_best_head(s, gold, split=split)
    assert sel.degenerate.tolist() == [[True, False], [False, False]]
    assert sel.head_id == (1, 1)
    assert sel.val_accuracy_table[0, 0] < 0.5  # its ties are drawn: near chance, not 100%
    assert (0, 0) not in hs.rank_heads(sel.val_accuracy_table, exclude=sel.degenerate)
    assert sel.test_correct.tolist() == (sel.predictions[split.test] == 0).astype(int).tolist()


def test_all_heads_degenerate_is_a_clear_error():
    with pytest.raises(WhiteboxError, match="every head"):
        hs.select_best_head(np.ones((10, 1, 2, 3)), np.zeros(10, dtype=int), min_val_items=4)
