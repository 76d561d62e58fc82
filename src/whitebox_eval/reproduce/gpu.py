"""GPU time of a child run, estimated from its model's shapes (for ``--scale paper --plan-only``).

The rule: seconds = units of work (the suite record's count, :mod:`.costs`) x tokens per unit
(:data:`TOKENS_PER_UNIT`) x forward FLOPs per token / throughput. FLOPs per token are
2 x the weights a token passes (every layer's attention and MLP, the active experts of a mixture,
and the output projection onto the vocabulary; the embedding lookup is free), the usual
forward count (Kaplan et al. 2020, sec. 2.1), attention over the context left out. A fine-tuning
example costs 3 forwards (forward and backward). Throughput: :data:`GPU_PEAK_FLOPS` x
:data:`GPU_EFFICIENCY` (H100 SXM bf16 dense at a stated fraction of peak), or, where
``benchmarks/results/gpu_check.json`` holds measured white-box tokens per second, the median
FLOP/s those imply (:func:`measured_throughput`). Shapes: ``model_configs.yaml`` (the hub
configs, offline), or the config.json of a ``--models-root`` folder when there is one.
"""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path
from typing import Any

import yaml

CONFIGS_FILE = Path(__file__).parent / "model_configs.yaml"
GPU_PEAK_FLOPS = 989e12
"""H100 SXM, bf16 dense tensor-core peak (NVIDIA's datasheet)."""
GPU_EFFICIENCY = 0.3
"""The fraction of peak a study reaches (our assumption: batched prompts of a few hundred tokens
with hooks reading heads and neurons; pure training loops reach 0.4-0.5)."""
GPU_CHECK = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "gpu_check.json"
GPU_CHECK_MODELS = {"llama-3-8b": "meta-llama/Meta-Llama-3-8B", "qwen2.5-7b": "Qwen/Qwen2.5-7B-Instruct",
                    "gemma-2-9b": "google/gemma-2-9b-it"}
"""gpu_check.py's model names -> a model of the same shapes in model_configs.yaml."""
#: forward-pass tokens one unit of work processes (our reading of each suite's unit, suites.py;
#: prompt lengths with SmolLM2's tokenizer): mcqa, a 0-shot prompt (MMLU 72 tokens, gpu_check.py;
#: CosmosQA and HaluEval longer: 100; shots scale the units); formats, 16 (a share of the 5-shot
#: prompt and a burst of sampled tokens); mui, a generated token and its scoring pass (3); masking,
#: a masked scoring or generation step (32); span, one example's characters and the instruction
#: (100: 13-190 characters per example, ID to OOD); gar, a one-shot GAR prompt (100: 94 tokens over
#: the 384 tasks, 109 for the truth tasks); contamination counts its MUI runs and training in mui's units (3)
TOKENS_PER_UNIT: dict[str, float] = {"mcqa": 100, "formats": 16, "mui": 3, "masking": 32, "span": 100, "gar": 100,
                                     "contamination": 3}
CPU_REFERENCE_TOKENS_PER_S = 240 * 72 / 64.3
"""SmolLM2-135M on the CPU: 240 0-shot MMLU items of 72 tokens in 64.3 s, one thread, every
white-box scorer (benchmarks/results/kshot_prefix.txt); with :func:`flops_per_token` the CPU
FLOP/s at which :func:`cpu_check` sets this rule beside costs.py's measured rates."""
FINETUNE_FORWARDS = 3.0


@functools.cache
def known_configs() -> dict[str, dict[str, Any]]:
    with open(CONFIGS_FILE, encoding="utf-8") as f:
        return yaml.safe_load(f)


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
        rows = json.loads(GPU_CHECK.read_text(encoding="utf-8"))
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


def seconds(suite: str, units: float, s: dict[str, Any], settings: dict[str, Any], flops: float) -> float:
    """GPU seconds of ``units`` of ``suite``'s work on shapes ``s`` at ``flops`` FLOP/s."""
    tokens = units * TOKENS_PER_UNIT[suite]
    tokens += FINETUNE_FORWARDS * float(settings.get("finetune_examples") or 0) * TOKENS_PER_UNIT[suite]
    return tokens * flops_per_token(s) / flops


def cpu_flops() -> float:
    """The CPU's FLOP/s by :data:`CPU_REFERENCE_TOKENS_PER_S`."""
    return CPU_REFERENCE_TOKENS_PER_S * flops_per_token(known_configs()["smollm2-135m"])


def cpu_check(suite: str, mode: str | None, model: str, settings: dict[str, Any], cpu_flops: float) -> tuple[float, float]:
    """(this rule's seconds at ``cpu_flops``, costs.py's measured-rate seconds) of one child on a
    bundled model: the two estimates side by side."""
    from whitebox_eval.reproduce import costs
    from whitebox_eval.suites import suite as record

    _, units = record(suite).estimate(mode, settings)
    rate = costs.RATES.get(f"{suite} {mode}", costs.RATES.get(suite, 0.1)) * costs.MODEL_FACTOR.get(model, 1.0)
    return seconds(suite, units, shapes(model), settings, cpu_flops), units * rate
