"""Fixtures for the GAR tests: the full dataset, generated once per session, and a tiny random
llama that uses SmolLM2's real tokenizer (fast, no model weights)."""

from __future__ import annotations

import pytest
import torch
import transformers as tf

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.generator import generate_gar
from whitebox_eval.models.architectures import Architecture
from whitebox_eval.models.loading import LoadedModel


@pytest.fixture(scope="session")
def gar_examples():
    return generate_gar(seed=0)


@pytest.fixture(scope="module")
def tokenizer():
    from whitebox_eval.models import load_model
    try:
        return load_model("smollm2-135m").tokenizer
    except WhiteboxError as e:  # pragma: no cover - bundled model not installed
        pytest.skip(f"smollm2-135m not available: {e}")


@pytest.fixture(scope="module")
def tiny_real_vocab(tokenizer) -> LoadedModel:
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
                         pad_token_id=0, attn_implementation="sdpa")
    model = tf.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return LoadedModel(model=model, tokenizer=tokenizer, arch=Architecture.of(model), spec="tiny", source="random")
