"""The loop both recipe sweeps share (``arithmetic_recipes.py``, ``gar_recipes.py``): one recipe trained from
the base weights, scored every ``eval_every`` steps and at the last, the weights kept at its best point, and
the part of the row every sweep writes (the curve, seconds per step). SIGTERM or Ctrl-C ends the recipe with
the curve so far and ``stopped_at`` (the learning rate is constant, so a prefix of a longer recipe is the
shorter recipe); :func:`write` appends the row and :func:`main_guard` turns SIGTERM into that stop."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from whitebox_eval.models.training import Recipe, train_rows


def run(lm, seqs, recipe: Recipe, base_point: dict[str, Any], score: Callable[[], dict[str, Any]], *,
        eval_every: int, best: Callable[[dict[str, Any]], float], show: Callable[[int, float, dict[str, Any]], str],
        keep: Path | None = None) -> dict[str, Any]:
    """Train ``recipe`` on ``seqs`` (``lm`` holding the base weights), ``score()`` after every ``eval_every``
    steps and the last; each point printed by ``show(step, loss, point)``; the weights saved to
    ``keep`` (``<name>_<lr>.pt``) whenever ``best(point)`` beats every trained point before it. Returns the
    curve (``base_point`` at step 0), the training time per step (evaluation left out), the first loss, and
    ``stopped_at`` when interrupted."""
    curve = [{"step": 0, **base_point}]
    timing = {"train_s": 0.0, "cpu_s": 0.0, "last": time.perf_counter(), "cpu_last": time.process_time()}

    def after_step(step: int, loss: float) -> bool:
        if step % eval_every and step != recipe.steps:
            return False
        timing["train_s"] += time.perf_counter() - timing["last"]
        timing["cpu_s"] += time.process_time() - timing["cpu_last"]
        curve.append({"step": step, "loss": round(loss, 4), **score()})
        if keep and best(curve[-1]) > max((best(c) for c in curve[1:-1]), default=float("-inf")):
            torch.save(lm.model.state_dict(), keep.with_name(f"{keep.name}_{recipe.learning_rate:g}.pt"))
        print(show(step, loss, curve[-1]), flush=True)
        timing["last"], timing["cpu_last"] = time.perf_counter(), time.process_time()
        return False

    try:
        first, stopped = train_rows(lm, seqs, recipe, after_step=after_step).losses[0], None
    except KeyboardInterrupt:
        first, stopped = None, curve[-1]["step"]
    done = recipe.steps if stopped is None else max(1, stopped)
    return {"s_per_step": round(timing["train_s"] / done, 3), "cpu_s_per_step": round(timing["cpu_s"] / done, 3),
            "threads": torch.get_num_threads(), "loss_first": None if first is None else round(first, 4),
            "curve": curve, **({"stopped_at": stopped} if stopped is not None else {})}


def write(out: Path, row: dict[str, Any]) -> None:
    """Print the row and append it to ``out`` (one JSON line), with the machine's load beside it."""
    row = {**row, "load": list(map(float, open("/proc/loadavg").read().split()[:3]))}
    print(json.dumps(row), flush=True)
    with out.open("a") as f:
        f.write(json.dumps(row) + "\n")


def main_guard(main: Callable[[], Any]) -> Any:
    """Run a sweep's ``main`` seeded (torch's generator at 0) and with SIGTERM stopping it as Ctrl-C does (the
    row so far is still written)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    torch.manual_seed(0)
    return main()
