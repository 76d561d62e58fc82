"""The bundled real models: offline load, cached second load, captures on real prompts."""

from __future__ import annotations

import pytest
import torch

from whitebox_eval.internals import Capture, Engine
from whitebox_eval.models import BUNDLED, load_model
from whitebox_eval.models import loading

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=sorted(BUNDLED))
def bundled(request):
    return load_model(request.param)


def test_loads_offline_from_the_safetensors_cache(bundled, monkeypatch):
    assert str(loading.cache_root()) in bundled.source
    # a second load must not dequantize the GGUF file again
    monkeypatch.setattr(loading, "_dequantize_gguf_to_cache", lambda *a, **k: pytest.fail("dequantized twice"))
    again = load_model(bundled.spec)
    assert again.source == bundled.source
    assert torch.equal(next(again.model.parameters()), next(bundled.model.parameters()))


def test_architecture_of_the_bundled_models(bundled):
    a = bundled.arch
    expected = {"smollm2-135m": ("llama", 30, 9, 3, 64), "gemma3-270m": ("gemma3", 18, 4, 1, 256)}[bundled.spec]
    assert (a.family.name, a.n_layers, a.n_heads, a.n_kv_heads, a.head_dim) == expected


def test_engine_on_a_real_prompt(bundled):
    engine = Engine(bundled)
    batch = engine.batch(["The Eiffel Tower is located in the city of", "Paris is the capital of"])
    with torch.no_grad():  # the model's own last-position path (full-sequence logits differ by ~1e-5 from matmul shapes)
        plain = bundled.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                              position_ids=batch.position_ids, logits_to_keep=1).logits[:, -1]
    t = engine.run(batch, [Capture("q", "last"), Capture("k", [[1], [1]]), Capture("attn", "last")])
    assert torch.equal(t.logits, plain)
    assert bundled.tokenizer.decode(t.logits[0].argmax()).strip() == "Paris"  # by 2.6 logits or more: no near-tie
    rows = t["attn"][:, :, :, 0]  # [B, L, H, S]
    lengths = batch.lengths
    torch.testing.assert_close(rows.sum(-1), torch.ones_like(rows.sum(-1)), atol=1e-4, rtol=0)
    assert torch.all(rows[1, ..., int(lengths[1]):] == 0)  # keys beyond the shorter prompt are empty
    a = bundled.arch
    assert t["q"].shape == (2, a.n_layers, 1, a.n_heads, a.head_dim)
    assert t["k"].shape == (2, a.n_layers, 1, a.n_kv_heads, a.head_dim)
