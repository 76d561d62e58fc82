"""Every capture point against a reference computed from the weights, for every family."""

from __future__ import annotations

import pytest
import torch

from references import (
    attn_input,
    eager_attentions,
    hidden_states,
    mlp_act_reference,
    mlp_inputs,
    qk_normed,
    qkv_raw,
)
from tiny_models import FAMILY_NAMES, tiny_loaded
from whitebox_eval.internals import Capture, Engine, batch_from_ids

IDS = [5, 9, 17, 33, 2, 41, 7, 12]
POS = [0, 3, 5, 7]
ATOL = 2e-5


@pytest.fixture(scope="module", params=[(f, keep) for f in FAMILY_NAMES for keep in ("refs", "per-layer")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def family_setup(request):
    family, path = request.param
    lm = tiny_loaded(family)
    engine = Engine(lm)
    engine.keep_bytes = 1 << 62 if path == "refs" else 0  # both of the engine's paths: kept references, per-layer gathers
    batch = batch_from_ids([IDS])
    points = ["q_proj", "k_proj", "q", "k", "v", "q_rot", "k_rot", "attn", "head_out", "mlp_act", "mlp_gate_act", "resid_pre", "resid"]
    trace = engine.run(batch, [Capture(p, POS if p != "attn" else POS) for p in points] + [Capture("attn_full")])
    return family, lm, engine, trace


def test_architecture_description(family_setup):
    family, lm, _, _ = family_setup
    arch = lm.arch
    assert arch.family.name == family
    if family not in ("gpt2", "gpt_neox"):  # no GQA in these two
        assert arch.n_kv_heads == 2 and arch.kv_head_map == [0, 0, 1, 1]
    if family not in ("gpt2", "phi3", "gpt_neox"):
        assert arch.head_dim == 12 != arch.d_model // arch.n_heads  # head_dim is read, not derived
    if family == "gpt_neox":  # rotary_pct 0.5 of an 8-wide head; attention and MLP side by side
        assert arch.rotary_dim == 4 and arch.parallel_residual


def test_qkv_pre_rope_equal_weights_times_normed_input(family_setup):
    family, lm, _, trace = family_setup
    arch, model = lm.arch, lm.model
    hs = hidden_states(model, torch.tensor([IDS]))
    for l in range(arch.n_layers):
        xn = attn_input(model, family, l, hs[l])
        q, k, v = qkv_raw(model, family, l, xn, arch.n_heads, arch.n_kv_heads, arch.head_dim)
        qn, kn = qk_normed(model, family, l, q, k)
        for name, ref in [("q_proj", q), ("k_proj", k), ("v", v), ("q", qn), ("k", kn)]:
            got = trace[name][0, l]
            torch.testing.assert_close(got, ref[0, POS], atol=ATOL, rtol=1e-4, msg=f"{family} {name} layer {l}")


def test_norm_is_applied_where_the_family_has_one(family_setup):
    family, _, _, trace = family_setup
    differs = not torch.allclose(trace["q"], trace["q_proj"])
    assert differs == (family in ("qwen3", "gemma3", "olmo2"))


def test_attention_rows_match_eager_output_attentions(family_setup):
    family, lm, _, trace = family_setup
    ref = eager_attentions(lm.model, torch.tensor([IDS]))
    for l in range(lm.arch.n_layers):
        torch.testing.assert_close(trace["attn"][0, l], ref[l][0][:, POS], atol=ATOL, rtol=1e-4)
        torch.testing.assert_close(trace["attn_full"][0, l], ref[l][0], atol=ATOL, rtol=1e-4)


def test_post_rope_queries_and_keys_reproduce_attention(family_setup):
    """softmax(q_rot k_rot^T * scale [softcap] + mask) over the GQA map equals eager attention rows."""
    family, lm, engine, _ = family_setup
    arch, model = lm.arch, lm.model
    allpos = list(range(len(IDS)))
    t = engine.run(batch_from_ids([IDS]), [Capture("q_rot", allpos), Capture("k_rot", allpos)])
    ref = eager_attentions(model, torch.tensor([IDS]))
    S = len(IDS)
    for l in range(arch.n_layers):
        att = arch.attention(l)
        q = t["q_rot"][0, l]  # [S, H, D]
        k = t["k_rot"][0, l]  # [S, Hkv, D]
        keep = torch.ones(S, S, dtype=torch.bool).tril()
        window = getattr(att, "sliding_window", None)
        if window:
            i = torch.arange(S)
            keep &= (i[:, None] - i[None, :]) < window
        for h in range(arch.n_heads):
            scores = q[:, h] @ k[:, arch.kv_head(h)].T * att.scaling
            cap = getattr(att, "attn_logit_softcapping", None)
            if cap:
                scores = torch.tanh(scores / cap) * cap
            probs = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1)
            torch.testing.assert_close(probs, ref[l][0, h], atol=ATOL, rtol=1e-4, msg=f"{family} layer {l} head {h}")


def test_head_outputs_are_attention_weighted_values(family_setup):
    family, lm, engine, trace = family_setup
    arch = lm.arch
    allpos = list(range(len(IDS)))
    v = engine.run(batch_from_ids([IDS]), [Capture("v", allpos)])["v"][0]  # [L, S, Hkv, D]
    ref = eager_attentions(lm.model, torch.tensor([IDS]))
    for l in range(arch.n_layers):
        for h in range(arch.n_heads):
            expect = ref[l][0, h][POS] @ v[l, :, arch.kv_head(h)]
            torch.testing.assert_close(trace["head_out"][0, l, :, h], expect, atol=ATOL, rtol=1e-4)


def test_mlp_activation_is_down_projection_input(family_setup):
    family, lm, _, trace = family_setup
    ins = mlp_inputs(lm.model, family, torch.tensor([IDS]))
    for l in range(lm.arch.n_layers):
        ref = mlp_act_reference(lm.model, family, l, ins[l])[0, POS]
        torch.testing.assert_close(trace["mlp_act"][0, l], ref, atol=ATOL, rtol=1e-4)
        if lm.arch.family.mlp_gated:
            assert not torch.allclose(trace["mlp_gate_act"][0, l], trace["mlp_act"][0, l])


def test_residual_stream_matches_hidden_states(family_setup):
    family, lm, _, trace = family_setup
    hs = hidden_states(lm.model, torch.tensor([IDS]))
    L = lm.arch.n_layers
    for l in range(L):
        torch.testing.assert_close(trace["resid_pre"][0, l], hs[l][0, POS], atol=ATOL, rtol=1e-4)
        if l < L - 1:  # HF's last hidden state has the final norm applied
            torch.testing.assert_close(trace["resid"][0, l], hs[l + 1][0, POS], atol=ATOL, rtol=1e-4)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_logits_bit_identical_with_captures_and_no_edits(family):
    """The engine's promise: with nothing edited it runs the model's own computation.

    ``logits="last"`` is the model's own forward with ``logits_to_keep=1`` (the same slice,
    the same [B, d] x [d, V] product) and ``logits="all"`` its full forward: equal bit for
    bit on any CPU, captures or not. The last column of the *full* forward is a different
    product ([B*S, d] x [d, V]) that a BLAS may block differently (MKL's AVX2 path does,
    e.g. on AMD EPYC: 7e-7 apart), so that comparison carries a float32 tolerance.
    """
    lm = tiny_loaded(family)
    batch = batch_from_ids([IDS, IDS[:5], IDS[2:]])
    kw = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids)
    with torch.no_grad():
        ref = lm.model(**kw).logits
        ref_last = lm.model(**kw, logits_to_keep=1).logits[:, -1]
    engine = Engine(lm)
    t = engine.run(batch, [Capture(p) for p in ("q", "k", "q_rot", "attn", "head_out", "mlp_act", "resid")] + [Capture("attn_full")])
    assert torch.equal(t.logits, ref_last)
    assert torch.equal(engine.run(batch).logits, ref_last)
    # float32 rounding of a d_model-term dot product: ~1e-7 relative, far below any effect
    torch.testing.assert_close(t.logits, ref[:, -1], rtol=1e-5, atol=1e-5)
    t_all = engine.run(batch, logits="all")
    assert torch.equal(t_all.logits, ref)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_batch_and_left_padding_invariance(family):
    lm = tiny_loaded(family)
    engine = Engine(lm)
    short = IDS[:5]
    points = ["q", "k_rot", "attn", "head_out", "mlp_act", "resid"]
    alone = engine.run(batch_from_ids([short]), [Capture(p, [1, 4]) for p in points])
    mixed = engine.run(batch_from_ids([IDS, short, IDS[1:]]), [Capture(p, [[0, 1], [1, 4], [2, 3]]) for p in points])
    torch.testing.assert_close(mixed.logits[1], alone.logits[0], rtol=1e-5, atol=1e-5)
    for p in points:
        a, m = alone[p][0], mixed[p][1]
        if p == "attn":
            m = m[..., : len(short)]
            assert torch.all(mixed[p][1][..., len(short):] == 0)  # keys past the example are zero-filled
        torch.testing.assert_close(m, a, rtol=1e-5, atol=1e-5, msg=p)
