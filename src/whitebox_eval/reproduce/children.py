"""Running a plan's child runs: each an ordinary resumable run folder under ``runs/``.

A child already finished here is read, not rerun; one finished in another reproduction
folder under the same ``--output`` is copied in (children are named by their settings,
so the same name is the same run); a child with a folder but no results is resumed.
A child that cannot run for a reason the user could fix (a :class:`WhiteboxError`: no
chat template, too few items, a model that does not load) is recorded as failed with
that reason, and the others go on.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from whitebox_eval import suites
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import costs
from whitebox_eval.reproduce.assemble import Outcome
from whitebox_eval.reproduce.plan import RUN_REF, Child, Plan
from whitebox_eval.runs.atomic import write_atomic
from whitebox_eval.runs.finished import is_finished, is_started

RUNS = "runs"
TIMING_FILE = "timing.json"
"""Seconds per child run (a reused child's travel with it) and the last call's wall seconds."""
#: the reason of a child ``reuse_only`` found no finished copy of
NOT_REUSED = "--reuse-only: no finished copy under --output"


def resolve_refs(value: Any, runs: Path) -> Any:
    """``value`` with every :func:`.plan.run_ref` replaced by that child's folder under ``runs``."""
    if isinstance(value, str):
        return RUN_REF.sub(lambda m: str(runs / m.group(1)), value)
    if isinstance(value, list | tuple):
        return [resolve_refs(v, runs) for v in value]
    if isinstance(value, dict):
        return {k: resolve_refs(v, runs) for k, v in value.items()}
    return value


def producers(child: Child, plan: Plan) -> list[str]:
    """The run ids of ``plan``'s children that ``child`` reads (its producers: an SAE, a trained
    model): every :func:`.plan.run_ref` in any string of its settings or its model, in plan order."""
    found: set[str] = set()

    def scan(value: Any) -> None:
        if isinstance(value, str):
            found.update(RUN_REF.findall(value))
        elif isinstance(value, list | tuple):
            for v in value:
                scan(v)
        elif isinstance(value, dict):
            for v in value.values():
                scan(v)

    scan(child.settings)
    scan(child.model)
    return [c.run_id for c in plan.children if c.run_id in found and c.run_id != child.run_id]


def finished_copy(folder: Path, output: Path, run_id: str) -> Path | None:
    """Child ``run_id``'s finished run folder: its own under ``folder/runs``, else a finished copy in
    another reproduction folder under ``output`` (None: neither)."""
    others = sorted(p for p in output.iterdir() if p != folder) if output.is_dir() else []
    return next((p for p in (folder / RUNS / run_id, *(o / RUNS / run_id for o in others)) if is_finished(p)), None)


def timings(folder: Path) -> dict[str, float]:
    """``folder``'s timing.json: seconds per child run there (empty when it has none)."""
    try:
        return json.loads((folder / TIMING_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def save_timings(folder: Path, seconds: dict[str, float]) -> None:
    write_atomic(folder / TIMING_FILE, json.dumps(seconds, indent=1, sort_keys=True) + "\n")


def run_child(child: Child, runs: Path, load: Callable[[str], Any], show_progress: bool | None) -> Path:
    """Run (or resume) ``child`` in ``runs/<run_id>`` on the model ``load`` gives for what it loads
    (a trained model's run reference resolved to its producer's folder under ``runs``, as every
    reference in its settings; both launchers run a child through this); its finished folder, read
    at assembly (:meth:`.assemble.Outcome.study`), once."""
    model, settings = resolve_refs((child.load, child.settings), runs)
    loaded = load(model)
    path = runs / child.run_id
    if path.is_dir() and not is_started(path):
        shutil.rmtree(path)  # killed before its config was written: nothing to resume
    return suites.run_folder(child.suite, child.mode, runs, run_id=child.run_id, resume=path.is_dir(),
                             show_progress=show_progress, loaded=loaded, **settings)


def _unready_producer(child: Child, outcomes: dict[str, Outcome]) -> str | None:
    """Why a child on a trained model cannot run (its producer did not finish here), or None."""
    pid = child.producer
    o = outcomes.get(pid) if pid else None
    if pid is None or (o is not None and o.status == "done"):
        return None
    return f"its model's training {pid} did not finish" + (f" ({o.reason})" if o is not None and o.reason else "")


class _Models:
    """One model in memory at a time (the plan runs each model's children together)."""

    def __init__(self) -> None:
        self.spec: str | None = None
        self.loaded = None
        self.error: str | None = None

    def get(self, spec: str):
        if spec != self.spec:
            from whitebox_eval.models import load_model

            self.spec, self.loaded, self.error = spec, None, None
            try:
                self.loaded = load_model(spec)
            except WhiteboxError as e:
                self.error = f"model {spec} did not load: {e}"
        if self.error:
            raise WhiteboxError(self.error)
        return self.loaded


def run(plan: Plan, folder: Path, output: Path, *, show_progress: bool | None = None,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
        reuse_only: bool = False) -> dict[str, Outcome]:
    """Run (or reuse) every child of ``plan`` in ``folder/runs``; their outcomes by run id, their
    seconds in ``folder``'s timing.json. ``reuse_only``: run nothing; a child with no finished copy
    under ``output`` is not run."""
    seconds = timings(folder)
    runs = folder / RUNS
    runs.mkdir(parents=True, exist_ok=True)
    outcomes: dict[str, Outcome] = {}
    models = _Models()
    total = max(plan.seconds, 1e-9)
    done_work = 0.0
    start = time.monotonic()
    n = len(plan.children)
    for i, child in enumerate(plan.children, 1):
        path = runs / child.run_id
        t0 = time.monotonic()
        if child.skip:
            outcomes[child.run_id] = Outcome(child, "skipped", child.skip)
            how = f"not run ({child.skip})"
        elif (found := finished_copy(folder, output, child.run_id)) is not None:
            how = "finished before: reused"
            if found != path:  # finished in another reproduction folder: copied in
                if path.exists():
                    shutil.rmtree(path)
                shutil.copytree(found, path)
                how = f"reused from {found.parent.parent.name}"
                if (took := timings(found.parent.parent).get(child.run_id)) is not None:
                    seconds[child.run_id] = took  # its time travels with it
            outcomes[child.run_id] = Outcome(child, "done", folder=str(path))
        elif (why := _unready_producer(child, outcomes)) is not None:
            outcomes[child.run_id] = Outcome(child, "skipped", why)
            how = f"not run ({why})"
        elif reuse_only:
            outcomes[child.run_id] = Outcome(child, "skipped", NOT_REUSED)
            how = f"not run ({NOT_REUSED})"
        else:
            log(f"reproduce: run {i}/{n} {child.describe()} ({child.items:,} items, ~{costs.duration(child.seconds)})")
            try:
                done = run_child(child, runs, models.get, show_progress)
                outcomes[child.run_id] = Outcome(child, "done", folder=str(done))
                how = "done"
            except WhiteboxError as e:
                outcomes[child.run_id] = Outcome(child, "failed", str(e))
                how = f"did not run: {e}"
        elapsed_child = time.monotonic() - t0
        if how == "done":  # run here now (not reused)
            seconds[child.run_id] = elapsed_child
        if child.run_id in seconds:
            save_timings(folder, seconds)  # after each child, so a killed reproduction keeps its times
        if child.skip is None:
            done_work += child.seconds
        elapsed = time.monotonic() - start
        share = done_work / total
        eta = "" if share >= 1 or share == 0 else f", ETA {costs.duration(elapsed / share * (1 - share))}"
        log(f"reproduce: {i}/{n} runs ({100 * share:.0f}% of the estimated work), elapsed "
            f"{costs.duration(elapsed)}{eta}: {child.describe()} {how}")
    return outcomes
