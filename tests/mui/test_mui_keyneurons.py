"""Key-neuron scores from the engine path against hand computations from the weights (paper 001 eq. 2, 5, 13, 14).

The reference reads the down projection's input with a plain torch hook on one
*unbatched* sequence and computes eq. 2 by hand, so the test also checks the engine's
left padding and the position alignment: position p scores the token at p + 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Capture, Engine, MaskNeurons, Patch, batch_from_ids  # noqa: E402
from whitebox_eval.sae.sets import load_sae_set  # noqa: E402
from whitebox_eval.mui.keyneurons import (  # noqa: E402
    KeyNeuronConfig,
    ScoredSequence,
    layer_rankings,
    predicting_positions,
    sample_key_mask,
    token_scores,
)
from whitebox_eval.internals.prefixes import PrefixCache  # noqa: E402
from whitebox_eval.sae.encoding import SAE  # noqa: E402
from whitebox_eval.sae.files import save_sae  # noqa: E402

SEQS = [ScoredSequence([5, 9, 17, 33], [41, 7, 12]), ScoredSequence([3, 8], [21, 30, 11, 6, 19])]


def _hooked_run(model, ids, modules):
    """Inputs (``pre``) or outputs of ``modules`` for one unbatched sequence, via plain torch hooks."""
    got, handles = {}, []
    for name, (mod, kind) in modules.items():
        if kind == "pre":
            handles.append(mod.register_forward_pre_hook(lambda m, a, name=name: got.__setitem__(name, a[0][0].detach())))
        else:
            handles.append(mod.register_forward_hook(
                lambda m, a, o, name=name: got.__setitem__(name, (o[0] if isinstance(o, tuple) else o)[0].detach())))
    with torch.no_grad():
        model(input_ids=torch.tensor([ids]))
    for h in handles:
        h.remove()
    return got


def _reference_activations(lm, seq: ScoredSequence, point: str = "down_in") -> torch.Tensor:
    """[S, L, d_ff] activations read by hooks on the HF modules."""
    L = lm.arch.n_layers
    mods = {}
    for l in range(L):
        mlp = lm.arch.blocks[l].mlp
        mods[l] = (mlp.down_proj, "pre") if point == "down_in" else (mlp.act_fn, "out")
    got = _hooked_run(lm.model, seq.ids, mods)
    return torch.stack([got[l] for l in range(L)], dim=1).float()


def test_predicting_positions():
    assert predicting_positions(4, 3) == [3, 4, 5]
    with pytest.raises(WhiteboxError):
        predicting_positions(4, 0)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_contribution_score_equals_hand_computation_with_alignment(family):
    lm = tiny_lm(family)
    engine = Engine(lm)
    got = token_scores(engine, SEQS, KeyNeuronConfig(score="contribution"))
    w_u = lm.model.lm_head.weight.detach().float()
    for seq, scores in zip(SEQS, got):
        a = _reference_activations(lm, seq)
        n_p = len(seq.prompt_ids)
        assert scores.shape == (len(seq.response_ids), lm.arch.n_layers, lm.arch.d_ff)
        for j, y in enumerate(seq.response_ids):
            p = n_p - 1 + j  # the position that predicts response token j
            assert seq.ids[p + 1] == y
            for l in range(lm.arch.n_layers):
                w_down = lm.arch.blocks[l].mlp.down_proj.weight.detach().float()  # [d_model, d_ff]
                want = a[p, l] * (w_u[y] @ w_down)
                torch.testing.assert_close(scores[j, l], want, atol=1e-5, rtol=1e-4)
                # the misaligned version (token at p, as in the authors' code) is different
                wrong = a[p, l] * (w_u[seq.ids[p]] @ w_down)
                assert not torch.allclose(scores[j, l], wrong, atol=1e-4)


def test_final_norm_full_equals_hand_computation_gemma():
    lm = tiny_lm("gemma3")
    engine = Engine(lm)
    seq = SEQS[0]
    got = token_scores(engine, [seq], KeyNeuronConfig(score="contribution", final_norm="full"))[0]
    a = _reference_activations(lm, seq)
    L = lm.arch.n_layers
    h = _hooked_run(lm.model, seq.ids, {"h": (lm.arch.blocks[L - 1], "out")})["h"].float()
    norm = lm.model.model.norm
    gamma = 1.0 + norm.weight.detach().float()  # Gemma RMSNorm multiplies by (1 + w)
    eps = norm.eps
    w_u = lm.model.lm_head.weight.detach().float()
    for j, y in enumerate(seq.response_ids):
        p = len(seq.prompt_ids) - 1 + j
        rms = torch.sqrt(h[p].pow(2).mean() + eps)
        for l in range(L):
            w_down = lm.arch.blocks[l].mlp.down_proj.weight.detach().float()
            want = a[p, l] * (((gamma * w_u[y]) @ w_down) / rms)
            torch.testing.assert_close(got[j, l], want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("point", ["mlp_act", "mlp_gate_act"])
def test_activation_score_is_the_activation_at_the_predicting_position(point):
    lm = tiny_lm("llama")
    got = token_scores(Engine(lm), SEQS, KeyNeuronConfig(score="activation", activation=point))
    for seq, scores in zip(SEQS, got):
        a = _reference_activations(lm, seq, "down_in" if point == "mlp_act" else "act")
        pos = predicting_positions(len(seq.prompt_ids), len(seq.response_ids))
        torch.testing.assert_close(scores, a[pos], atol=1e-5, rtol=1e-4)


def _response_logprob(engine, seq, edits=()):
    batch = batch_from_ids([seq.ids])
    pos = predicting_positions(len(seq.prompt_ids), len(seq.response_ids))
    with torch.no_grad():
        logits = engine.run(batch, edits=list(edits), logits=[pos]).logits[0].float()
    return torch.log_softmax(logits, -1)[torch.arange(len(pos)), torch.tensor(seq.response_ids)].sum()


def _f_scaled(engine, seq, layers, alpha, clean):
    """F = sum_j log p(y_j) with the scored positions' activations of ``layers`` set to alpha * a (a Patch)."""
    batch = batch_from_ids([seq.ids])
    pos = [predicting_positions(len(seq.prompt_ids), len(seq.response_ids))]
    edits = [Patch("mlp_act", l, pos, alpha * clean[:, l]) for l in layers]
    with torch.no_grad():
        logits = engine.run(batch, edits=edits, logits=pos).logits[0].double()
    return float(torch.log_softmax(logits, -1)[torch.arange(len(pos[0])), torch.tensor(seq.response_ids)].sum())


