"""`mui train-sae > log 2>&1`: the log shows where the run is while it collects residuals,
trains and evaluates (runs/progress lines, not a bar, when stderr is a file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "faults"))
from cases import build_model_dir  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"


def test_train_sae_writes_progress_lines_to_its_log(tmp_path):
    model = build_model_dir(tmp_path / "tiny")
    words = ["add ", "mul ", "12 ", "7 ", "=", "?", "Question: ", "A. ", "B. ", "what ", "is "]
    text = tmp_path / "text.txt"
    text.write_text("\n\n".join("".join(words[(i * 7 + j * 3) % len(words)] for j in range(60)) for i in range(12)))
    log = tmp_path / "log"
    env = {**os.environ, "PYTHONPATH": str(SRC), "WHITEBOX_EVAL_CACHE": str(tmp_path / "cache")}
    env.pop("WHITEBOX_PROGRESS", None)
    with open(log, "w") as f:
        code = subprocess.run([sys.executable, "-m", "whitebox_eval", "mui", "train-sae", "--model", str(model),
                               "--layer", "1", "--out", str(tmp_path / "sae"), "--text", str(text), "--context", "32",
                               "--heldout", "0.2", "--d-sae", "32", "--k", "4", "--steps", "30", "--batch-size", "64",
                               "--threads", "1"], stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    lines = log.read_text().splitlines()
    assert code == 0, "\n".join(lines)
    for stage in ("SAE residual collection (batches)", "SAE training (steps)", "SAE fidelity evaluation (batches)"):
        mine = [line for line in lines if line.startswith(stage + ": ")]
        assert mine, f"no progress line for {stage!r} in:\n" + "\n".join(lines)
        assert "(100%)" in mine[-1], mine  # the last line of each loop says it finished
    training = [line for line in lines if line.startswith("SAE training (steps): ")]
    assert training[0].startswith("SAE training (steps): 3/30 (10%)"), training  # a line per 10%
    order = [next(i for i, line in enumerate(lines) if line.startswith(s)) for s in
             ("SAE residual collection", "SAE training", "SAE fidelity evaluation")]
    assert order == sorted(order)
