"""Threshold functions of App. A.4 on worked examples (including ties)."""

import numpy as np
import pytest
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.thresholds import (
    global_topk_mask,
    key_mask,
    layer_top_fraction_mask,
    layer_topk_mask,
    top_fraction_k,
    top_score_mask,
)

# scores [positions=2, layers=2, width=4]
SCORES = torch.tensor([
    [[5.0, 1.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]],   # position 0
    [[4.5, 4.0, 3.0, 1.0], [1.0, 1.0, 2.0, -1.0]],  # position 1
])
# best score per unit over positions: layer 0 [5, 4, 3, 1], layer 1 [1, 1, 2, 0]


def rows(*sets, width=4):
    out = np.zeros((len(sets), width), dtype=bool)
    for layer, s in enumerate(sets):
        out[layer, list(s)] = True
    return out


def test_layer_topk_unique_neurons_with_ties():
    # layer 0: top-2 maxima 5 (n0), 4 (n1). layer 1: 2 (n2), then n0 and n1 tie at 1.
    assert np.array_equal(layer_topk_mask(SCORES, 2, unit="neuron").numpy(), rows({0, 1}, {0, 1, 2}))
    assert np.array_equal(layer_topk_mask(SCORES, 2, unit="neuron", ties="index").numpy(), rows({0, 1}, {0, 2}))


def test_layer_topk_pairs_eq8():
    # layer 0 pooled pairs: 5 (p0,n0), 4.5 (p1,n0) are the top-2 -> only neuron 0.
    # layer 1 pooled: 2 (p1,n2), then 1 at (p1,n0) and (p1,n1) tie.
    got = layer_topk_mask(SCORES, 2, unit="pair").numpy()
    assert np.array_equal(got, rows({0}, {0, 1, 2}))
    got = layer_topk_mask(SCORES, 2, unit="pair", ties="index").numpy()
    assert np.array_equal(got, rows({0}, {0, 2}))


def test_default_unit_is_the_papers_pooled_pairs():
    """Regression: the default must be eq. 8 / 10's pooled (token, neuron) pairs, not each
    neuron's best score. Layer 0's top-2 pairs are both neuron 0 (5 and 4.5)."""
    assert np.array_equal(layer_topk_mask(SCORES, 2).numpy(), layer_topk_mask(SCORES, 2, unit="pair").numpy())
    assert np.array_equal(layer_topk_mask(SCORES, 2).numpy(), rows({0}, {0, 1, 2}))
    assert np.array_equal(key_mask(SCORES, "top_fraction", 0.5).numpy(), rows({0}, {0, 1, 2}))
    assert np.array_equal(global_topk_mask(SCORES, 2).numpy(), rows({0}, set()))


def test_layer_topk_k_larger_than_width_selects_all():
    assert layer_topk_mask(SCORES, 10).all()


def test_global_topk():
    # all maxima: L0 [5,4,3,1], L1 [1,1,2,0]; top-3 = 5, 4, 3 -> all in layer 0
    assert np.array_equal(global_topk_mask(SCORES, 3, unit="neuron").numpy(), rows({0, 1, 2}, set()))
    # top-4 adds 2 (L1 n2)
    assert np.array_equal(global_topk_mask(SCORES, 4, unit="neuron").numpy(), rows({0, 1, 2}, {2}))
    # 5th value is 1, shared by L0 n3, L1 n0, L1 n1: include all three, or the first by index (L0 n3)
    assert np.array_equal(global_topk_mask(SCORES, 5, unit="neuron").numpy(), rows({0, 1, 2, 3}, {0, 1, 2}))
    assert np.array_equal(global_topk_mask(SCORES, 5, unit="neuron", ties="index").numpy(), rows({0, 1, 2, 3}, {2}))
    # pairs: the top-2 triples are 5 and 4.5, both layer 0 neuron 0
    assert np.array_equal(global_topk_mask(SCORES, 2, unit="pair").numpy(), rows({0}, set()))


def test_top_score():
    # ratio 0.5: L0 bar 2.5 -> {0,1,2}; L1 bar 1.0 -> {0,1,2} (>= keeps the ties at 1)
    assert np.array_equal(top_score_mask(SCORES, 0.5).numpy(), rows({0, 1, 2}, {0, 1, 2}))
    # ratio 0.6: L0 bar 3.0 -> {0,1,2} (3 >= 3); L1 bar 1.2 -> {2}
    assert np.array_equal(top_score_mask(SCORES, 0.6).numpy(), rows({0, 1, 2}, {2}))
    # a layer whose maximum is <= 0 selects nothing
    neg = torch.tensor([[[-1.0, -2.0], [0.0, 0.0]]])
    assert not top_score_mask(neg, 0.9).any()


def test_top_fraction_k_floor_like_the_paper():
    assert top_fraction_k(14336) == 14  # int(1/1000 * 14336) in the authors' code
    assert top_fraction_k(18944) == 18
    assert top_fraction_k(100) == 1     # at least one neuron
    assert top_fraction_k(4, 0.5) == 2


def test_top_fraction_mask_equals_topk_with_that_k():
    assert np.array_equal(layer_top_fraction_mask(SCORES, 0.5, unit="neuron").numpy(), rows({0, 1}, {0, 1, 2}))
    big = torch.randn(3, 2, 3000, generator=torch.Generator().manual_seed(0))
    m = layer_top_fraction_mask(big, unit="neuron")  # k = 3 unique neurons per layer
    assert m.sum(dim=1).tolist() == [3, 3]


def test_min_score_excludes_inactive_features():
    s = torch.tensor([[[0.0, 0.0, 0.7, 0.0]]])
    assert layer_topk_mask(s, 2).sum() == 4  # zeros tie at the 2nd place and are all included
    assert np.array_equal(layer_topk_mask(s, 2, min_score=0.0).numpy(), rows({2}))


def test_response_level_2d_input_and_dispatch():
    resp = SCORES.sum(0)  # [layers, width]: L0 [9.5, 5, 6, 1], L1 [1, 1, 2, -1]
    assert np.array_equal(key_mask(resp, "topk", 1).numpy(), rows({0}, {2}))
    assert np.array_equal(key_mask(SCORES, "global_topk", 3).numpy(), global_topk_mask(SCORES, 3).numpy())
    assert np.array_equal(key_mask(SCORES, "topscore", 0.6).numpy(), top_score_mask(SCORES, 0.6).numpy())
    assert np.array_equal(key_mask(SCORES, "top_fraction", 0.5, unit="neuron").numpy(), rows({0, 1}, {0, 1, 2}))


@pytest.mark.parametrize("call", [
    lambda: layer_topk_mask(SCORES, 0),
    lambda: layer_topk_mask(SCORES, 2, unit="token"),
    lambda: layer_topk_mask(torch.zeros(4), 1),
    lambda: key_mask(SCORES, "median", 1),
    lambda: key_mask(SCORES, "topk"),
    lambda: top_score_mask(SCORES, 1.5),
    lambda: layer_topk_mask(torch.tensor([[[float("nan")]]]), 1),
])
def test_user_errors(call):
    with pytest.raises(WhiteboxError):
        call()
