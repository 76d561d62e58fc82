"""Steering (AddVector) and SAE feature edits (ClampFeature) against hand computations: a hook the
test installs on the block itself adds the vector, or encodes, changes the feature, decodes and
adds the error term back."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from references import blocks
from tiny_models import tiny_loaded
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import AddVector, Capture, ClampFeature, Engine, batch_from_ids
from whitebox_eval.sae.encoding import SAE

IDS = [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21, 30, 11, 6, 40, 19]]
RAGGED = [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21, 30, 11]]
FAMILIES = ["llama", "gpt2"]


def _hand(lm, family, batch, layer, change, last_only=False):
    """The HF model's own logits at the last position with ``change(x)`` applied to the residual
    leaving ``layer`` (at every real token, or the last one only)."""
    real = batch.attention_mask.bool()

    def hook(mod, args, out):
        h = out[0] if isinstance(out, tuple) else out
        new = change(h)
        keep = real.clone()
        if last_only:
            keep[:, :-1] = False
        h = torch.where(keep[..., None], new, h)
        return (h, *out[1:]) if isinstance(out, tuple) else h

    handle = blocks(lm.model, family)[layer].register_forward_hook(hook)
    try:
        with torch.no_grad():
            return lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                            position_ids=batch.position_ids).logits[:, -1]
    finally:
        handle.remove()


def _sae(d_in: int, d_sae: int = 24, activation: str = "relu", seed: int = 3) -> SAE:
    g = torch.Generator().manual_seed(seed)
    kw = {}
    if activation == "topk":
        kw["k"] = 6
    if activation == "jumprelu":
        kw["threshold"] = torch.rand(d_sae, generator=g) * 0.1
    return SAE(torch.randn(d_in, d_sae, generator=g) / d_in ** 0.5, torch.randn(d_sae, generator=g) * 0.1,
               torch.randn(d_sae, d_in, generator=g) / d_sae ** 0.5, torch.randn(d_in, generator=g) * 0.1,
               activation=activation, **kw)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("ids", [IDS, RAGGED], ids=["even", "padded"])
def test_steering_equals_adding_the_vector_by_hand(family, ids):
    lm = tiny_loaded(family)
    batch = batch_from_ids(ids)
    vec = torch.randn(lm.arch.d_model, generator=torch.Generator().manual_seed(1))
    eng = Engine(lm)
    for coef, last in ((2.5, False), (-1.0, True)):
        got = eng.run(batch, edits=[AddVector("resid", 1, vec, coef, "last" if last else None)]).logits
        want = _hand(lm, family, batch, 1, lambda h: h + coef * vec, last_only=last)
        # addcmul may fuse the multiply and the add: equal up to one float32 rounding of the residual
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        assert not torch.allclose(got, eng.run(batch).logits, atol=1e-3)


@pytest.mark.parametrize("family", FAMILIES)
def test_steering_by_a_hook_name_and_coefficient_zero_is_bit_identical(family):
    lm = tiny_loaded(family)
    batch = batch_from_ids(RAGGED)
    vec = torch.randn(lm.arch.d_model, generator=torch.Generator().manual_seed(2))
    eng = Engine(lm)
    plain = eng.run(batch).logits
    assert torch.equal(eng.run(batch, edits=[AddVector("blocks.1.hook_resid_post", 1, vec, 0.0)]).logits, plain)
    named = eng.run(batch, edits=[AddVector("blocks.1.hook_resid_post", 1, vec, 3.0)]).logits
    assert torch.equal(named, eng.run(batch, edits=[AddVector("resid", 1, vec, 3.0)]).logits)


def test_steering_a_per_head_point_and_a_wrong_width():
    lm = tiny_loaded("llama")
    batch = batch_from_ids(IDS)
    eng = Engine(lm)
    a = lm.arch
    vec = torch.randn(a.n_heads, a.head_dim, generator=torch.Generator().manual_seed(4))
    got = eng.run(batch, edits=[AddVector("head_out", 0, vec, 1.0)]).logits
    flat = eng.run(batch, edits=[AddVector("head_out", 0, vec.reshape(-1), 1.0)]).logits
    assert torch.equal(got, flat)
    with pytest.raises(WhiteboxError, match="steering vector at resid .* has 32 values"):
        eng.run(batch, edits=[AddVector("resid", 0, torch.ones(a.d_model + 1))])


def _clamped(sae, feats, value=None, scale=None):
    def change(h):
        f = sae.encode(h)
        g = f.clone()
        g[..., feats] = value if value is not None else f[..., feats] * scale
        return h + sae.decode(g) - sae.decode(f)
    return change


@pytest.mark.parametrize("activation", ["relu", "jumprelu", "topk"])
@pytest.mark.parametrize("family", FAMILIES)
def test_sae_clamp_equals_the_hand_computation(family, activation):
    lm = tiny_loaded(family)
    batch = batch_from_ids(RAGGED)
    sae = _sae(lm.arch.d_model, activation=activation)
    eng = Engine(lm)
    plain = eng.run(batch).logits
    for feats, value, scale, last in (([3, 7], 4.0, None, False), ([5], None, 3.0, True), ([1, 2, 9], 0.0, None, False)):
        edit = ClampFeature("resid", 1, sae, feats, value=value, scale=scale, positions="last" if last else None)
        got = eng.run(batch, edits=[edit]).logits
        want = _hand(lm, family, batch, 1, _clamped(sae, feats, value, scale), last_only=last)
        # the engine folds b_dec into the encoder bias and decodes only (f' - f): float32 rounding apart
        torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)
    assert not torch.allclose(eng.run(batch, edits=[ClampFeature("resid", 1, sae, [3], value=8.0)]).logits, plain, atol=1e-3)


@pytest.mark.parametrize("family", FAMILIES)
def test_an_unchanged_feature_leaves_the_model_unchanged(family):
    """Scale 1 changes no feature: bit-identical. A clamp of each feature to its own value (read by
    a capture of the same point and ``sae.encode``) gives the unedited logits within float32
    rounding: the engine's encoding folds ``b_dec`` into the bias, so the feature it computes differs
    from ``sae.encode``'s in the last bits (|f' - f| ~ 1e-7 |f|), and the residual moves by that
    times a decoder row: 1e-5 on the logits is some hundred times that."""
    lm = tiny_loaded(family)
    batch = batch_from_ids([IDS[0]])
    sae = _sae(lm.arch.d_model)
    eng = Engine(lm)
    trace = eng.run(batch, [Capture("resid", "last", [1])])
    plain = trace.logits
    assert torch.equal(eng.run(batch, edits=[ClampFeature("resid", 1, sae, [0, 4, 11], scale=1.0)]).logits, plain)
    own = sae.encode(trace["resid"][0, 0, 0])
    active = [int(i) for i in torch.nonzero(own > 0).flatten()[:4]] + [int(torch.nonzero(own == 0).flatten()[0])]
    for feat in active:
        got = eng.run(batch, edits=[ClampFeature("resid", 1, sae, [feat], value=float(own[feat]), positions="last")]).logits
        torch.testing.assert_close(got, plain, atol=1e-5, rtol=1e-5)


def test_sae_edit_errors_are_one_line():
    lm = tiny_loaded("llama")
    batch = batch_from_ids(IDS)
    eng = Engine(lm)
    sae = _sae(lm.arch.d_model)
    with pytest.raises(WhiteboxError, match="this SAE has 24 features"):
        eng.run(batch, edits=[ClampFeature("resid", 0, sae, [24], value=1.0)])
    with pytest.raises(WhiteboxError, match="exactly one of value"):
        eng.run(batch, edits=[ClampFeature("resid", 0, sae, [2])])
    with pytest.raises(WhiteboxError, match="an SAE of another model or hook"):
        eng.run(batch, edits=[ClampFeature("mlp_act", 0, sae, [2], value=1.0)])


def test_generation_under_steering_keeps_the_cache():
    """Greedy decoding under a steering edit with the KV cache equals decoding without it (each step
    a full pass under the same edit)."""
    from whitebox_eval.internals.generation import generate

    lm = tiny_loaded("llama")
    eng = Engine(lm)
    vec = torch.randn(lm.arch.d_model, generator=torch.Generator().manual_seed(5)) * 3
    edits = [AddVector("resid", 0, vec, 1.0)]
    ids = [IDS[0][:5], IDS[1][:3]]
    out = generate(eng, ids, max_new_tokens=4, edits=edits, stop_ids=[])
    for prompt, got in zip(ids, (g.ids for g in out)):
        seq = list(prompt)
        for _ in range(4):
            logits = eng.run(batch_from_ids([seq]), edits=edits).logits[0]
            seq.append(int(np.argmax(logits.numpy())))
        assert list(got) == seq[len(prompt):]


# ---- --edit steer: / sae: (internals/edit_specs.py, sae/feature_edits.py) ------------------------

def _vector_files(tmp_path, width=32):
    from safetensors.torch import save_file

    v = torch.linspace(-1, 1, width)
    np.save(tmp_path / "v.npy", v.numpy())
    torch.save(v, tmp_path / "v.pt")
    torch.save({"dir": v, "other": v * 2}, tmp_path / "two.pt")
    save_file({"dir": v.contiguous()}, str(tmp_path / "v.safetensors"))
    save_file({"dir": v.contiguous(), "b": v * 2}, str(tmp_path / "two.safetensors"))
    np.save(tmp_path / "wide.npy", np.ones((2, width), dtype=np.float32))
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return v


def test_steer_specs_read_every_file_kind(tmp_path):
    from whitebox_eval.internals.edit_specs import build_edits, parse_edit

    v = _vector_files(tmp_path)
    for name in ("v.npy", "v.pt", "v.safetensors", "two.pt#dir", "two.safetensors#dir"):
        spec = parse_edit(f"steer:resid:1:{tmp_path / name}*2.5@last")
        assert (spec.point, spec.layer, spec.value, spec.last_only) == ("resid", 1, 2.5, True)
        assert torch.equal(spec.vector, v)
    named = parse_edit(f"steer:blocks.2.hook_mlp_out:{tmp_path / 'v.npy'}")
    assert (named.point, named.layer, named.value) == ("mlp_out", 2, 1.0)
    [edit] = build_edits([named.text], 3, 4, 48, d_model=32)
    assert isinstance(edit, AddVector) and (edit.point, edit.layer, edit.coef, edit.positions) == ("mlp_out", 2, 1.0, None)
    assert parse_edit(f"steer:resid:0:{tmp_path / 'v.pt'}*-1e-1@all").value == -0.1


@pytest.mark.parametrize("spec, says", [
    ("steer:resid", "steer needs POINT:LAYER:FILE"),
    ("steer:resid:x:v.pt", "the layer a whole number"),
    ("steer:attn:0:v.pt", "cannot steer at 'attn'"),
    ("steer:blocks.1.hook_nope:v.pt", "unknown capture point or hook name"),
    ("steer:resid:0:v.txt", "must end in .pt, .safetensors or .npy"),
    ("steer:resid:0:missing.pt", "no vector file"),
    ("steer:resid:0:two.pt", "holds 2 tensors"),
    ("steer:resid:0:two.safetensors#nope", "has no tensor 'nope'"),
    ("steer:resid:0:v.npy#dir", "holds one tensor"),
    ("steer:resid:0:wide.npy", r"one token's values, \[width\]"),
    ("steer:resid:0:obj.npy", "cannot read"),
    ("sae:1,2:0=sae", "FEATURES=VALUE \\(clamp\\) or FEATURES\\*SCALE"),
    ("sae:a=1:0=sae", "SAE features are whole numbers"),
    ("sae:1=x:0=sae", "'x' is not a number"),
    ("sae:1=2", "sae needs FEATURES=VALUE:LAYER=SAE"),
])
def test_malformed_steer_and_sae_specs_are_one_line(tmp_path, monkeypatch, spec, says):
    from whitebox_eval.internals.edit_specs import parse_edit

    _vector_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WhiteboxError, match=says) as got:
        parse_edit(spec)
    assert "\n" not in str(got.value) and str(got.value).startswith(f"--edit {spec}")


def _saved_sae(tmp_path, d_in=32, d_sae=24):
    from whitebox_eval.sae.files import save_sae

    sae = _sae(d_in, d_sae)
    sae.metadata["hook_name"] = "blocks.1.hook_resid_post"
    return sae, save_sae(sae, tmp_path / "sae")


def test_sae_and_width_refusals_against_the_model(tmp_path):
    from whitebox_eval.sae.feature_edits import user_edits

    lm = tiny_loaded("llama")
    _vector_files(tmp_path, width=lm.arch.d_model + 1)
    _, folder = _saved_sae(tmp_path, d_in=lm.arch.d_model)
    with pytest.raises(WhiteboxError, match="the vector has 33 values, but resid of this model is 32 wide"):
        user_edits([f"steer:resid:1:{tmp_path / 'v.npy'}"], lm)
    with pytest.raises(WhiteboxError, match="layer 9 is outside this model"):
        user_edits([f"steer:resid:9:{tmp_path / 'v.npy'}"], lm)
    with pytest.raises(WhiteboxError, match="feature 24 is outside the SAE's 24 features"):
        user_edits([f"sae:3,24=1:{folder}"], lm)
    with pytest.raises(WhiteboxError, match="SAE .* has d_in 32, but blocks.1.hook_mlp_act|d_in 32"):
        user_edits([f"sae:3=1:blocks.1.mlp.hook_post={folder}"], lm)
    [edit] = user_edits([f"sae:3,5*0.5:{folder}@last"], lm)
    assert isinstance(edit, ClampFeature) and (edit.point, edit.layer, tuple(edit.features), edit.scale, edit.positions) \
        == ("resid", 1, (3, 5), 0.5, "last")


def test_an_sae_spec_edits_as_the_hand_computation(tmp_path):
    from whitebox_eval.sae.feature_edits import user_edits

    lm = tiny_loaded("llama")
    sae, folder = _saved_sae(tmp_path, d_in=lm.arch.d_model)
    batch = batch_from_ids(RAGGED)
    got = Engine(lm).run(batch, edits=user_edits([f"sae:3,7=4:{folder}"], lm)).logits
    torch.testing.assert_close(got, _hand(lm, "llama", batch, 1, _clamped(sae, [3, 7], 4.0)), atol=2e-5, rtol=2e-5)


def test_several_samples_under_an_edit_draw_what_the_uncached_rows_draw():
    """n_samples under edits: every sample its own row from the first pass, the same draws as the
    uncached reference; a zero steering draws exactly the unedited samples."""
    from whitebox_eval.internals.generation import generate

    lm = tiny_loaded("llama")
    eng = Engine(lm)
    ids = [IDS[0][:5], IDS[1][:3]]
    kw = dict(max_new_tokens=4, do_sample=True, temperature=1.3, seeds=[3, 4], n_samples=3, stop_ids=[])
    vec = torch.randn(lm.arch.d_model, generator=torch.Generator().manual_seed(6)) * 3
    steered = generate(eng, ids, edits=[AddVector("resid", 0, vec, 1.0)], **kw)
    assert [g.ids for g in steered] == [g.ids for g in generate(eng, ids, edits=[AddVector("resid", 0, vec, 1.0)],
                                                                  use_cache=False, **kw)]
    zero = generate(eng, ids, edits=[AddVector("resid", 0, vec, 0.0)], **kw)
    assert [g.ids for g in zero] == [g.ids for g in generate(eng, ids, **kw)]
    assert [g.ids for g in steered] != [g.ids for g in zero]


@pytest.mark.parametrize("family", FAMILIES)
def test_patching_a_saved_activation_sets_the_point(family, tmp_path):
    """``patch:`` (AddVector with replace=True) sets the residual to the saved vector; the activation
    the model itself had there, patched back, changes nothing."""
    from whitebox_eval.internals.edit_specs import build_edits

    lm = tiny_loaded(family)
    batch = batch_from_ids(RAGGED)
    eng = Engine(lm)
    vec = torch.randn(lm.arch.d_model, generator=torch.Generator().manual_seed(8))
    np.save(tmp_path / "act.npy", vec.numpy())
    [edit] = build_edits([f"patch:resid:1:{tmp_path / 'act.npy'}@last"], lm.arch.n_layers, lm.arch.n_heads, lm.arch.d_ff,
                         d_model=lm.arch.d_model)
    assert edit.replace and edit.positions == "last"
    got = eng.run(batch, edits=[edit]).logits
    want = _hand(lm, family, batch, 1, lambda h: vec.expand_as(h), last_only=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    one = batch_from_ids([IDS[0]])
    trace = eng.run(one, [Capture("resid", "last", [1])])
    own = AddVector("resid", 1, trace["resid"][0, 0, 0], 1.0, "last", replace=True)
    assert torch.equal(eng.run(one, edits=[own]).logits, trace.logits)
    with pytest.raises(WhiteboxError, match="patch sets the saved activation as it is"):
        build_edits([f"patch:resid:1:{tmp_path / 'act.npy'}*2"], 3, 4, 48)


def test_an_sae_edit_reads_its_sae_once_and_again_when_it_changes(tmp_path, monkeypatch):
    """``--edit sae:`` is checked before the run folder and built for the run: one read of the files,
    a second only when they changed."""
    import os
    from pathlib import Path

    from whitebox_eval.sae import files, sets
    from whitebox_eval.sae.feature_edits import check_edits, user_edits

    folder = files.save_sae(_sae(32), tmp_path / "sae")
    reads = []
    real = files.load_sae
    monkeypatch.setattr(sets, "load_sae", lambda p, **kw: reads.append(p) or real(p, **kw))
    monkeypatch.setattr(sets, "_READ", {})
    lm = tiny_loaded("llama")
    spec = f"sae:3=1.0:0={folder}"
    check_edits([spec], model=None, loaded=lm)
    first = user_edits([spec], lm)[0].sae
    assert len(reads) == 1
    weights = next(f for f in Path(folder).iterdir() if f.suffix == ".safetensors")
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    again = user_edits([spec], lm)[0].sae
    assert len(reads) == 2 and torch.equal(again.w_dec, first.w_dec)
