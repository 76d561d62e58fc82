"""``reproduce --launcher slurm`` on a fake Slurm (conftest.py): children as jobs, the same
claims as the local launcher, failures, producers, re-runs and ``--slurm-max-jobs``."""

from __future__ import annotations

import json

from whitebox_eval import studies
from whitebox_eval.reproduce import run as reproduce
from whitebox_eval.reproduce.launch.slurm import SlurmOptions


def _claims(folder):
    return json.loads((folder / "claims.json").read_text())


def test_children_run_as_jobs_and_give_the_local_claims(fake_slurm_on_path, gated, tiny_model, write_paper, tmp_path):
    path = write_paper([{"id": "a", "settings": {"limit": 8}}, {"id": "b", "settings": {"limit": 8, "seed": 1}}])
    local = reproduce([path], models=[tiny_model], scale="micro", output=tmp_path / "local", echo=lambda _: None)
    cluster = reproduce([path], models=[tiny_model], scale="micro", output=tmp_path / "cluster",
                        slurm=SlurmOptions(), echo=lambda _: None)
    assert _claims(cluster.folder) == _claims(local.folder)
    records = fake_slurm_on_path.records()
    assert len(records) == 2 and all(r["state"] == "COMPLETED" for r in records)
    jobs = json.loads((cluster.folder / "jobs.json").read_text())
    assert sorted(j["job"] for j in jobs.values()) == sorted(r["key"] for r in records)
