"""The fine-tuning tests' fixtures (the tiny model with SmolLM2's tokenizer is ``tests/conftest.py``'s
``tiny_smol_folder``)."""

from __future__ import annotations

import pytest
import torch


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
