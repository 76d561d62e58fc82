"""``whitebox-eval mcqa --model FOLDER --task ssd`` on a tiny random gpt_neox (Pythia's family: fused
qkv interleaved per head, rotary on half of each head, parallel residual) with a tokenizer written
here: the run finishes and scores every head."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_folder  # noqa: E402
from whitebox_eval.cli import main  # noqa: E402


def test_mcqa_runs_on_a_gpt_neox_folder(tmp_path):
    folder = tiny_folder("gpt_neox", tmp_path / "pythia-tiny")
    assert json.loads((folder / "config.json").read_text())["model_type"] == "gpt_neox"
    main(["mcqa", "--model", str(folder), "--task", "ssd", "--limit", "24", "--min-val-items", "8", "--device", "cpu",
          "--no-item-views", "--output", str(tmp_path / "runs"), "--run-id", "neox"])
    results = json.loads((tmp_path / "runs" / "neox" / "results.json").read_text())
    assert results["n_evaluated"] == 24 and results["model_name"] == str(folder)
    assert 0.0 <= results["headline"]["acc,baseline"] <= 1.0 and "qk" in results  # QK-scores of every head
