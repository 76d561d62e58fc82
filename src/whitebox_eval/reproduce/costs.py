"""How long a child run takes, estimated before it starts (for the printed plan).

Each suite's work is counted in *units* (one forward-sized step: a prompt scored, a token
generated, an example attributed) by its record (:mod:`whitebox_eval.suites`) from its
config object, and what a unit costs on 2 CPU cores with SmolLM2-135M (its ``rate``, the medians
of ``benchmarks/reproduce_timing.py``'s ``benchmarks/results/reproduce_timing.md``: reproduce all,
quick scale, 2026-11-26); this module keeps how the other bundled model compares
(:data:`MODEL_FACTOR`). A model without a measured factor gets SmolLM2's times
:data:`UNKNOWN_MODEL_FACTOR`.
"""

from __future__ import annotations

import math
from typing import Any

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
