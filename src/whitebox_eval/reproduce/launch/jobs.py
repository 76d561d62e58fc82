"""The job registry of a reproduction folder (``jobs.json``) and the lock of each child's run folder.

``jobs.json`` maps each child's run id to the Slurm job that runs it (job id, submission time,
resources, producers); it is read and written under an exclusive lock (``jobs.json.lock``), so
two ``reproduce`` calls on the same folder never both submit a child: the second finds the first's
job pending or running and leaves it be. On the node, :func:`run_lock` holds ``runs/<run_id>.lock``
while the child runs, so two jobs (an old one requeued and a new one) never write the same run
folder at once; the second fails at once, naming the holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError

JOBS_FILE = "jobs.json"
ACTIVE = ("PENDING", "RUNNING", "REQUEUED", "PREEMPTED", "CONFIGURING", "COMPLETING", "RESIZING", "SUSPENDED",
          "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT")
"""Slurm states of a job that has not ended (its child must not be submitted again)."""


@contextlib.contextmanager
def registry(folder: Path) -> Iterator[dict[str, Any]]:
    """``jobs.json`` of ``folder`` (run id -> job), held locked; written back when the block ends."""
    path = folder / JOBS_FILE
    with open(folder / (JOBS_FILE + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            jobs = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
            yield jobs
            from whitebox_eval.runs.atomic import write_atomic

            write_atomic(path, json.dumps(jobs, indent=1, sort_keys=True) + "\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read(folder: Path) -> dict[str, Any]:
    """``jobs.json`` of ``folder`` as it is now ({} without one)."""
    path = folder / JOBS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


@contextlib.contextmanager
def run_lock(runs: Path, run_id: str, job_id: str) -> Iterator[None]:
    """Hold ``runs/<run_id>.lock`` while the child runs (on the node); another holder is one line."""
    runs.mkdir(parents=True, exist_ok=True)
    path = runs / f"{run_id}.lock"
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise WhiteboxError(f"{runs / run_id} is being written by job {f.read().strip() or '?'}; "
                                "this job leaves it to that one") from None
        f.seek(0)
        f.truncate()
        f.write(f"{job_id} {os.uname().nodename} {os.getpid()}\n")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
