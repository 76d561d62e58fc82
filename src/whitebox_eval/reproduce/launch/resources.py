"""What a child's Slurm job asks for: GPUs, tasks, host memory and time, from its model and its estimate.

The rule (stated in ``--plan-only --launcher slurm`` and docs/cluster.md):

- GPU memory: the model's parameter bytes (:func:`whitebox_eval.reproduce.gpu.parameters` from its
  shapes) at :data:`INFERENCE_BYTES` per parameter (bf16 weights) plus :data:`CAPTURE_MARGIN` for the
  captures and activations, or :data:`TRAINING_BYTES` per parameter for a child that trains
  (weights, gradients, float32 masters and AdamW's two moments); GPUs = that over
  :data:`GPU_USABLE_GB` per GPU, rounded up, at most :data:`GPUS_PER_NODE` (the model is split over
  them with ``--device-map auto``). A model of unknown shapes gets one GPU.
- Data parallel: a child whose mode shards its items (the record's ``shards``), whose model fits
  one GPU and whose GPU estimate exceeds :data:`DATA_PARALLEL_HOURS` runs as several tasks of one
  job, one GPU each (at most a node's), its time divided among them.
- Host memory: the weights in bf16 x :data:`HOST_FACTOR` + :data:`HOST_BASE_GB`.
- Time: the plan's estimate (the GPU estimate at ``--scale paper`` where the shapes are known, the
  CPU estimate otherwise) x ``--slurm-time-factor`` + :data:`MARGIN_MINUTES` (loading, caches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

INFERENCE_BYTES = 2.0
CAPTURE_MARGIN = 0.25
TRAINING_BYTES = 16.0
GPU_USABLE_GB = 70.0
"""An 80 GB GPU less what CUDA and the allocator keep."""
GPUS_PER_NODE = 8
DATA_PARALLEL_HOURS = 2.0
HOST_FACTOR = 1.5
HOST_BASE_GB = 16
MARGIN_MINUTES = 15
CPUS_PER_TASK = 8


@dataclass(frozen=True)
class Resources:
    gpus: int  # per node, in all
    tasks: int  # tasks per node (data-parallel ranks)
    mem_gb: int
    minutes: int
    params: float | None  # the model's parameters (None: shapes unknown)
    trains: bool
    wanted_gpus: int  # before the cap at one node

    def describe(self) -> str:
        size = f"{self.params / 1e9:.2f}B params" if self.params else "shapes unknown"
        what = f"{self.gpus} GPU" + ("s" if self.gpus > 1 else "")
        if self.tasks > 1:
            what += f" as {self.tasks} data-parallel tasks"
        elif self.gpus > 1:
            what += " (--device-map auto)"
        note = f", needs {self.wanted_gpus}: more than a node" if self.wanted_gpus > self.gpus else ""
        hours, minutes = divmod(self.minutes, 60)
        return (f"{what}, {self.mem_gb} GB memory, {hours}:{minutes:02d} h "
                f"({size}{', training' if self.trains else ''}{note})")


def trains(child) -> bool:
    """Whether ``child`` trains its model: its mode's config has a ``learning_rate`` (finetune,
    contamination), or counts ``finetune_examples`` (span) and this child's count is above 0."""
    import dataclasses

    from whitebox_eval.lazy import resolve
    from whitebox_eval.suites import suite as record

    fields = {f.name: f for f in dataclasses.fields(resolve(record(child.suite).mode(child.mode).config))}
    if "finetune_examples" in fields:
        return bool(child.settings.get("finetune_examples", fields["finetune_examples"].default))
    return "learning_rate" in fields


def parameters_of(child) -> float | None:
    from whitebox_eval.reproduce import gpu

    folder = child.source or (child.model if Path(child.model).is_dir() else None)
    shapes = gpu.shapes(child.model, folder)
    return gpu.parameters(shapes)[0] if shapes else None


def size(child, time_factor: float) -> Resources:
    """The resources of ``child``'s job (the rule in this module's docstring)."""
    from whitebox_eval.suites import suite as record

    params = parameters_of(child)
    training = trains(child)
    need_gb = (params or 0) * (TRAINING_BYTES if training else INFERENCE_BYTES * (1 + CAPTURE_MARGIN)) / 1e9
    wanted = max(1, math.ceil(need_gb / GPU_USABLE_GB))
    gpus = min(wanted, GPUS_PER_NODE)
    seconds = child.gpu_seconds if child.gpu_seconds is not None else child.seconds
    tasks = 1
    shards = child.suite in _suites() and record(child.suite).mode(child.mode).shards
    if shards and gpus == 1 and child.gpu_seconds is not None and seconds > DATA_PARALLEL_HOURS * 3600:
        tasks = min(GPUS_PER_NODE, math.ceil(seconds / (DATA_PARALLEL_HOURS * 3600)))
        gpus = tasks
    mem = HOST_BASE_GB + math.ceil((params or 0) * INFERENCE_BYTES / 1e9 * HOST_FACTOR)
    minutes = math.ceil(seconds / tasks * time_factor / 60) + MARGIN_MINUTES
    return Resources(gpus, tasks, mem, minutes, params, training, wanted)


def _suites():
    from whitebox_eval.suites import SUITES

    return SUITES
