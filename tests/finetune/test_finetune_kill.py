"""A real ``kill -9`` of ``whitebox-eval finetune`` once its first training state is on disk, then
``--resume`` in another process: the weights equal an uninterrupted run's (one thread in each), and
so do the checkpoints kept along the way (``--keep-checkpoints``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from whitebox_eval.finetune.study import STATE_FILE
from whitebox_eval.models.checkpoints import list_checkpoints
from whitebox_eval.models.training import weights_file_sha256

SRC = Path(__file__).resolve().parents[2] / "src"
ARGS = ["--task", "arithmetic-gen", "--limit", "120", "--lr", "3e-3", "--train-batch-size", "2", "--epochs", "3",
        "--save-every", "2", "--eval-every", "1000", "--batch-size", "8", "--max-new-tokens", "2"]


def _command(model, out, run_id, *extra):
    return [sys.executable, "-m", "whitebox_eval", "finetune", "--model", str(model), *ARGS, "--output", str(out),
            "--run-id", run_id, *extra]


def _kept(folder):
    return [(c["step"], c["sha256"]) for c in list_checkpoints(folder)]


def _env():
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "WHITEBOX_PROGRESS": "off"}


@pytest.mark.slow
@pytest.mark.parametrize("keep", [[], ["--keep-checkpoints", "4"]], ids=["plain", "checkpoints"])
def test_kill_9_then_resume_equals_an_uninterrupted_run(tiny_smol_folder, tmp_path, keep):
    whole = subprocess.run(_command(tiny_smol_folder, tmp_path, "whole", *keep), env=_env(), capture_output=True,
                           text=True)
    assert whole.returncode == 0, whole.stderr
    proc = subprocess.Popen(_command(tiny_smol_folder, tmp_path, "killed", *keep), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = tmp_path / "killed" / STATE_FILE
    while proc.poll() is None and not state.is_file():
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # killed mid-training, not finished
    assert state.is_file() and not (tmp_path / "killed" / "model.safetensors").exists()
    resumed = subprocess.run(_command(tiny_smol_folder, tmp_path, "killed", *keep, "--resume"), env=_env(),
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "training continues from the state saved" in (tmp_path / "killed" / "run.log").read_text()
    assert weights_file_sha256(tmp_path / "killed") == weights_file_sha256(tmp_path / "whole")
    if keep:
        assert len(_kept(tmp_path / "whole")) == 5 and _kept(tmp_path / "killed") == _kept(tmp_path / "whole")
