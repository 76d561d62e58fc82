"""Logit lens and EAP-IG attribution against independent computations."""

from __future__ import annotations

import pytest
import torch

from references import blocks
from tiny_models import FAMILY_NAMES, tiny_loaded
from whitebox_eval.internals import Capture, Engine, batch_from_ids, integrated_gradients, logit_difference_metric, logit_lens

IDS = [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21, 30, 11, 6, 40, 19]]
CORRUPT = [[5, 9, 17, 33, 2, 41, 7, 13], [3, 8, 21, 30, 11, 6, 40, 18]]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_logit_lens_of_the_last_layer_is_the_model_output(family):
    lm = tiny_loaded(family)
    engine = Engine(lm)
    batch = batch_from_ids(IDS)
    t = engine.run(batch, [Capture("resid", "last", [lm.arch.n_layers - 1])])
    lens = logit_lens(engine, t["resid"][:, 0, 0])
    torch.testing.assert_close(lens, t.logits, atol=1e-5, rtol=1e-5)
    ids = [4, 9, 60]
    torch.testing.assert_close(logit_lens(engine, t["resid"][:, 0, 0], ids), t.logits[:, ids], atol=1e-5, rtol=1e-5)


def _hand_ig_head(lm, family, layer, head, metric, steps):
    """IG for one head's output, written with plain HF forward + a test-owned hook."""
    model, D = lm.model, lm.arch.head_dim
    clean_ids, base_ids = torch.tensor(IDS), torch.tensor(CORRUPT)
    emb = model.get_input_embeddings()
    o_proj = blocks(model, family)[layer].self_attn.o_proj
    store = {}

    def hook(mod, args):
        x = args[0]
        if x.requires_grad:
            x.retain_grad()
        store["x"] = x

    h = o_proj.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            e_c, e_b = emb(clean_ids), emb(base_ids)
            model(inputs_embeds=e_c)
            a_c = store["x"][..., head * D:(head + 1) * D].clone()
            model(inputs_embeds=e_b)
            a_b = store["x"][..., head * D:(head + 1) * D].clone()
        total = torch.zeros_like(a_c)
        for k in range(1, steps + 1):
            e = (e_b + (k - 0.5) / steps * (e_c - e_b)).detach().requires_grad_(True)
            logits = model(inputs_embeds=e).logits[:, -1]
            metric(logits).sum().backward()
            total += store["x"].grad[..., head * D:(head + 1) * D]
    finally:
        h.remove()
    return ((a_c - a_b) * total / steps).sum(dim=(1, 2))  # over positions and head_dim


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3"])
def test_integrated_gradients_match_a_hand_written_loop(family):
    lm = tiny_loaded(family)
    engine = Engine(lm)
    metric = logit_difference_metric([10, 20], [11, 21])
    attr = integrated_gradients(engine, batch_from_ids(IDS), metric, steps=5, baseline=batch_from_ids(CORRUPT))
    for layer, head in [(0, 1), (2, 3)]:
        hand = _hand_ig_head(lm, family, layer, head, metric, steps=5)
        torch.testing.assert_close(attr.scores["head_out"][:, layer, head], hand, atol=1e-5, rtol=1e-4)
    assert attr.scores["mlp_act"].shape == (2, lm.arch.n_layers, lm.arch.d_ff)


def test_integrated_gradients_reject_bad_requests():
    lm = tiny_loaded("llama")
    engine = Engine(lm)
    metric = logit_difference_metric([10, 20], [11, 21])
    from whitebox_eval.errors import WhiteboxError

    with pytest.raises(WhiteboxError, match="same length"):
        integrated_gradients(engine, batch_from_ids(IDS), metric, baseline=batch_from_ids([x[:-1] for x in CORRUPT]))
    with pytest.raises(WhiteboxError, match="cannot attribute"):
        integrated_gradients(engine, batch_from_ids(IDS), metric, points=["attn"])
