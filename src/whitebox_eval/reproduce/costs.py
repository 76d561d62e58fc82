"""What a child run costs, estimated before it starts: its time on 2 CPU cores and on a GPU (for the
printed plan), and what its Slurm job asks for.

**On the CPU**, each suite's work is counted in *units* (one forward-sized step: a prompt scored, a token
generated, an example attributed) by its record (:mod:`whitebox_eval.suites`) from its
config object, and what a unit costs on 2 CPU cores with SmolLM2-135M (its ``rate``, the medians
of ``benchmarks/reproduce_timing.py``'s ``benchmarks/results/reproduce_timing.md``: reproduce all,
quick scale, 2026-11-26); this module keeps how the other bundled model compares
(:data:`MODEL_FACTOR`). A model without a measured factor gets SmolLM2's times
:data:`UNKNOWN_MODEL_FACTOR`.

**On a GPU** (for ``--scale paper --plan-only``), from the model's shapes.

The rule: seconds = units of work (the suite record's count, as above) x tokens per unit
(the record's ``tokens_per_unit``) x forward FLOPs per token / throughput. FLOPs per token are
2 x the weights a token passes (every layer's attention and MLP, the active experts of a mixture,
and the output projection onto the vocabulary; the embedding lookup is free), the usual
forward count (Kaplan et al. 2020, sec. 2.1), attention over the context left out. Training is in
the units already (a record counts a fine-tuning example as 3 forwards). Throughput: :data:`GPU_PEAK_FLOPS` x
:data:`GPU_EFFICIENCY` (H100 SXM bf16 dense at a stated fraction of peak), or, where
the package data ``gpu_check.json`` (written by ``benchmarks/gpu_check.py --out``) holds measured
white-box tokens per second, the median
FLOP/s those imply (:func:`measured_throughput`). Shapes: ``model_configs.yaml`` (the hub
configs, offline), or the config.json of a ``--models-root`` folder when there is one.

**A Slurm job** (``--launcher slurm``) asks for GPUs, tasks, host memory and time, from the child's
model and its estimate (:func:`size`). The rule (stated in ``--plan-only --launcher slurm`` and docs/cluster.md):

- GPU memory: the model's parameter bytes (:func:`parameters` from its shapes) at :data:`INFERENCE_BYTES` per parameter (bf16 weights) plus :data:`CAPTURE_MARGIN` for the
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

import functools
import json
import math
import statistics
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

BASIS = "on 2 CPU cores, from per-item costs measured there; a GPU is far faster"

#: the other bundled model's time relative to SmolLM2-135M, measured on the same runs (its
#: per-paper minutes over SmolLM2's: 1.08; per suite 0.9-1.7)
MODEL_FACTOR: dict[str, float] = {"smollm2-135m": 1.0, "gemma3-270m": 1.1}
UNKNOWN_MODEL_FACTOR = 10.0


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def estimate(suite: str, mode: str | None, model: str, settings: dict[str, Any]) -> tuple[int, float]:
    """(items, estimated seconds) of a child run on ``model``."""
    from whitebox_eval.suites import suite as record

    items, units = record(suite).estimate(mode, settings)
    factor = MODEL_FACTOR.get(model, UNKNOWN_MODEL_FACTOR)
    return items, units * record(suite).rate_of(mode) * factor + (5.0 if math.isfinite(units) else 0.0)


# ---------------------------------------------------------------- on a GPU

CONFIGS_FILE = "model_configs.yaml"
"""The hub configs' shapes, package data of this package."""
GPU_PEAK_FLOPS = 989e12
"""H100 SXM, bf16 dense tensor-core peak (NVIDIA's datasheet)."""
GPU_EFFICIENCY = 0.3
"""The fraction of peak a study reaches (our assumption: batched prompts of a few hundred tokens
with hooks reading heads and neurons; pure training loops reach 0.4-0.5)."""
GPU_CHECK = "gpu_check.json"
"""gpu_check.py's rows (``model``, ``gpu``, ``0-shot_whitebox_tokens_per_s``), package data of this package."""
GPU_CHECK_MODELS = {"llama-3-8b": "meta-llama/Meta-Llama-3-8B", "qwen2.5-7b": "Qwen/Qwen2.5-7B-Instruct",
                    "gemma-2-9b": "google/gemma-2-9b-it"}
"""gpu_check.py's model names -> a model of the same shapes in model_configs.yaml."""
CPU_REFERENCE_TOKENS_PER_S = 240 * 72 / 64.3
"""SmolLM2-135M on the CPU: 240 0-shot MMLU items of 72 tokens in 64.3 s, one thread, every
white-box scorer (benchmarks/results/kshot_prefix.txt); with :func:`flops_per_token` the CPU
FLOP/s at which :func:`cpu_check` sets this rule beside the measured rates above."""


@functools.cache
def known_configs() -> dict[str, dict[str, Any]]:
    return yaml.safe_load((resources.files(__package__) / CONFIGS_FILE).read_text(encoding="utf-8"))


