"""Run folders this process created, and where a new one may go.

When a command fails, :func:`remove_unused_fresh_folders` deletes the run folders it
created that hold nothing but ``config.yaml`` and ``run.log``, so a usage error leaves no
empty run behind; a folder with finished work is never touched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.atomic import ACTIVE
from whitebox_eval.runs.listing import RESULTS_FILE, SAMPLES_FILE
from whitebox_eval.runs.provenance import CONFIG_FILE

LOG_FILE = "run.log"
FRESH: set[Path] = set()  # run folders this process created (removed again if left empty by an error)


def start_command() -> None:
    """Forget the run folders of earlier commands in this process (the CLI calls this
    first, so :func:`remove_unused_fresh_folders` and :func:`disk_error` see only its own)."""
    FRESH.clear()
    ACTIVE.clear()


def remove_unused_fresh_folders() -> list[Path]:
    """Delete the run folders this process created that hold nothing but ``config.yaml``
    and ``run.log`` (called when a command fails, so a usage error leaves no empty run).
    Returns the folders removed."""
    removed = []
    for path in sorted(FRESH):
        files = [p for p in path.rglob("*") if not p.is_dir()] if path.is_dir() else []
        if path.is_dir() and all(p.parent == path and p.name in (CONFIG_FILE, LOG_FILE) for p in files):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        FRESH.discard(path)
    return removed


def check_output_root(root: Path) -> None:
    """Refuse an ``--output`` that is (or lies inside) a file, before anything is created."""
    for where in (root, *root.parents):
        if where.exists():
            if not where.is_dir():
                raise WhiteboxError(f"--output {root}: {where} is a file, not a folder; give a folder "
                                    "for the run folders (it is created if missing)")
            return


def has_finished_work(path: Path) -> bool:
    samples = path / SAMPLES_FILE
    return (samples.is_file() and samples.stat().st_size > 0) or (path / RESULTS_FILE).is_file()


def unused_path(root: Path, run_id: str) -> Path:
    path, n = root / run_id, 2
    while path.exists():
        path, n = root / f"{run_id}-{n}", n + 1
    return path