@pytest.mark.parametrize("joint", [False, True])
def test_integrated_gradients_equal_the_riemann_sum_of_dF_dalpha(joint):
    """Eq. 14 with m steps: sum_i a_i * mean_k dF/da_i(alpha_k a) = mean_k dF(alpha)/dalpha at alpha_k = k/m.

    The right side is taken by central finite differences of F along the path (no gradients),
    per layer (one layer's activations scaled) or jointly over all layers.
    """
    lm = tiny_lm("llama")
    engine = Engine(lm)
    seq = SEQS[1]
    m, h = 4, 1e-3
    scores = token_scores(engine, [seq], KeyNeuronConfig(score="ig", ig_steps=m, ig_joint_layers=joint))[0]
    pos = [predicting_positions(len(seq.prompt_ids), len(seq.response_ids))]
    with torch.no_grad():
        clean = engine.run(batch_from_ids([seq.ids]), [Capture("mlp_act", pos)], logits=False)["mlp_act"]
    groups = [list(range(lm.arch.n_layers))] if joint else [[l] for l in range(lm.arch.n_layers)]
    for group in groups:
        dfs = [(_f_scaled(engine, seq, group, k / m + h, clean) - _f_scaled(engine, seq, group, k / m - h, clean)) / (2 * h)
               for k in range(1, m + 1)]
        want = sum(dfs) / m
        got = float(scores[:, group].sum())
        assert abs(got - want) < 2e-2 * abs(want) + 5e-3, (group, got, want)
    # and the path really ends at the zero baseline: F(0) is F with those activations masked
    f0 = _f_scaled(engine, seq, groups[0], 0.0, clean)
    masked = _response_logprob(engine, seq, [MaskNeurons(l, range(lm.arch.d_ff), positions=pos) for l in groups[0]])
    assert f0 == pytest.approx(float(masked), abs=1e-4)


def test_ig_needs_mlp_act():
    with pytest.raises(WhiteboxError, match="mlp_act"):
        KeyNeuronConfig(score="ig", activation="mlp_gate_act").validate()


def test_sae_scores_encode_the_residual_at_predicting_positions(tmp_path):
    lm = tiny_lm("llama")
    d, f = lm.arch.d_model, 24
    g = torch.Generator().manual_seed(0)
    sae = SAE(torch.randn(d, f, generator=g), torch.randn(f, generator=g) * 0.1, torch.randn(f, d, generator=g),
              torch.randn(d, generator=g) * 0.1, activation="topk", k=5)
    sae.metadata.update({"hook_name": "blocks.1.hook_resid_post", "hook_layer": 1})
    save_sae(sae, tmp_path / "sae1")
    sae_set = load_sae_set([str(tmp_path / "sae1")])
    assert sae_set.layers == [1] and sae_set.point == "resid"
    cfg = KeyNeuronConfig(score="sae")
    got = token_scores(Engine(lm), SEQS, cfg, sae_set)
    for seq, scores in zip(SEQS, got):
        h = _hooked_run(lm.model, seq.ids, {"h": (lm.arch.blocks[1], "out")})["h"].float()
        pos = predicting_positions(len(seq.prompt_ids), len(seq.response_ids))
        pre = (h[pos] - sae.b_dec) @ sae.w_enc + sae.b_enc
        top = torch.topk(pre, 5, dim=-1)
        want = torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))
        torch.testing.assert_close(scores[:, 0], want, atol=1e-4, rtol=1e-4)
        mask = sample_key_mask(scores, cfg)  # SAE default: top-50 per layer, active features only
        assert mask.shape == (1, f)
        assert int(mask.sum()) == int((scores[:, 0].amax(0) > 0).sum())


