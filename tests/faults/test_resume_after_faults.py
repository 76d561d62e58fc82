"""A full disk, a read-only output or a torn array part loses at most the batch in flight:
``--resume`` then finishes the run with the same results.json, samples.jsonl and arrays
as an uninterrupted run."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cases import MCQA, failing_fsync  # noqa: E402


def _args(d: Path, run_id: str, *extra: str) -> list[str]:
    base = [a.replace("{d}", str(d)) for a in MCQA]
    return [*base, "--methods", "baseline,qk,pride,pa", "--run-id", run_id, *extra]


def _results_without_start_time(folder: Path) -> bytes:
    """results.json's bytes without lm-eval's ``date`` line (when each run folder was created)."""
    lines = (folder / "results.json").read_bytes().splitlines(keepends=True)
    return b"".join(line for line in lines if not line.lstrip().startswith(b'"date": '))


def _same_run(a: Path, b: Path) -> None:
    assert _results_without_start_time(a) == _results_without_start_time(b)
    assert (a / "samples.jsonl").read_bytes() == (b / "samples.jsonl").read_bytes()
    arrays = sorted(p.name for p in (a / "arrays").glob("*.npy"))
    assert arrays and arrays == sorted(p.name for p in (b / "arrays").glob("*.npy"))
    for name in arrays:
        assert (a / "arrays" / name).read_bytes() == (b / "arrays" / name).read_bytes(), name


@pytest.fixture(scope="module")
def whole(fixtures, tmp_path_factory) -> Path:
    from whitebox_eval.cli import main

    out = tmp_path_factory.mktemp("whole")
    main([*_args(fixtures, "whole"), "--output", str(out)])
    return out / "whole"


@pytest.mark.parametrize("kind", ["enospc", "erofs"])
@pytest.mark.parametrize("after", [1, 2, 5])
def test_disk_fault_then_resume_equals_uninterrupted_run(kind, after, fixtures, whole, cli, tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", failing_fsync(kind, after))
    code, _, err = cli([*_args(fixtures, "r"), "--output", str(tmp_path)])
    monkeypatch.undo()
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(f"error: cannot write to {tmp_path / 'r'}:")
    assert not list(tmp_path.rglob("*.tmp")), "a failed atomic write left its temporary file"
    code, _, err = cli([*_args(fixtures, "r", "--resume"), "--output", str(tmp_path)])
    assert code == 0, err
    _same_run(whole, tmp_path / "r")


def test_torn_part_is_recomputed_on_resume(fixtures, whole, cli, tmp_path):
    run = tmp_path / "torn"
    shutil.copytree(whole, run)
    (run / "results.json").unlink()
    part = sorted((run / "arrays" / "parts" / "main").glob("*.npz"))[1]
    part.write_bytes(part.read_bytes()[:300])  # what a kill mid-np.savez left before the fix
    code, _, err = cli([*_args(fixtures, "torn", "--resume"), "--output", str(tmp_path)])
    assert code == 0, err
    _same_run(whole, run)
    log = (run / "run.log").read_text()
    assert f"part {part} is unreadable" in log and "its batch is recomputed" in log
    assert part.is_file() and (part.parent / (part.name + ".unreadable")).is_file()


def test_run_files_are_readable_as_the_umask_allows(fixtures, whole, tmp_path):
    from whitebox_eval.runs import RunFolder

    mode = lambda p: p.stat().st_mode & 0o777  # noqa: E731
    files = [whole / n for n in ("config.yaml", "results.json", "samples.jsonl", "run.log")]
    files += list((whole / "arrays").glob("*.npy")) + list((whole / "arrays" / "parts" / "main").glob("*.npz"))
    umask = os.umask(0)
    os.umask(umask)
    assert {mode(p) for p in files} == {0o666 & ~umask}
    old = os.umask(0o027)
    try:
        folder = RunFolder.create(tmp_path, {"suite": "t"}, run_id="private")
        folder.save_results({"headline": {}})
    finally:
        os.umask(old)
    assert mode(folder.path / "results.json") == 0o640 and mode(folder.path / "config.yaml") == 0o640
