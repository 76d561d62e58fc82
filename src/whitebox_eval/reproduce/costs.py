"""How long a child run takes, estimated before it starts (for the printed plan).

Each suite's work is counted in *units* (one forward-sized step: a prompt scored, a token
generated, an example attributed) by its record (:mod:`whitebox_eval.suites`) from its
config object; this module keeps only what a unit costs: :data:`RATES` seconds,
measured per bundled model on 2 CPU cores (``benchmarks/reproduce_timing.py`` writes the
measured costs to ``benchmarks/results/reproduce_timing.md``). A model without a
measured rate gets SmolLM2's times :data:`UNKNOWN_MODEL_FACTOR`.
"""

from __future__ import annotations

import math
from typing import Any

BASIS = "on 2 CPU cores, from per-item costs measured there; a GPU is far faster"

#: seconds per unit of work, per suite (or "suite mode"), on 2 CPU cores (SmolLM2-135M): the
#: medians of benchmarks/results/reproduce_timing.md (reproduce all, quick scale, 2026-11-26)
RATES: dict[str, float] = {
    "mcqa": 0.35, "formats": 0.25, "mui": 0.02, "masking": 0.17, "span": 0.095, "gar": 0.17,
    "gar truth-heads": 0.1, "contamination": 0.02,
}
# gar truth-heads: 0.04 s per unit was measured while gar.selection capped every task at its first 16
# examples, so the quick plan's 40 per task ran 16: 0.04 x 40 / 16 = 0.1 s per unit actually run
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
    rate = RATES.get(f"{suite} {mode}", RATES.get(suite, 0.1))
    return items, units * rate * factor + (5.0 if math.isfinite(units) else 0.0)
