"""A paper file declares a fine-tuning as an experiment (``suite: finetune``): planned at every
scale and run as a reproduce child at micro scale, its trained weights in the child's folder."""

from __future__ import annotations

import json

import pytest
import yaml

from whitebox_eval import studies

PAPER = {
    "paper": "998", "short": "ft", "title": "A paper whose model is trained first", "seed": "none.txt",
    "experiments": [{"id": "arith-ft", "suite": "finetune",
                     "settings": {"task": "arithmetic-gen", "learning_rate": 3e-3, "train_batch_size": 4,
                                  "save_every": 4, "max_new_tokens": 4},
                     "scales": {"micro": {"limit": 24, "max_steps": 4}, "quick": {"limit": 400}, "paper": {}}}],
    "claims": [{"id": "ft-learns", "claim": "The trained model answers held-out sums", "cite": "sec. 1",
                "experiment": "arith-ft", "stat": {"key": "accuracy,after", "than": 0.0}, "direction": "greater",
                "published": {"text": "more than none"}, "arms": {"a": {"label": "accuracy after", "key": "accuracy,after"}}}],
}


@pytest.fixture
def paper_file(tmp_path):
    path = tmp_path / "ft_paper.yaml"
    path.write_text(yaml.safe_dump(PAPER), encoding="utf-8")
    return path


def test_a_paper_runs_a_finetune_child(tiny_smol_folder, tmp_path, paper_file):
    r = studies.reproduce(str(paper_file), tmp_path / "out", models=[str(tiny_smol_folder)], scale="micro",
                          show_progress=False)
    (child,) = json.loads((r.folder / "plan.json").read_text())["children"]
    assert child["suite"] == "finetune" and child["items"] == 24
    run = r.folder / "runs" / child["run_id"]
    assert (run / "model.safetensors").is_file()
    assert json.loads((run / "trained.json").read_text())["steps"] == 4
    (claim,) = r.claims
    assert claim["id"] == "ft-learns" and claim["verdict"]


@pytest.mark.parametrize("scale", ["quick", "cpu", "paper"])
def test_a_finetune_experiment_plans_at_every_scale(tiny_smol_folder, tmp_path, paper_file, scale, capsys):
    from whitebox_eval.cli import main

    main(["reproduce", str(paper_file), "--plan-only", "--scale", scale, "--model", str(tiny_smol_folder),
          "--output", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert f"[1/1] finetune {tiny_smol_folder}" in out, out
