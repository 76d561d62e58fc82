"""The command line: user mistakes end in one line on stderr and exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "whitebox_eval", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    "args, message",
    [
        (["inspect", "--model", "./no/such/model"], "model path not found"),
        (["inspect", "--model", "missing.gguf"], "GGUF file not found"),
        (["mcqa", "--model", "smollm2-135m", "--task", "nosuchtask", "--limit", "4"], "unknown task"),
        (["mcqa", "--model", "smollm2-135m", "--task", "mmlu=/no/such/dir", "--limit", "4"], "not"),
    ],
)
def test_user_errors_exit_2_without_traceback(args, message, tmp_path):
    res = _run(*args, "--output", str(tmp_path)) if args[0] == "mcqa" else _run(*args)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert message in res.stderr
    assert res.stderr.strip().startswith("error:")


def test_help_teaches():
    res = _run("mcqa", "--help")
    assert res.returncode == 0
    for word in ("--task", "--resume", "--representative", "ssd"):
        assert word in res.stdout
