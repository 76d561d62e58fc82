"""The bundled papers through the fake Slurm: ``reproduce 000 004 --scale micro --launcher slurm``
writes the claims.json ``--launcher local`` writes."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_000_004_micro_on_slurm_gives_the_local_claims(fake_slurm_on_path, cli, tmp_path):
    base = ["reproduce", "000", "004", "--scale", "micro", "--run-id", "r"]
    code, _, err = cli([*base, "--output", str(tmp_path / "local")])
    assert code == 0, err[-2000:]
    code, _, err = cli([*base, "--output", str(tmp_path / "slurm"), "--launcher", "slurm", "--slurm-max-jobs", "2"])
    assert code == 0, err[-2000:]
    records = fake_slurm_on_path.records()
    assert records and all(r["state"] == "COMPLETED" for r in records)
    local = (tmp_path / "local" / "r" / "claims.json").read_bytes()
    assert (tmp_path / "slurm" / "r" / "claims.json").read_bytes() == local
