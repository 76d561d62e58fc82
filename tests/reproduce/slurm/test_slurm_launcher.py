"""``reproduce --launcher slurm`` on a fake Slurm (conftest.py): children as jobs, the same
claims as the local launcher, failures, producers, re-runs and ``--slurm-max-jobs``."""

from __future__ import annotations

import json

from whitebox_eval.reproduce import run as reproduce
from whitebox_eval.reproduce.launch import status
from whitebox_eval.reproduce.launch.slurm import SlurmOptions, reproduce as on_slurm


def _claims(folder):
    return json.loads((folder / "claims.json").read_text())


def test_children_run_as_jobs_and_give_the_local_claims(fake_slurm_on_path, gated, tiny_model, write_paper, tmp_path):
    path = write_paper([{"id": "a", "settings": {"limit": 8}}, {"id": "b", "settings": {"limit": 8, "seed": 1}}])
    local = reproduce([path], models=[tiny_model], scale="micro", output=tmp_path / "local", echo=lambda _: None)
    cluster = on_slurm([path], SlurmOptions(), models=[tiny_model], scale="micro", output=tmp_path / "cluster",
                       echo=lambda _: None)
    assert _claims(cluster.folder) == _claims(local.folder)
    records = fake_slurm_on_path.records()
    assert len(records) == 2 and all(r["state"] == "COMPLETED" for r in records)
    jobs = json.loads((cluster.folder / "jobs.json").read_text())
    assert sorted(j["job"] for j in jobs.values()) == sorted(r["key"] for r in records)


def test_a_failing_child_is_reported_and_its_dependent_not_run(fake_slurm_on_path, gated, tiny_model, write_paper,
                                                               tmp_path):
    """The producer fails: it is reported with its log's tail, the child reading it is dropped by Slurm
    (afterok, --kill-on-invalid-dep=yes) and reported not run naming it; an independent child finishes."""
    path = write_paper([{"id": "other", "settings": {"limit": 8}},
                        {"id": "prod", "settings": {"limit": 8, "fail": True}},
                        {"id": "cons", "settings": {"limit": 8, "source": "{run.prod}"}}])
    result = on_slurm([path], SlurmOptions(), models=[tiny_model], scale="micro", output=tmp_path / "out",
                       echo=lambda _: None)
    runs = {r["run"]: r for p in result.content["papers"] for r in p["runs"]}
    plan = {c["run_id"]: c for c in json.loads((result.folder / "plan.json").read_text())["children"]}
    by_exp = {c["uses"][0][1]: rid for rid, c in plan.items()}
    jobs = json.loads((result.folder / "jobs.json").read_text())
    assert runs[by_exp["other"]]["status"] == "done"
    assert runs[by_exp["prod"]]["status"] == "failed"
    assert f"Slurm job {jobs[by_exp['prod']]['job']} FAILED" in runs[by_exp["prod"]]["reason"]
    assert "the gated child was told to fail" in runs[by_exp["prod"]]["reason"]  # the log's tail
    assert runs[by_exp["cons"]]["status"] == "skipped"
    assert runs[by_exp["cons"]]["reason"] == f"its producer {by_exp['prod']} failed (job {jobs[by_exp['prod']]['job']})"
    cons = fake_slurm_on_path.record(jobs[by_exp["cons"]]["job"])
    assert cons["opts"]["dependency"] == f"afterok:{jobs[by_exp['prod']]['job']}"
    assert cons["opts"]["kill-on-invalid-dep"] == "yes" and cons["runs"] == [] and cons["state"] == "CANCELLED"
    assert jobs[by_exp["cons"]]["producers"] == [by_exp["prod"]]


def test_the_jobs_carry_their_resources(fake_slurm_on_path, gated, tiny_model, write_paper, tmp_path):
    from whitebox_eval.reproduce import costs as resources

    path = write_paper([{"id": "a", "settings": {"limit": 4}}])
    result = on_slurm([path], SlurmOptions(partition="gpu", account="lab", qos="high", args={"constraint": "h100"}),
                      models=[tiny_model], scale="micro", output=tmp_path / "out", echo=lambda _: None)
    (job,) = json.loads((result.folder / "jobs.json").read_text()).values()
    rec = fake_slurm_on_path.record(job["job"])
    r = job["resources"]
    assert r["gpus"] == 1 and r["tasks"] == 1 and r["minutes"] == resources.MARGIN_MINUTES + 1
    assert {k: rec["opts"][k] for k in ("gpus-per-node", "mem", "time", "ntasks-per-node", "partition", "account",
                                        "qos", "constraint")} == \
        {"gpus-per-node": "1", "mem": f"{r['mem_gb']}GB", "time": str(r["minutes"]), "ntasks-per-node": "1",
         "partition": "gpu", "account": "lab", "qos": "high", "constraint": "h100"}
    assert rec["opts"]["signal"].startswith("USR2@")  # the user signal before the limit: submitit requeues
    assert job["cache_root"] == str((tmp_path / "out" / "cache").resolve())  # under --output by default
    lines = status.lines(result.folder)
    assert f"job {job['job']}, done, " in lines[1] and "used of ~0:" in lines[1] and lines[-1] == "states: done 1"
