"""The bad-input and fault cases: each ends in one ``error:`` line and exit 2 (no
traceback, no run folder left behind by a usage error); see ``benchmarks/fault_table.py``
for the before/after table."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cases import CASES, Case, failing_fsync  # noqa: E402


def _folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_ends_in_one_line(case: Case, fixtures: Path, cli, monkeypatch):
    if case.patch:
        monkeypatch.setattr(os, "fsync", failing_fsync(case.patch))
    before = _folders(fixtures / "runs")
    code, out, err = cli(case.args(fixtures))
    monkeypatch.undo()
    assert "Traceback" not in err
    assert code == case.code, err
    expect = case.expect.replace("{d}", str(fixtures))
    lines = [line for line in err.splitlines() if line.startswith(("error:", "warning:"))]
    if case.code == 0:  # on stderr (a report's warning) or in the run's log (rows skipped)
        args = case.args(fixtures)
        log = fixtures / "runs" / args[args.index("--run-id") + 1] / "run.log" if "--run-id" in args else None
        assert expect in err or (log is not None and expect in log.read_text()), err
        return
    assert len(lines) == 1 and expect in lines[0] and lines[0].startswith("error:"), err
    new = _folders(fixtures / "runs") - before
    assert new <= ({"full", "ro"} if case.patch else set()), f"left behind: {new}"
