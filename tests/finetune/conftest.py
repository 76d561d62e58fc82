"""A tiny random llama with SmolLM2's tokenizer saved as a model folder (what ``--model FOLDER``
loads; the tokenizer makes GAR's answers single word-initial tokens)."""

from __future__ import annotations

import pytest
import torch
import transformers as tf


@pytest.fixture(scope="session")
def tiny_smol_folder(tmp_path_factory):
    from whitebox_eval.errors import WhiteboxError
    from whitebox_eval.models.loading import resolve_source

    try:
        source, _ = resolve_source("smollm2-135m")
    except WhiteboxError as e:  # pragma: no cover - bundled model not installed
        pytest.skip(f"smollm2-135m not available: {e}")
    tok = tf.AutoTokenizer.from_pretrained(source)
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=2048,
                         pad_token_id=tok.pad_token_id or 0, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, tie_word_embeddings=True, attn_implementation="sdpa")
    model = tf.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    path = tmp_path_factory.mktemp("models") / "tiny-smol"
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def one_thread():
    """Same thread count in every run a module compares (float sums depend on it)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def finetuned():
    """``finetuned(model_folder, args, out, run_id)``: one ``whitebox-eval finetune`` run in this process
    (the CLI's own entry), its run folder."""
    def run(model_folder, args, out, run_id):
        from whitebox_eval.cli import main

        try:
            main(["finetune", "--model", str(model_folder), *args, "--output", str(out), "--run-id", run_id])
        except SystemExit as e:
            assert e.code in (0, None)
        return out / run_id

    return run
