"""SAEs are encoded at their own hook: an SAE written for the MLP output (SAELens' hook_mlp_out) of a
tiny llama and a tiny gemma3 is checked against a hand computation from that point (the MLP by hand
from its input, gemma's post-MLP norm included). Before the hook table, every name without
``resid_pre`` was read at the block's output residual: this test fails there."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parents[1] / "internals"))
from references import mlp_inputs, mlp_out_reference  # noqa: E402
from tiny_models import tiny_loaded  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Engine  # noqa: E402
from whitebox_eval.mui.keyneurons import KeyNeuronConfig, ScoredSequence, load_sae_set, token_scores  # noqa: E402
from whitebox_eval.sae.encoding import SAE  # noqa: E402
from whitebox_eval.sae.files import save_sae  # noqa: E402

PROMPT, RESPONSE = [5, 9, 17, 33, 2], [41, 7, 12]
LAYER = 1


def _sae(d_in: int, hook: str, seed: int = 0) -> SAE:
    g = torch.Generator().manual_seed(seed)
    return SAE(w_enc=torch.randn(d_in, 24, generator=g), b_enc=0.1 * torch.randn(24, generator=g),
               w_dec=torch.randn(24, d_in, generator=g), b_dec=0.1 * torch.randn(d_in, generator=g),
               activation="relu", apply_b_dec_to_input=True, metadata={"hook_name": hook, "hook_layer": LAYER})


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_mlp_output_sae_reads_the_mlp_output(family, tmp_path):
    lm = tiny_loaded(family)
    sae = _sae(lm.arch.d_model, f"blocks.{LAYER}.hook_mlp_out")
    folder = save_sae(sae, tmp_path / "sae")
    sae_set = load_sae_set([str(folder)], lm.arch)
    assert (sae_set.point, sae_set.layers) == ("mlp_out", [LAYER])
    assert sae_set.sources[0]["hook"] == f"blocks.{LAYER}.hook_mlp_out" and len(sae_set.sources[0]["sha256"]) == 64
    got = token_scores(Engine(lm), [ScoredSequence(PROMPT, RESPONSE)], KeyNeuronConfig(score="sae"), sae_set)[0][:, 0]
    ids = torch.tensor([PROMPT + RESPONSE])
    x = mlp_out_reference(lm.model, family, LAYER, mlp_inputs(lm.model, family, ids)[LAYER])[0]
    rows = x[len(PROMPT) - 1:len(PROMPT) - 1 + len(RESPONSE)]  # the positions predicting the response
    expect = torch.relu((rows - sae.b_dec) @ sae.w_enc + sae.b_enc)
    torch.testing.assert_close(got, expect, atol=1e-4, rtol=1e-4)
    # the block's output residual (what the old loader fed it) gives other activations
    with torch.no_grad():
        resid = lm.model(input_ids=ids, output_hidden_states=True).hidden_states[LAYER + 1][0]
    wrong = torch.relu((resid[len(PROMPT) - 1:len(PROMPT) - 1 + len(RESPONSE)] - sae.b_dec) @ sae.w_enc + sae.b_enc)
    assert not torch.allclose(wrong, expect, atol=1e-2)


def test_attention_sae_reads_z_concatenated_over_heads(tmp_path):
    """A hook_z SAE (Gemma Scope's -att) is n_heads x head_dim wide and reads o_proj's input."""
    lm = tiny_loaded("llama")
    width = lm.arch.n_heads * lm.arch.head_dim
    sae = _sae(width, f"blocks.{LAYER}.attn.hook_z", seed=1)
    sae_set = load_sae_set([str(save_sae(sae, tmp_path / "z"))], lm.arch)
    got = token_scores(Engine(lm), [ScoredSequence(PROMPT, RESPONSE)], KeyNeuronConfig(score="sae"), sae_set)[0][:, 0]
    seen = {}
    o_proj = lm.model.model.layers[LAYER].self_attn.o_proj
    handle = o_proj.register_forward_pre_hook(lambda m, a: seen.__setitem__("z", a[0].detach()))
    with torch.no_grad():
        lm.model(input_ids=torch.tensor([PROMPT + RESPONSE]))
    handle.remove()
    rows = seen["z"][0, len(PROMPT) - 1:len(PROMPT) - 1 + len(RESPONSE)]
    torch.testing.assert_close(got, torch.relu((rows - sae.b_dec) @ sae.w_enc + sae.b_enc), atol=1e-4, rtol=1e-4)


def test_bad_hooks_and_widths_are_one_line(tmp_path):
    lm = tiny_loaded("llama")
    with pytest.raises(WhiteboxError, match="d_in 32, but blocks.1.hook_z of this model is 48 wide"):
        load_sae_set([str(save_sae(_sae(32, "blocks.1.hook_z"), tmp_path / "a"))], lm.arch)
    with pytest.raises(WhiteboxError, match="not served"):
        load_sae_set([str(save_sae(_sae(32, "blocks.1.attn.hook_result"), tmp_path / "b"))], lm.arch)
    with pytest.raises(WhiteboxError, match="layer 2 given, but the SAE's hook is at layer 1"):
        load_sae_set([f"2={save_sae(_sae(32, 'blocks.1.hook_mlp_out'), tmp_path / 'c')}"], lm.arch)
    neox = tiny_loaded("gpt_neox")
    with pytest.raises(WhiteboxError, match="hook_resid_mid.*parallel residual"):
        load_sae_set([str(save_sae(_sae(32, "blocks.1.hook_resid_mid"), tmp_path / "d"))], neox.arch)
    # a HOOK= prefix names the hook of an SAE whose files name none
    plain = _sae(32, "x")
    plain.metadata.clear()
    s = load_sae_set([f"blocks.2.hook_attn_out={save_sae(plain, tmp_path / 'e')}"], lm.arch)
    assert (s.point, s.layers) == ("attn_out", [2])


@pytest.mark.parametrize("hook", ["hook_mlp_out", "hook_attn_out", "attn.hook_z", "hook_resid_mid", "hook_resid_post"])
def test_fidelity_splices_at_the_sae_hook(hook, tmp_path):
    """An SAE that reconstructs exactly (features x and -x) spliced at its hook leaves the loss as it
    was; zeroing that site changes it: loss recovered is measured where the SAE reads."""
    from whitebox_eval.sae.fidelity import evaluate_fidelity

    lm = tiny_loaded("gemma3")
    d = lm.arch.n_heads * lm.arch.head_dim if hook == "attn.hook_z" else lm.arch.d_model
    eye = torch.eye(d)
    exact = SAE(w_enc=torch.cat([eye, -eye], 1), b_enc=torch.zeros(2 * d), w_dec=torch.cat([eye, -eye], 0),
                b_dec=torch.zeros(d), apply_b_dec_to_input=False, metadata={"hook_name": f"blocks.{LAYER}.{hook}"})
    sae_set = load_sae_set([str(save_sae(exact, tmp_path / "x"))], lm.arch)
    seqs = [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21, 30, 11, 6]]
    fid = evaluate_fidelity(lm, sae_set.saes[0], LAYER, seqs, point=sae_set.point, judge_dead=False)
    assert abs(fid["delta_loss"]) < 1e-5 and fid["explained_variance"] > 0.9999
    assert abs(fid["ce_loss_zero"] - fid["ce_loss_clean"]) > 1e-3
