"""A preempted job (PREEMPTED, the user signal, submitit's checkpoint, ``scontrol requeue``)
resumes its run folder: its samples, arrays and results.json equal an uninterrupted run's."""

from __future__ import annotations

import json
from pathlib import Path

import fake_slurm

from whitebox_eval import suites
from whitebox_eval.reproduce import run as reproduce
from whitebox_eval.reproduce.launch.slurm import SlurmOptions, reproduce as on_slurm

TIMED = ("created", "finished", "elapsed", "seconds", "wall")


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not any(t in k for t in TIMED)}
    return value


def test_a_preempted_job_resumes_its_run_folder(fake_slurm_on_path, gated, tiny_model, write_paper, tmp_path):
    fake = fake_slurm_on_path
    gate, calls = tmp_path / "gate", tmp_path / "calls"
    settings = {"limit": 12, "gate": str(gate), "gate_at": 4, "calls": str(calls)}
    path = write_paper([{"id": "g", "settings": settings}])
    out = tmp_path / "out"
    assert on_slurm([path], SlurmOptions(detach=True), models=[tiny_model], scale="micro", output=out,
                    echo=lambda _: None) is None
    (rec,) = fake.records()
    fake.wait_for(lambda: Path(str(gate) + ".waiting").is_file(), "the job reaching its gate")
    fake_slurm.preempt(rec["key"])
    fake.wait_for(lambda: fake.record(rec["key"])["runs"] and fake.record(rec["key"])["state"] == "RUNNING",
                  "the requeued job starting again")
    fake.wait_for(lambda: Path(str(gate) + ".waiting").read_text() == "1", "the second attempt at the gate")
    gate.write_text("open")
    fake.wait_all_ended()
    history = fake.record(rec["key"])["history"]
    assert history == ["PENDING", "RUNNING", "PREEMPTED", "REQUEUED", "PENDING", "RUNNING", "COMPLETED"], history
    scored = [line.split() for line in calls.read_text().splitlines()]
    assert sorted(i for i, a in scored if a == "0") == [f"g-{i}" for i in range(4)]  # before the signal
    assert sorted((i for i, a in scored if a == "1"), key=lambda s: int(s[2:])) == [f"g-{i}" for i in range(4, 12)]
    result = reproduce([path], models=[tiny_model], scale="micro", output=out, echo=lambda _: None, resume=True,
                       reuse_only=True)
    (child,) = json.loads((result.folder / "plan.json").read_text())["children"]
    resumed = result.folder / "runs" / child["run_id"]
    whole = suites.run("gated", None, tmp_path / "whole", run_id="whole",
                       **{**settings, "calls": str(tmp_path / "calls-whole"), "model": tiny_model}).folder
    assert (resumed / "samples.jsonl").read_bytes() == (Path(whole) / "samples.jsonl").read_bytes()
    assert (resumed / "arrays" / "draws.npy").read_bytes() == (Path(whole) / "arrays" / "draws.npy").read_bytes()
    assert _untimed(json.loads((resumed / "results.json").read_text())) == \
        _untimed(json.loads((Path(whole) / "results.json").read_text()))
    assert result.claims[0]["verdict"] != "not run"
