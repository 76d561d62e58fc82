"""A cache entry (dequantized GGUF, fine-tuned weights, a trained SAE) is filled once:
a failed build leaves nothing, a finished one is reused, concurrent processes build it once."""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from pathlib import Path

import pytest

from whitebox_eval.models import cache_entries as atomic


def _whole(folder: Path) -> bool:
    return (folder / "done").is_file()


def _build_slowly(target: str, log: str) -> None:
    def build(tmp: Path) -> None:
        with open(log, "a") as f:
            f.write("built\n")
        time.sleep(0.3)  # the other process reaches the lock meanwhile
        (tmp / "done").write_text("x")

    atomic.fill_once(Path(target), _whole, build)


def test_a_failed_build_leaves_nothing_and_a_finished_one_is_reused(tmp_path):
    target = tmp_path / "cache" / "entry"

    def broken(tmp: Path) -> None:
        (tmp / "half").write_text("x")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic.fill_once(target, _whole, broken)
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir()] == ["entry.lock"]  # no partial folder left
    assert atomic.fill_once(target, _whole, lambda tmp: (tmp / "done").write_text("1")) is True
    assert atomic.fill_once(target, _whole, lambda tmp: pytest.fail("built twice")) is False
    assert (target / "done").read_text() == "1"


def test_an_incomplete_entry_from_an_older_version_is_replaced(tmp_path):
    target = tmp_path / "entry"
    target.mkdir()
    (target / "stale").write_text("x")
    assert atomic.fill_once(target, _whole, lambda tmp: (tmp / "done").write_text("1")) is True
    assert sorted(p.name for p in target.iterdir()) == ["done"]


def test_two_processes_build_it_once(tmp_path):
    target, log = tmp_path / "entry", tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_build_slowly, args=(str(target), str(log))) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0, 0]
    assert log.read_text() == "built\n"
    assert _whole(target)


def test_without_a_lock_the_losing_rename_keeps_the_winners_entry(tmp_path, monkeypatch):
    target = tmp_path / "entry"
    monkeypatch.setattr(atomic, "exclusive_lock", lambda lock: contextlib.nullcontext())

    def build(tmp: Path) -> None:
        (tmp / "done").write_text("mine")
        target.mkdir()  # another process finished first
        (target / "done").write_text("theirs")
        (target / "more").write_text("x")  # a non-empty folder: the rename fails

    assert atomic.fill_once(target, _whole, build) is True
    assert (target / "done").read_text() == "theirs"
    assert not list(tmp_path.glob("entry.partial-*"))
