"""Re-running a Slurm reproduction submits only what is unfinished, never a child whose job is
pending or running; a job killed outright ends FAILED, shows so in ``--status`` and is submitted
again; a dependent waits for its producer; ``--slurm-max-jobs`` holds."""

from __future__ import annotations

import json
from pathlib import Path

import fake_slurm
import pytest

from whitebox_eval.reproduce import run as reproduce
from whitebox_eval.reproduce.launch import status
from whitebox_eval.reproduce.launch.slurm import SlurmOptions, reproduce as on_slurm


def _by_experiment(folder: Path) -> dict[str, str]:
    return {c["uses"][0][1]: c["run_id"] for c in json.loads((folder / "plan.json").read_text())["children"]}


@pytest.mark.slow
def test_a_rerun_submits_only_what_is_unfinished(fake_slurm_on_path, gated, tiny_model, write_paper, tmp_path):
    fake, gate = fake_slurm_on_path, tmp_path / "gate"
    path = write_paper([{"id": "a", "settings": {"limit": 8, "gate": str(gate)}},
                        {"id": "b", "settings": {"limit": 8, "seed": 1}}])
    kw = dict(models=[tiny_model], scale="micro", output=tmp_path / "out", echo=lambda _: None)
    on_slurm([path], SlurmOptions(detach=True), **kw)
    folder = tmp_path / "out" / "reproduce-998-micro"
    ids = _by_experiment(folder)
    first = json.loads((folder / "jobs.json").read_text())
    a_job, b_job = first[ids["a"]]["job"], first[ids["b"]]["job"]
    fake.wait_for(lambda: Path(str(gate) + ".waiting").is_file() and fake.record(b_job)["state"] == "COMPLETED",
                  "a at its gate and b done")
    on_slurm([path], SlurmOptions(detach=True), **kw, resume=True)  # a is running, b finished
    assert len(fake.records()) == 2 and json.loads((folder / "jobs.json").read_text()) == first
    lines = status.lines(folder)
    assert f"  {ids['a']}: job {a_job}, running" in "\n".join(lines) and f"  {ids['b']}: job {b_job}, done" in lines[2]
    fake_slurm.kill(a_job)  # a lost node
    fake.wait_for(lambda: fake.record(a_job)["state"] == "FAILED", "the killed job ending FAILED")
    failed_line = next(ln for ln in status.lines(folder) if ids["a"] in ln)
    assert f"job {a_job}, failed" in failed_line and "(FAILED: " in failed_line and "used of ~" in failed_line
    gate.write_text("open")
    result = on_slurm([path], SlurmOptions(), **kw, resume=True)
    records = fake.records()
    assert len(records) == 3  # a again, b not
    again = json.loads((folder / "jobs.json").read_text())[ids["a"]]["job"]
    assert again not in (a_job, b_job) and fake.record(again)["state"] == "COMPLETED"
    assert all(r["status"] == "done" for p in result.content["papers"] for r in p["runs"])
    assert status.lines(folder)[-1] == "states: done 2"


@pytest.mark.slow
def test_a_dependent_waits_and_max_jobs_holds_in_lanes(fake_slurm_on_path, gated, tiny_model, write_paper, tmp_path):
    fake, gate = fake_slurm_on_path, tmp_path / "gate"
    path = write_paper([{"id": "prod", "settings": {"limit": 8, "gate": str(gate)}},
                        {"id": "cons", "settings": {"limit": 8, "source": "{run.prod}"}},
                        {"id": "other", "settings": {"limit": 8, "seed": 2}}])
    kw = dict(models=[tiny_model], scale="micro", output=tmp_path / "out", echo=lambda _: None)
    on_slurm([path], SlurmOptions(detach=True, max_jobs=1), **kw)
    folder = tmp_path / "out" / "reproduce-998-micro"
    ids, jobs = _by_experiment(folder), json.loads((folder / "jobs.json").read_text())
    job = {e: jobs[rid]["job"] for e, rid in ids.items()}
    fake.wait_for(lambda: Path(str(gate) + ".waiting").is_file(), "the producer at its gate")
    assert fake.record(job["cons"])["state"] == "PENDING" and fake.record(job["other"])["state"] == "PENDING"
    assert fake.record(job["cons"])["opts"]["dependency"] == f"afterok:{job['prod']},afterany:{job['prod']}"
    assert fake.record(job["other"])["opts"]["dependency"] == f"afterany:{job['cons']}"  # one lane
    gate.write_text("open")
    fake.wait_all_ended()
    assert fake.max_running() == 1
    result = reproduce([path], **kw, resume=True, reuse_only=True)
    runs = Path(result.folder) / "runs"
    prod = json.loads((runs / ids["prod"] / "results.json").read_text())
    assert json.loads((runs / ids["cons"] / "results.json").read_text())["source_acc"] == prod["headline"]["acc"]


@pytest.mark.slow
def test_children_of_one_shape_go_as_one_array_with_max_jobs(fake_slurm_on_path, gated, tiny_model, write_paper,
                                                             tmp_path):
    path = write_paper([{"id": f"e{i}", "settings": {"limit": 4, "seed": i}} for i in range(3)])
    result = on_slurm([path], SlurmOptions(max_jobs=2), models=[tiny_model], scale="micro", output=tmp_path / "out",
                      echo=lambda _: None)
    records = fake_slurm_on_path.records()
    assert sorted(r["key"].split("_")[1] for r in records) == ["0", "1", "2"]
    assert {r["opts"]["array"] for r in records} == {"0-2%2"}
    assert fake_slurm_on_path.max_running() <= 2 and all(r["state"] == "COMPLETED" for r in records)
    assert all(r["status"] == "done" for p in result.content["papers"] for r in p["runs"])
