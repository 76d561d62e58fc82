"""One child run as a Slurm job: what submitit pickles and a compute node calls.

:class:`ChildJob` carries what the submitting process knew beyond the child's settings: the
load options and placement (``--models-root``, ``--device``, ``--device-map``), the cache root,
and the record of a suite a plug-in registered there (it is registered again on the node, its
module importable there). It is :class:`submitit.helpers.Checkpointable`: on the preemption or
time-limit signal submitit dumps the same call and asks Slurm to requeue it, and the requeued
job resumes the child's run folder where it stopped. A data-parallel child (several tasks)
exports the torch distributed environment that :mod:`whitebox_eval.runs.distributed` reads.
This module imports submitit: only the Slurm launcher imports it.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import submitit


@dataclass
class ChildJob(submitit.helpers.Checkpointable):
    """Runs (or resumes) one child in ``runs/<run_id>`` on the node."""

    child: dict[str, Any]  # the plan's Child, as fields
    runs: str
    load: dict[str, Any]
    placement: dict[str, Any]
    cache_root: str | None = None
    record: Any = None  # a plug-in's suite record, registered again on the node

    @classmethod
    def of(cls, child, runs: Path, cache_root: str | None, device_map: str | None) -> ChildJob:
        from whitebox_eval import suites
        from whitebox_eval.models.load_options import LOAD
        from whitebox_eval.models.placement import PLACEMENT

        record = suites.SUITES.get(child.suite)
        builtin = record is None or all(m.run.startswith("whitebox_eval.") for m in record.modes.values())
        placement = {"device": PLACEMENT.device, "device_map": PLACEMENT.device_map or device_map}
        return cls({f: getattr(child, f) for f in ("run_id", "suite", "mode", "model", "settings", "source")},
                   str(runs), asdict(LOAD), placement, cache_root, None if builtin else record)

    def __call__(self) -> str:
        from whitebox_eval import suites
        from whitebox_eval.models.load_options import set_load
        from whitebox_eval.models.placement import set_placement
        from whitebox_eval.reproduce.launch.jobs import run_lock

        env = submitit.JobEnvironment()
        if env.num_tasks > 1:
            submitit.helpers.TorchDistributedEnvironment().export()
        if self.cache_root:
            os.environ["WHITEBOX_EVAL_CACHE"] = self.cache_root
        if self.record is not None and self.record.name not in suites.SUITES:
            suites.register(self.record)
        set_load(**self.load)
        set_placement(self.placement["device"], self.placement["device_map"] if env.num_tasks <= 1 else None)
        runs = Path(self.runs)
        if env.global_rank != 0:  # the other ranks of a data-parallel child write only their shards
            return _run(self.child, runs)
        with run_lock(runs, self.child["run_id"], env.job_id):
            return _run(self.child, runs)


def _run(fields: dict[str, Any], runs: Path) -> str:
    from whitebox_eval.models import load_model
    from whitebox_eval.reproduce.children import run_child
    from whitebox_eval.reproduce.plan import Child

    child = Child(**fields)
    return str(run_child(child, runs, load_model, show_progress=False))
