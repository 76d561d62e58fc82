"""The toy suite's study: no model inside, each item "correct" by a seeded
draw; a run folder like any suite's (config.yaml, samples.jsonl through the one pass,
results.json with an estimate and its interval)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from whitebox_eval import stats
from whitebox_eval.runs import RunFolder, config_dict, open_run
from whitebox_eval.runs.passes import run_pass


@dataclass
class ToyConfig:
    model: str = "none"
    limit: int = 20
    p: float = 0.8
    seed: int = 0
    batch_size: int = 4
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def to_dict(self) -> dict:
        return config_dict(self, "toy")


def run_toy(cfg: ToyConfig, output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
            loaded=None, show_progress: bool | None = None) -> RunFolder:
    folder = open_run(output, cfg.to_dict(), run_id=run_id, resume=resume)
    ids = [f"toy-{i}" for i in range(cfg.limit)]

    def score(batch: list[int]):
        out = []
        for i in batch:
            draw = random.Random(cfg.seed * 1000 + i).random()
            out.append({"id": ids[i], "correct": draw < cfg.p, "draw": draw})
        return out, {}

    run_pass(folder, "main", ids, cfg.batch_size, score, desc="toy", show_progress=False)
    correct = sum(bool(s["correct"]) for s in folder.read_samples())
    lo, hi = stats.wilson(correct, cfg.limit)
    folder.save_results({"headline": {"acc": correct / cfg.limit, "acc_ci": [lo, hi], "acc_n": cfg.limit,
                                       "acc_ci_method": "wilson"}})
    return folder
