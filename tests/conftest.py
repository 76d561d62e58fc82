"""Shared fixtures: locate the optional real-data samples (``../shared/datasets``); run the CLI in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_datasets_dir() -> Path | None:
    """The folder of real-format benchmark samples, or None when this clone has none.

    ``WHITEBOX_SHARED_DATASETS`` overrides the default ``<repo>/../shared/datasets``.
    """
    env = os.environ.get("WHITEBOX_SHARED_DATASETS")
    candidate = Path(env) if env else REPO_ROOT.parent / "shared" / "datasets"
    return candidate if candidate.is_dir() else None


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """Path to the real-format samples; skips the test (with the reason) when absent."""
    path = shared_datasets_dir()
    if path is None:
        pytest.skip("real-format dataset samples not found: set WHITEBOX_SHARED_DATASETS "
                    "or place them at ../shared/datasets")
    return path


@pytest.fixture(scope="session")
def shared_datasets_optional() -> Path | None:
    """The real-format samples' folder, or None: for a test that skips only where a step needs them."""
    return shared_datasets_dir()


@pytest.fixture
def cli(capsys):
    """Run ``whitebox-eval ARGS`` in this process; returns (exit code, stdout, stderr).

    torch's thread count is put back after each command: ``mui train-sae`` / ``sae-fidelity`` set it
    (``--threads``, else ``os.cpu_count()``, which counts hyper-threads where torch's default does not),
    and a later test comparing this process's floats with a subprocess's must not inherit it.
    """
    import torch

    from whitebox_eval.cli import main

    def run(args: list[str]) -> tuple[int, str, str]:
        capsys.readouterr()
        threads = torch.get_num_threads()
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            torch.set_num_threads(threads)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def tiny_smol_folder(tmp_path_factory):
    """A tiny random llama with SmolLM2's tokenizer saved as a model folder (what ``--model FOLDER``
    loads; the tokenizer makes GAR's answers single word-initial tokens)."""
    import torch
    import transformers as tf

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
