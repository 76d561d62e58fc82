"""Models split over devices (accelerate ``device_map``): captures and edits follow each layer.

Two checks that run on a CPU-only machine:
- layers offloaded to disk (weights on ``meta`` between calls, accelerate hooks load
  them): every capture and edit equals the unsplit model's, so the engine reads no
  weight directly and its hooks work beside accelerate's;
- the last layer and the head on ``meta`` (a second "device"): consecutive layers sit
  on different devices, and any tensor the engine built on the input's device and used
  in a meta layer would raise; captures arrive on the output's device.
"""

from __future__ import annotations

import copy

import pytest
import torch
from accelerate import dispatch_model
from accelerate.hooks import AlignDevicesHook, add_hook_to_module

from tiny_models import tiny_loaded
from whitebox_eval.internals import Capture, EditAttention, Engine, MaskNeurons, Patch, ScaleHeads, batch_from_ids, cells_from_pairs
from whitebox_eval.models.architectures import Architecture
from whitebox_eval.models.loading import LoadedModel
from whitebox_eval.models.placement import execution_device

IDS = [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21, 30, 11, 6]]
POINTS = ["q", "k", "v", "q_rot", "k_rot", "attn", "head_out", "mlp_act", "resid_pre", "resid"]


def _requests(batch):
    captures = [Capture(p, "last") for p in POINTS] + [Capture("attn_full", name="full")]
    cells = cells_from_pairs(2, 8, [[(7, 2)], [(5, 1)]])
    edits = [ScaleHeads(0, [1], 0.5), MaskNeurons(2, [3, 7]), EditAttention(2, [0], cells, mode="force"),
             EditAttention(1, [2], cells, mode="copy_head", source_head=3),
             Patch("resid", 1, "last", torch.full((2, 1, 32), 0.1))]
    return captures, edits


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_disk_offloaded_layers_give_the_same_captures_and_edits(family, tmp_path):
    lm = tiny_loaded(family)
    copied = copy.deepcopy(lm.model)
    plain = LoadedModel(model=copied, tokenizer=lm.tokenizer, arch=Architecture.of(copied), spec=lm.spec, source=lm.source)
    device_map = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.layers.0": "cpu",
                  "model.layers.1": "disk", "model.layers.2": "disk", "model.norm": "cpu", "lm_head": "cpu"}
    if family == "gemma3":
        device_map["model.rotary_emb_local"] = "cpu"
    device_map = {k: v for k, v in device_map.items() if _has(lm.model, k)}
    model = dispatch_model(lm.model, device_map=device_map, offload_dir=str(tmp_path))
    split = LoadedModel(model=model, tokenizer=lm.tokenizer, arch=Architecture.of(model), spec=lm.spec, source=lm.source)
    assert split.model.model.layers[2].self_attn.o_proj.weight.device.type == "meta"  # really offloaded
    assert split.device == torch.device("cpu")
    batch = batch_from_ids(IDS)
    captures, edits = _requests(batch)
    ref = Engine(plain).run(batch, captures, edits)
    got = Engine(split).run(batch, captures, edits)
    torch.testing.assert_close(got.logits, ref.logits, atol=1e-5, rtol=1e-5)
    for c in captures:
        torch.testing.assert_close(got[c.key], ref[c.key], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_lens_and_mui_read_offloaded_weights_through_accelerates_hook(family, tmp_path):
    """The final norm, the head and two layers' MLPs offloaded to disk (on ``meta`` between forwards):
    the logit lens and MUI's scores that read the unembedding, final-norm and down-projection
    weights outside a forward equal the unsplit model's."""
    from whitebox_eval.internals import logit_lens
    from whitebox_eval.mui import keyneurons as kn

    lm = tiny_loaded(family)
    copied = copy.deepcopy(lm.model)
    plain = LoadedModel(model=copied, tokenizer=lm.tokenizer, arch=Architecture.of(copied), spec=lm.spec, source=lm.source)
    device_map = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.rotary_emb_local": "cpu",
                  "model.layers.0": "cpu", "model.layers.1": "disk", "model.layers.2": "disk", "model.norm": "disk",
                  "lm_head": "disk"}
    device_map = {k: v for k, v in device_map.items() if _has(lm.model, k)}
    model = dispatch_model(lm.model, device_map=device_map, offload_dir=str(tmp_path))
    split = LoadedModel(model=model, tokenizer=lm.tokenizer, arch=Architecture.of(model), spec=lm.spec, source=lm.source)
    tied = model.config.get_text_config().tie_word_embeddings  # gemma3's head is the embedding (kept on the CPU)
    offloaded = [split.arch.final_norm, split.arch.mlp_down(2)] + ([] if tied else [split.arch.unembed])
    assert all(m.weight.device.type == "meta" for m in offloaded)  # really offloaded
    resid = torch.randn(3, lm.arch.d_model)
    ids = [4, 9, 17]
    ref_engine, got_engine = Engine(plain), Engine(split)
    with torch.no_grad():
        torch.testing.assert_close(logit_lens(got_engine, resid, ids), logit_lens(ref_engine, resid, ids))
        torch.testing.assert_close(logit_lens(got_engine, resid), logit_lens(ref_engine, resid))
    seqs = [kn.ScoredSequence([5, 9, 17, 33], [41, 7, 12]), kn.ScoredSequence([3, 8, 21], [30, 11, 6, 40])]
    for cfg in (kn.KeyNeuronConfig(score="contribution", final_norm="full"),
                kn.KeyNeuronConfig(score="contribution", final_norm="weight"),
                kn.KeyNeuronConfig(score="ig", ig_steps=2)):
        for got, ref in zip(kn.token_scores(got_engine, seqs, cfg), kn.token_scores(ref_engine, seqs, cfg)):
            torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-4)
    assert all(m.weight.device.type == "meta" for m in offloaded)  # offloaded again after each read


def _has(model, name):
    try:
        model.get_submodule(name)
        return True
    except AttributeError:
        return False


def test_layers_on_two_devices_keep_every_tensor_on_its_layers_device():
    lm = tiny_loaded("llama")
    model = lm.model
    for module in (model.model.layers[2], model.model.norm, model.lm_head):  # the second "device"
        module.to("meta")
        add_hook_to_module(module, AlignDevicesHook(execution_device="meta", io_same_device=False))
    model.hf_device_map = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "cpu",
                           "model.layers.2": "meta", "model.norm": "meta", "lm_head": "meta"}
    split = LoadedModel(model=model, tokenizer=lm.tokenizer, arch=lm.arch, spec=lm.spec, source=lm.source)
    assert split.device == torch.device("cpu")  # inputs go where the embedding computes
    batch = batch_from_ids(IDS)
    captures, edits = _requests(batch)
    trace = Engine(split).run(batch, captures, edits)  # raises if a cpu-built tensor meets a meta layer
    assert trace.logits.device.type == "meta" and trace.logits.shape == (2, 64)
    a = lm.arch
    for c in captures:
        assert trace[c.key].device.type == "meta"  # gathered on the output's device
    assert trace["q"].shape == (2, a.n_layers, 1, a.n_heads, a.head_dim)
    assert trace["full"].shape == (2, a.n_layers, a.n_heads, 8, 8)


def test_execution_device_of_device_map_entries():
    assert execution_device(0) == torch.device("cuda", 0)
    assert execution_device("disk") == torch.device("cpu")
    assert execution_device("cpu") == torch.device("cpu")
    assert execution_device("cuda:1") == torch.device("cuda", 1)
