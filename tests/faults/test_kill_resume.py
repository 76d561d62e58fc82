"""kill -9 an MCQA run four times (twice during an array-part write), then --resume: the
run equals an uninterrupted one (the light version of ``benchmarks/kill_resume.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kill_resume.py"


@pytest.mark.slow
def test_killed_four_times_then_resumed_equals_uninterrupted(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = tmp_path / "outcome.json"
    p = subprocess.run([sys.executable, str(SCRIPT), "--model", "tiny", "--limit", "24", "--kills", "4",
                        "--out", str(tmp_path / "runs"), "--json", str(out)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    outcome = json.loads(out.read_text())
    assert outcome["identical"] and outcome["files_compared"] >= 5
    assert sum(a["killed"] for a in outcome["attempts"]) >= 2
