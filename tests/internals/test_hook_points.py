"""The hook-name table (internals/hook_points.py) and the capture points it adds: mlp_out, attn_out
and resid_mid against references from the weights, for every family; names served or refused."""

from __future__ import annotations

import pytest
import torch

from references import blocks, hidden_states, mlp_inputs, mlp_out_reference
from tiny_models import FAMILY_NAMES, tiny_loaded
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, Engine, Patch, batch_from_ids
from whitebox_eval.internals.hook_points import hook_from_names, parse_hook
from whitebox_eval.models.architectures import FAMILIES

IDS = [5, 9, 17, 33, 2, 41, 7, 12]
POS = [0, 3, 5, 7]
ATOL = 2e-5


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_branch_outputs_match_the_weights_and_add_up_to_the_residual(family):
    """mlp_out = the MLP computed by hand from its input (post-norm included); resid_pre + attn_out
    + mlp_out = resid (HF's hidden states); resid_mid = resid_pre + attn_out where it exists."""
    lm = tiny_loaded(family)
    engine = Engine(lm)
    points = ["mlp_out", "attn_out"] + ([] if lm.arch.parallel_residual else ["resid_mid"])
    trace = engine.run(batch_from_ids([IDS]), [Capture(p, POS) for p in points])
    hs = hidden_states(lm.model, torch.tensor([IDS]))
    ins = mlp_inputs(lm.model, family, torch.tensor([IDS]))
    for l in range(lm.arch.n_layers - 1):  # HF's last hidden state carries the final norm
        ref_mlp = mlp_out_reference(lm.model, family, l, ins[l])[0, POS]
        torch.testing.assert_close(trace["mlp_out"][0, l], ref_mlp, atol=ATOL, rtol=1e-4)
        pre, post = hs[l][0, POS], hs[l + 1][0, POS]
        torch.testing.assert_close(pre + trace["attn_out"][0, l] + ref_mlp, post, atol=ATOL, rtol=1e-4)
        if "resid_mid" in points:
            torch.testing.assert_close(trace["resid_mid"][0, l], pre + trace["attn_out"][0, l], atol=ATOL, rtol=1e-4)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_hook_names_are_aliases_of_capture_points(family):
    lm = tiny_loaded(family)
    engine = Engine(lm)
    batch = batch_from_ids([IDS])
    t = engine.run(batch, [Capture("blocks.1.hook_mlp_out", POS), Capture("mlp_out", POS, [1], name="m"),
                           Capture("blocks.2.attn.hook_z", POS), Capture("head_out", POS, [2], name="z"),
                           Capture("hook_resid_post", POS, [0]), Capture("resid", POS, [0], name="r")])
    assert torch.equal(t["blocks.1.hook_mlp_out"], t["m"])
    assert torch.equal(t["blocks.2.attn.hook_z"], t["z"])
    assert torch.equal(t["hook_resid_post"], t["r"])


def test_gpt_neox_refuses_the_mid_block_residual_in_one_line():
    engine = Engine(tiny_loaded("gpt_neox"))
    with pytest.raises(WhiteboxError, match="blocks.1.hook_resid_mid.*parallel residual"):
        engine.run(batch_from_ids([IDS]), [Capture("blocks.1.hook_resid_mid")])
    with pytest.raises(WhiteboxError, match="parallel residual"):
        engine.run(batch_from_ids([IDS]), [Capture("resid_mid")])


@pytest.mark.parametrize("name, fix", [("blocks.3.attn.hook_result", "hook_z"), ("blocks.0.mlp.hook_pre", "hook_post"),
                                       ("hook_embed", "outside the blocks"), ("blocks.1.hook_nonsense", "unknown capture point or hook name")])
def test_unserved_names_are_refused_naming_the_hook(name, fix):
    with pytest.raises(WhiteboxError, match=fix):
        parse_hook(name)


def test_patching_mlp_out_replaces_what_the_mlp_adds():
    """Zeroing blocks.1.hook_mlp_out through a Patch equals the model with that MLP's output zeroed."""
    lm = tiny_loaded("gemma3")
    batch = batch_from_ids([IDS])
    zeros = torch.zeros(1, len(IDS), lm.arch.d_model)
    got = Engine(lm).run(batch, edits=[Patch("blocks.1.hook_mlp_out", 1, list(range(len(IDS))), zeros)]).logits
    handle = blocks(lm.model, "gemma3")[1].post_feedforward_layernorm.register_forward_hook(lambda m, a, o: torch.zeros_like(o))
    try:
        with torch.no_grad():
            ref = lm.model(input_ids=batch.input_ids).logits[:, -1]
    finally:
        handle.remove()
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(WhiteboxError, match="cannot patch"):
        Engine(lm).run(batch, edits=[Patch("resid_mid", 1, [0], torch.zeros(1, 1, lm.arch.d_model))])


def test_hf_module_paths_resolve_through_the_family():
    gemma = FAMILIES["gemma3"]
    assert parse_hook("model.layers.12.output", gemma).point == "resid"
    assert parse_hook("model.layers.12.post_feedforward_layernorm.output", gemma).point == "mlp_out"
    assert parse_hook("model.layers.3.self_attn.o_proj.input", gemma).point == "head_out"
    assert parse_hook("model.layers.3.post_attention_layernorm.output", gemma).point == "attn_out"
    # in llama that norm is the MLP's input norm, not what attention adds: refused, not misread
    with pytest.raises(WhiteboxError, match="llama has no capture point"):
        parse_hook("model.layers.3.post_attention_layernorm.output", FAMILIES["llama"])


def test_release_names_give_site_and_layer():
    assert hook_from_names("google/gemma-scope-2b-pt-res", "layer_20/width_16k/average_l0_71").hook_name == \
        "blocks.20.hook_resid_post"
    assert hook_from_names("google/gemma-scope-2b-pt-mlp", "layer_4/width_16k/canonical").hook_name == "blocks.4.hook_mlp_out"
    assert hook_from_names("google/gemma-scope-9b-pt-att", "layer_7/width_16k/canonical").hook_name == "blocks.7.attn.hook_z"
    assert hook_from_names("google/gemma-scope-2-1b-pt", "mlp_out_all/layer_12_width_16k_l0_small").point == "mlp_out"
    assert hook_from_names("fnlp/Llama3_1-8B-Base-LXM-8x", "Llama3_1-8B-Base-L15M-8x").hook_name == "blocks.15.hook_mlp_out"
    assert hook_from_names(None, "/data/my_sae") is None
