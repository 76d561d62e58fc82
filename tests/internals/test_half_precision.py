"""Attention the engine computes itself (edited layers, captured rows) in a half-precision model,
and the head-mean capture rollout reads."""

from __future__ import annotations

import torch

from tiny_models import tiny_loaded
from whitebox_eval.internals import Capture, EditAttention, Engine, batch_from_ids, cells_from_pairs

IDS = [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21]]  # the second row has 5 left pads


def test_fp16_edited_layers_give_no_nan_from_fully_masked_pad_rows():
    """A left pad's query row sees no key. In fp16, ``finfo(fp16).min`` plus a score below -16
    rounds to -inf (the spacing there is 32), so that row softmaxes to NaN, and the next edited
    layer's q.k with the pad's NaN key spreads it to every real token. Scores, mask and softmax in
    float32 keep it finite. The q/k weights are scaled x30 so pad rows' scores reach that range."""
    lm = tiny_loaded("llama", "sdpa")
    with torch.no_grad():
        for layer in range(lm.arch.n_layers):
            lm.arch.attn_part(layer, "q_proj").weight.mul_(30)
            lm.arch.attn_part(layer, "k_proj").weight.mul_(30)
    lm.model.half()
    engine = Engine(lm)
    batch = batch_from_ids(IDS)
    cells = cells_from_pairs(2, 8, [[(7, 2)], [(2, 1)]])
    noop = [EditAttention(layer, [0, 1, 2, 3], cells, mode="add", value=0.0) for layer in range(lm.arch.n_layers)]
    edited = engine.run(batch, [], noop, logits="all").logits
    plain = engine.run(batch, [], [], logits="all").logits  # SDPA never lets a masked key's NaN in
    real = batch.attention_mask.bool()
    assert torch.isfinite(edited[real]).all()
    # adding 0 changes nothing: the same logits to fp16 rounding of a few layers
    torch.testing.assert_close(edited[real], plain[real], atol=2e-2, rtol=1e-2)


def test_attn_mean_is_the_head_mean_of_attn_full():
    for family in ("llama", "gemma3"):
        engine = Engine(tiny_loaded(family))
        batch = batch_from_ids(IDS)
        t = engine.run(batch, [Capture("attn_full"), Capture("attn_mean")])
        assert t["attn_mean"].shape == (2, engine.arch.n_layers, 8, 8)
        torch.testing.assert_close(t["attn_mean"], t["attn_full"].mean(2), atol=1e-7, rtol=1e-6)
