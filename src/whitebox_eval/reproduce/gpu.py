"""GPU time of a child run, estimated from its model's shapes (for ``--scale paper --plan-only``).

The rule: seconds = units of work (the suite record's count, :mod:`.costs`) x tokens per unit
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
"""

from __future__ import annotations

import functools
import json
import statistics
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

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
FLOP/s at which :func:`cpu_check` sets this rule beside costs.py's measured rates."""


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


def seconds(record, units: float, s: dict[str, Any], flops: float) -> float:
    """GPU seconds of ``units`` of a suite's work (its ``record``) on shapes ``s`` at ``flops`` FLOP/s."""
    return units * record.tokens_per_unit * flops_per_token(s) / flops


def cpu_flops() -> float:
    """The CPU's FLOP/s by :data:`CPU_REFERENCE_TOKENS_PER_S`."""
    return CPU_REFERENCE_TOKENS_PER_S * flops_per_token(known_configs()["smollm2-135m"])


def cpu_check(suite: str, mode: str | None, model: str, settings: dict[str, Any], cpu_flops: float) -> tuple[float, float]:
    """(this rule's seconds at ``cpu_flops``, costs.py's measured-rate seconds) of one child on a
    bundled model: the two estimates side by side."""
    from whitebox_eval.reproduce import costs
    from whitebox_eval.suites import suite as record

    _, units = record(suite).estimate(mode, settings)
    rate = record(suite).rate_of(mode) * costs.MODEL_FACTOR.get(model, 1.0)
    return seconds(record(suite), units, shapes(model), cpu_flops), units * rate