def test_sample_key_mask_top_per_mille_and_rankings():
    # d_ff = 40: 1 per mille floors to k = 1 per layer: the neuron with the best score over positions
    g = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 3, 40, generator=g)
    mask = sample_key_mask(scores, KeyNeuronConfig(threshold="top_fraction", threshold_value=1e-3))
    best = scores.amax(0).argmax(1)
    want = torch.zeros(3, 40, dtype=torch.bool)
    want[torch.arange(3), best] = True
    assert torch.equal(mask, want)
    ranks = layer_rankings(scores, 5, unit="neuron")
    assert ranks.shape == (3, 5)
    assert torch.equal(ranks[:, 0], best)
    top5 = torch.topk(scores.amax(0), 5, dim=1).indices
    assert torch.equal(ranks, top5)
    # eq. 15: response-level sums first
    summed = sample_key_mask(scores, KeyNeuronConfig(threshold="topk", threshold_value=2, response_level=True))
    assert torch.equal(summed.nonzero()[:, 1].reshape(3, 2).sort(1).values,
                       torch.topk(scores.sum(0), 2, dim=1).indices.sort(1).values)


def test_batch_result_does_not_depend_on_batching():
    lm = tiny_lm("qwen2")
    engine = Engine(lm)
    together = token_scores(engine, SEQS, KeyNeuronConfig())
    alone = [token_scores(engine, [s], KeyNeuronConfig())[0] for s in SEQS]
    for a, b in zip(together, alone):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert np.isfinite(together[0].numpy()).all()


@pytest.mark.parametrize("score", ["contribution", "activation", "ig"])
def test_a_shared_demonstration_is_computed_once_and_scores_the_same(score):
    """Prompts that start alike (a 1-shot demonstration) share one cached prefix; every score equals
    the uncached pass's (float rounding of other shapes aside)."""
    lm = tiny_lm("llama")
    engine = Engine(lm)
    demo = [(7 * i) % 60 + 3 for i in range(40)]  # longer than MIN_UNMARKED_TOKENS
    seqs = [ScoredSequence(demo + s.prompt_ids, s.response_ids) for s in SEQS]
    cfg = KeyNeuronConfig(score=score, ig_steps=3)
    prefixes = PrefixCache(engine)
    cached = token_scores(engine, seqs, cfg, prefixes=prefixes)
    assert prefixes.computed == 1 and list(prefixes._cached) == [tuple(demo)]
    token_scores(engine, seqs[::-1], cfg, prefixes=prefixes)
    assert prefixes.computed == 1  # the next batch finds it cached
    for a, b in zip(cached, token_scores(engine, seqs, cfg)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_pair_rankings_give_the_eq10_key_set_for_every_k():
    """layer_rankings(unit="pair") (the default, used by masking): the neurons of its first k columns
    are layer_topk_mask(unit="pair", ties="index") for every k; a neuron may repeat."""
    from whitebox_eval.mui.thresholds import layer_topk_mask

    g = torch.Generator().manual_seed(4)
    scores = torch.randn(6, 3, 40, generator=g)
    scores[:, :, 7] += 10.0  # neuron 7 wins several positions: its pairs fill the top of the ranking
    ranks = layer_rankings(scores, 12)
    assert (ranks[:, :3] == 7).all()
    for k in range(1, 13):
        want = layer_topk_mask(scores, k, unit="pair", ties="index")
        got = torch.zeros_like(want)
        for l in range(3):
            got[l, ranks[l, :k].unique()] = True
        assert torch.equal(got, want), k


def test_reference_code_compat_scores_the_token_at_p_with_act_gate():
    """score_token="at" + mlp_gate_act = the authors' get_neuron.py: response positions p (prompt_index ..
    prompt_end_index - 1), act_fn output at p times (W_down^T W_U)[:, input_ids[p]], computed here by hand
    with a plain hook on act_fn of one unbatched sequence."""
    lm = tiny_lm("llama")
    cfg = KeyNeuronConfig(score="contribution", activation="mlp_gate_act", score_token="at")
    got = token_scores(Engine(lm), SEQS, cfg)
    w_u = lm.model.lm_head.weight.detach().float()
    for seq, scores in zip(SEQS, got):
        a = _reference_activations(lm, seq, "act")
        n_p = len(seq.prompt_ids)
        assert scores.shape[0] == len(seq.response_ids)
        for j in range(len(seq.response_ids)):
            p = n_p + j
            for l in range(lm.arch.n_layers):
                w_down = lm.arch.blocks[l].mlp.down_proj.weight.detach().float()
                want = a[p, l] * (w_u[seq.ids[p]] @ w_down)
                torch.testing.assert_close(scores[j, l], want, atol=1e-5, rtol=1e-4)


def test_score_token_at_is_refused_for_ig_and_sae():
    for score in ("ig", "sae"):
        with pytest.raises(WhiteboxError, match="contribution or activation"):
            KeyNeuronConfig(score=score, score_token="at").validate()
