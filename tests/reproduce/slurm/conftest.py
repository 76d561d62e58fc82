"""Fixtures of the Slurm launcher's tests: a fake Slurm on PATH (:mod:`fake_slurm`), the gated
suite registered, a tiny random model and paper files on it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(TESTS / "faults"))

import fake_slurm  # noqa: E402
import gated_suite  # noqa: E402

COMMANDS = ("sbatch", "srun", "sacct", "scontrol", "scancel")


class FakeSlurm:
    """The fake cluster of one test: its state folder and helpers to read and steer its jobs."""

    def __init__(self, state: Path) -> None:
        self.state = state

    def records(self) -> list[dict]:
        return fake_slurm.records()

    def record(self, key: str) -> dict:
        return fake_slurm.read(key)

    def wait_for(self, test, what: str, timeout: float = 900.0):
        """Poll ``test()`` until it is true (a guard against a hung job, not a time limit on the code:
        generous, since a job is a fresh Python importing torch beside others on a loaded machine)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if value := test():
                return value
            time.sleep(0.1)
        raise AssertionError(f"fake slurm: {what} did not happen; jobs: {json.dumps(self.records())[:3000]}")

    def wait_all_ended(self) -> None:
        self.wait_for(lambda: all(r["state"] not in fake_slurm.ACTIVE for r in self.records()), "every job ending")

    def max_running(self) -> int:
        """The most jobs that ran at once (from each attempt's start and end)."""
        spans = [s for r in self.records() for s in r["runs"]]
        return max((sum(a <= t < b for a, b in spans) for t, _ in spans), default=0)


@pytest.fixture
def fake_slurm_on_path(tmp_path, monkeypatch):
    """``sbatch``, ``srun``, ``sacct``, ``scontrol`` and ``scancel`` on PATH, each job a local process;
    the job's Python finds this checkout's source and the gated suite (PYTHONPATH, exported by sbatch)."""
    from whitebox_eval.reproduce.launch import slurm

    bin_dir, state = tmp_path / "slurm-bin", tmp_path / "slurm-state"
    bin_dir.mkdir()
    for name in COMMANDS:
        wrapper = bin_dir / name
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {HERE / 'fake_slurm.py'} {name} \"$@\"\n")
        wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    src = Path(slurm.__file__).resolve().parents[3]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(src), str(HERE), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(slurm, "POLL_SECONDS", 0.2)
    fake = FakeSlurm(state)
    yield fake
    for rec in fake.records():  # the jobs this test started and left running
        for pid in [rec.get("pgid")] + list(rec.get("tasks") or []):
            if pid and rec["state"] in fake_slurm.ACTIVE:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL) if pid == rec.get("pgid") else os.kill(pid, signal.SIGKILL)


@pytest.fixture
def gated(monkeypatch):
    from whitebox_eval import suites

    monkeypatch.setattr(suites, "SUITES", dict(suites.SUITES))
    return gated_suite.register()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    from cases import build_model_dir

    return str(build_model_dir(tmp_path_factory.mktemp("tiny") / "tiny"))


@pytest.fixture
def write_paper(tmp_path):
    return lambda experiments, name="gated_paper": _paper(tmp_path, experiments, name)


def _paper(tmp_path: Path, experiments: list[dict], name: str) -> str:
    """A paper file of gated experiments (each ``{"id", "settings"}``), a claim on the first."""
    spec = {"paper": "998", "short": "gated", "title": "A gated paper", "seed": "none.txt",
            "experiments": [{"id": e["id"], "suite": "gated", "settings": e["settings"],
                             "scales": {"micro": {}, "quick": {}, "paper": {}}} for e in experiments],
            "claims": [{"id": "gated-above-half", "claim": "Right more often than not", "cite": "sec. 1",
                        "experiment": experiments[0]["id"], "stat": {"key": "acc", "than": 0.5},
                        "direction": "greater", "published": {"text": "0.8"},
                        "arms": {"a": {"label": "accuracy", "key": "acc", "answers": "none"}}}]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)
