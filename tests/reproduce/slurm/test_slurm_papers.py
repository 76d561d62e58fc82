"""The bundled papers through the fake Slurm: ``reproduce 000 004 --scale micro --launcher slurm``
writes the claims.json ``--launcher local`` writes (on the tiny random model the other micro
reproductions use, so the test stays minutes, not hours, on 2 cores)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "faults"))
from cases import build_fixtures  # noqa: E402


@pytest.mark.slow
def test_000_004_micro_on_slurm_gives_the_local_claims(fake_slurm_on_path, cli, tmp_path, shared_datasets):
    tiny = str(build_fixtures(tmp_path / "fixtures") / "tiny")
    base = ["reproduce", "000", "004", "--scale", "micro", "--run-id", "r", "--model", tiny,
            "--data-root", str(shared_datasets)]
    code, _, err = cli([*base, "--output", str(tmp_path / "local")])
    assert code == 0, err[-2000:]
    code, _, err = cli([*base, "--output", str(tmp_path / "slurm"), "--launcher", "slurm", "--slurm-max-jobs", "2"])
    assert code == 0, err[-2000:]
    records = fake_slurm_on_path.records()
    assert records and all(r["state"] == "COMPLETED" for r in records)
    local = (tmp_path / "local" / "r" / "claims.json").read_bytes()
    assert (tmp_path / "slurm" / "r" / "claims.json").read_bytes() == local
