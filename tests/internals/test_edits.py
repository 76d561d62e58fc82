"""Each intervention against a hand-computed expected result."""

from __future__ import annotations

import copy

import pytest
import torch

from references import blocks
from tiny_models import FAMILY_NAMES, tiny_loaded
from whitebox_eval.internals import (
    Capture,
    EditAttention,
    Engine,
    MaskNeurons,
    Patch,
    ScaleHeads,
    batch_from_ids,
    cells_from_pairs,
)

IDS = [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21, 30, 11, 6, 40, 19]]


def _plain_logits(model, batch):
    with torch.no_grad():
        return model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids).logits[:, -1]


def _o_proj(model, family, layer):
    b = blocks(model, family)[layer]
    return {"gpt2": lambda: b.attn.c_proj, "gpt_neox": lambda: b.attention.dense}.get(family, lambda: b.self_attn.o_proj)()


def _down(model, family, layer):
    b = blocks(model, family)[layer]
    return {"gpt2": lambda: b.mlp.c_proj, "gpt_neox": lambda: b.mlp.dense_4h_to_h}.get(family, lambda: b.mlp.down_proj)()


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("scale", [0.0, 0.5])
def test_scale_heads_equals_scaling_their_output_projection_columns(family, scale):
    lm = tiny_loaded(family)
    batch = batch_from_ids(IDS)
    layer, heads, D = 1, [0, 2], lm.arch.head_dim
    edited = Engine(lm).run(batch, edits=[ScaleHeads(layer, heads, scale)]).logits
    ref_model = copy.deepcopy(lm.model)
    o = _o_proj(ref_model, family, layer)
    with torch.no_grad():
        for h in heads:
            if family == "gpt2":  # Conv1D weight is [in, out]: head h is rows h*D:(h+1)*D
                o.weight[h * D:(h + 1) * D, :] *= scale
            else:
                o.weight[:, h * D:(h + 1) * D] *= scale
    torch.testing.assert_close(edited, _plain_logits(ref_model, batch), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(edited, _plain_logits(lm.model, batch), atol=1e-4)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_mask_neurons_equals_zeroing_down_projection_columns(family):
    lm = tiny_loaded(family)
    batch = batch_from_ids(IDS)
    layer, neurons = 2, [1, 7, 30]
    edited = Engine(lm).run(batch, edits=[MaskNeurons(layer, neurons)]).logits
    ref_model = copy.deepcopy(lm.model)
    down = _down(ref_model, family, layer)
    with torch.no_grad():
        if family == "gpt2":
            down.weight[neurons, :] = 0
        else:
            down.weight[:, neurons] = 0
    torch.testing.assert_close(edited, _plain_logits(ref_model, batch), atol=1e-5, rtol=1e-5)


def test_scale_heads_at_chosen_positions_only():
    lm = tiny_loaded("llama")
    engine = Engine(lm)
    batch = batch_from_ids(IDS)
    base = engine.run(batch, [Capture("head_out", "all")])
    t = engine.run(batch, [Capture("head_out", "all")], edits=[ScaleHeads(0, [1], 0.0, positions=[[2], [5]])])
    h0 = t["head_out"][:, 0]  # [B, S, H, D]
    assert torch.all(h0[0, 2, 1] == 0) and torch.all(h0[1, 5, 1] == 0)
    keep = torch.ones_like(h0, dtype=torch.bool)
    keep[0, 2, 1] = keep[1, 5, 1] = False
    torch.testing.assert_close(h0[keep], base["head_out"][:, 0][keep])


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_patching_the_whole_residual_stream_reproduces_the_source_run(family):
    lm = tiny_loaded(family)
    engine = Engine(lm)
    clean, source = batch_from_ids(IDS), batch_from_ids(IDS[::-1])
    layer = 1
    src = engine.run(source, [Capture("resid", "all", [layer])])
    patched = engine.run(clean, edits=[Patch("resid", layer, "all", src["resid"][:, 0])])
    torch.testing.assert_close(patched.logits, src.logits, atol=1e-5, rtol=1e-5)


def test_patching_one_head_changes_only_that_head():
    lm = tiny_loaded("qwen3")
    engine = Engine(lm)
    batch = batch_from_ids(IDS)
    values = torch.randn(2, 1, lm.arch.n_heads, lm.arch.head_dim)
    t = engine.run(batch, [Capture("head_out", [3], [1])], edits=[Patch("head_out", 1, [3], values, heads=[2])])
    base = engine.run(batch, [Capture("head_out", [3], [1])])
    got, ref = t["head_out"][:, 0, 0], base["head_out"][:, 0, 0]
    torch.testing.assert_close(got[:, 2], values[:, 0, 2])
    torch.testing.assert_close(got[:, [0, 1, 3]], ref[:, [0, 1, 3]])


def _cells():
    # example 0: query 6 -> keys 1 and 3; example 1: query 7 -> key 2
    return cells_from_pairs(2, 8, [[(6, 1), (6, 3)], [(7, 2)]])


@pytest.mark.parametrize("family", ["llama", "gemma2", "gemma3", "gpt2"])
def test_attention_add_changes_exactly_the_chosen_cells(family):
    lm = tiny_loaded(family)
    engine = Engine(lm)
    batch = batch_from_ids(IDS)
    layer, heads, C = 1, [1, 3], 0.25
    base = engine.run(batch, [Capture("attn_full", layers=[layer]), Capture("v", "all", [layer]), Capture("head_out", "all", [layer])])
    t = engine.run(batch, [Capture("attn_full", layers=[layer]), Capture("head_out", "all", [layer])],
                   edits=[EditAttention(layer, heads, _cells(), mode="add", value=C)])
    diff = t["attn_full"][:, 0] - base["attn_full"][:, 0]  # [B, H, S, S]
    expect = torch.zeros_like(diff)
    for h in heads:
        expect[0, h, 6, 1] = expect[0, h, 6, 3] = expect[1, h, 7, 2] = C
    torch.testing.assert_close(diff, expect, atol=1e-6, rtol=0)
    # head output at the edited row = (A + C * cells) @ V, computed by hand
    v = base["v"][:, 0]  # [B, S, Hkv, D]
    kvh = lm.arch.kv_head(1)
    hand = (base["attn_full"][0, 0, 1, 6] + expect[0, 1, 6]) @ v[0, :, kvh]
    torch.testing.assert_close(t["head_out"][0, 0, 6, 1], hand, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(t["head_out"][0, 0, 6, 0], base["head_out"][0, 0, 6, 0], atol=1e-5, rtol=1e-5)


def test_attention_add_above_threshold_only_where_weight_exceeds_it():
    lm = tiny_loaded("llama")
    engine = Engine(lm)
    batch = batch_from_ids(IDS)
    cells = torch.zeros(2, 8, 8, dtype=torch.bool)
    cells[:, 7, :8] = True  # the whole last row
    base = engine.run(batch, [Capture("attn_full", layers=[0])])["attn_full"][:, 0, 0]
    thr = float(base[0, 7].median())
    t = engine.run(batch, [Capture("attn_full", layers=[0])], edits=[EditAttention(0, [0], cells, mode="add_above", value=1.0, threshold=thr)])
    diff = t["attn_full"][:, 0, 0] - base
    assert torch.equal(diff[:, 7] > 0.5, base[:, 7] > thr)
    assert torch.all(diff[:, :7] == 0)


def test_attention_force_sets_uniform_or_given_pattern():
    lm = tiny_loaded("mistral")
    engine = Engine(lm)
    batch = batch_from_ids(IDS)
    t = engine.run(batch, [Capture("attn", [[6], [7]], [2])], edits=[EditAttention(2, [0], _cells(), mode="force")])
    row0, row1 = t["attn"][0, 0, 0, 0], t["attn"][1, 0, 0, 0]
    expect0 = torch.zeros(8)
    expect0[[1, 3]] = 0.5
    expect1 = torch.zeros(8)
    expect1[2] = 1.0
    torch.testing.assert_close(row0, expect0)
    torch.testing.assert_close(row1, expect1)
    pattern = torch.zeros(2, 8, 8)
    pattern[0, 6, 1], pattern[0, 6, 3] = 3.0, 1.0
    pattern[1, 7, 2] = 1.0
    t2 = engine.run(batch, [Capture("attn", [[6], [7]], [2])], edits=[EditAttention(2, [0], _cells(), mode="force", pattern=pattern)])
    assert torch.allclose(t2["attn"][0, 0, 0, 0, [1, 3]], torch.tensor([0.75, 0.25]))


def test_attention_copy_head_copies_the_source_row():
    lm = tiny_loaded("qwen2")
    engine = Engine(lm)
    batch = batch_from_ids(IDS)
    base = engine.run(batch, [Capture("attn", [[6], [7]], [1])])["attn"][:, 0]
    t = engine.run(batch, [Capture("attn", [[6], [7]], [1])], edits=[EditAttention(1, [0], _cells(), mode="copy_head", source_head=3)])
    got = t["attn"][:, 0]
    torch.testing.assert_close(got[:, 0], base[:, 3])
    torch.testing.assert_close(got[:, 1:], base[:, 1:])


def test_attention_rows_of_left_padded_examples_are_edited_in_unpadded_coordinates():
    lm = tiny_loaded("llama")
    engine = Engine(lm)
    short = IDS[1][:5]
    cells = torch.zeros(1, 5, 5, dtype=torch.bool)
    cells[0, 4, 1] = True
    alone = engine.run(batch_from_ids([short]), edits=[EditAttention(0, [2], cells, mode="add", value=0.5)]).logits
    cells2 = torch.zeros(2, 8, 8, dtype=torch.bool)
    cells2[1, 4, 1] = True
    mixed = engine.run(batch_from_ids([IDS[0], short]), edits=[EditAttention(0, [2], cells2, mode="add", value=0.5)]).logits
    torch.testing.assert_close(mixed[1], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["llama", "phi3", "gemma3"])
def test_patching_the_gate_activation_to_zero_silences_the_whole_mlp(family):
    """act(gate) = 0 makes act(gate) * up = 0: the same as masking every neuron."""
    lm = tiny_loaded(family)
    engine = Engine(lm)
    batch = batch_from_ids(IDS)
    zeros = torch.zeros(2, batch.seq_len, lm.arch.d_ff)
    patched = engine.run(batch, edits=[Patch("mlp_gate_act", 1, "all", zeros)]).logits
    masked = engine.run(batch, edits=[MaskNeurons(1, list(range(lm.arch.d_ff)))]).logits
    torch.testing.assert_close(patched, masked, atol=1e-6, rtol=1e-6)