def shapes_from_config_json(cfg: dict[str, Any]) -> dict[str, Any]:
    """The shapes this module needs from a Hugging Face config.json (a multimodal model's text part)."""
    cfg = cfg.get("text_config") or cfg
    heads = cfg.get("num_attention_heads", 1)
    return {"hidden": cfg["hidden_size"], "layers": cfg["num_hidden_layers"], "heads": heads,
            "kv_heads": cfg.get("num_key_value_heads") or heads, "head_dim": cfg.get("head_dim"),
            "vocab": cfg["vocab_size"], "intermediate": cfg.get("intermediate_size") or 4 * cfg["hidden_size"],
            "tied": bool(cfg.get("tie_word_embeddings", True)),
            "experts": cfg.get("num_local_experts") or 1, "experts_active": cfg.get("num_experts_per_tok") or 1}


def shapes(model: str, source: str | None = None) -> dict[str, Any] | None:
    """``model``'s shapes: its folder's config.json (``source``), else ``model_configs.yaml`` (None: unknown)."""
    if source and (Path(source) / "config.json").is_file():
        try:
            return shapes_from_config_json(json.loads((Path(source) / "config.json").read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError):
            return None
    return known_configs().get(model) or known_configs().get(model.split("@")[0])


def parameters(s: dict[str, Any]) -> tuple[float, float]:
    """(all parameters, the parameters one token's forward multiplies by) of shapes ``s``: per
    layer the q, k, v, o projections (grouped k/v heads) and a gated MLP (3 matrices) per expert."""
    h, heads = s["hidden"], s["heads"]
    hd = s.get("head_dim") or h // heads
    attn = h * heads * hd * 2 + 2 * h * s["kv_heads"] * hd
    mlp = 3 * h * s["intermediate"]
    experts, active = s.get("experts") or 1, s.get("experts_active") or 1
    emb = s["vocab"] * h
    total = s["layers"] * (attn + experts * mlp) + emb * (1 if s.get("tied", True) else 2)
    per_token = s["layers"] * (attn + active * mlp) + emb  # the output projection; the lookup is free
    return float(total), float(per_token)


def flops_per_token(s: dict[str, Any]) -> float:
    return 2.0 * parameters(s)[1]


@functools.cache
def measured_throughput() -> tuple[float, str] | None:
    """(FLOP/s, `` on GPU`` as the rows name it, or empty) implied by gpu_check.py's measured
    0-shot white-box tokens per second (median over its models): batches of 8 prompts of 72 tokens with every scorer, the shape of a unit above
    (~100 tokens) at the suites' default batch of 8. Not its 5-shot rate (long prompts fill the
    GPU better: the estimate would be low for short-prompt suites) nor its study rate (the shared
    demonstrations are computed once, so it counts tokens the GPU never computes)."""
    try:
        rows = json.loads((resources.files(__package__) / GPU_CHECK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    key = "0-shot_whitebox_tokens_per_s"
    rates = [r[key] * flops_per_token(known_configs()[GPU_CHECK_MODELS[r["model"]]])
             for r in rows if r.get("model") in GPU_CHECK_MODELS and r.get(key)]
    if not rates:
        return None
    gpus = sorted({r["gpu"] for r in rows if r.get("gpu")})
    return statistics.median(rates), f" on {', '.join(gpus)}" if gpus else ""


def throughput() -> tuple[float, str]:
    """(FLOP/s, how it was set) for the estimate."""
    measured = measured_throughput()
    if measured:
        flops, where = measured
        return flops, f"{flops / 1e12:.0f} TFLOP/s measured by benchmarks/gpu_check.py{where}"
    return GPU_PEAK_FLOPS * GPU_EFFICIENCY, (f"one H100 SXM, bf16, at {GPU_EFFICIENCY:.0%} of its "
                                             f"{GPU_PEAK_FLOPS / 1e12:.0f} TFLOP/s peak")


def gpu_seconds(record, units: float, s: dict[str, Any], flops: float) -> float:
    """GPU seconds of ``units`` of a suite's work (its ``record``) on shapes ``s`` at ``flops`` FLOP/s."""
    return units * record.tokens_per_unit * flops_per_token(s) / flops


def cpu_flops() -> float:
    """The CPU's FLOP/s by :data:`CPU_REFERENCE_TOKENS_PER_S`."""
    return CPU_REFERENCE_TOKENS_PER_S * flops_per_token(known_configs()["smollm2-135m"])


def cpu_check(suite: str, mode: str | None, model: str, settings: dict[str, Any], cpu_flops: float) -> tuple[float, float]:
    """(this rule's seconds at ``cpu_flops``, the measured-rate seconds) of one child on a
    bundled model: the two estimates side by side."""
    from whitebox_eval.suites import suite as record

    _, units = record(suite).estimate(mode, settings)
    rate = record(suite).rate_of(mode) * MODEL_FACTOR.get(model, 1.0)
    return gpu_seconds(record(suite), units, shapes(model), cpu_flops), units * rate


# ---------------------------------------------------------------- a Slurm job's resources

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
    folder = child.source or (child.model if Path(child.model).is_dir() else None)
    s = shapes(child.model, folder)
    return parameters(s)[0] if s else None


def size(child, time_factor: float) -> Resources:
    """The resources of ``child``'s job (the rule in this module's docstring, **A Slurm job**)."""
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
