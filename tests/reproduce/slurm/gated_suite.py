"""A test suite for the Slurm launcher, registered as a plug-in registers (its record travels
with the job, this module importable on the "node" through PYTHONPATH): the toy suite's seeded
draws, plus what the tests need to steer a job from outside.

- ``gate``: a path; before the batch holding item ``gate_at``, the study writes ``GATE.waiting``
  (with its attempt, ``SLURM_RESTART_COUNT``) and waits until ``GATE`` exists, so a test can
  preempt it mid-run, at a known place.
- ``calls``: a path each scored item id is appended to (with its attempt), to see which items a
  resumed run scored again.
- ``fail``: raise before any item (a failing child).
- ``source``: another run folder (a producer, ``{run.EXPERIMENT}``) whose results.json it reads.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs import RunFolder, config_dict, open_run
from whitebox_eval.runs.passes import run_pass
from whitebox_eval.runs.record import Mode, Suite


@dataclass
class GatedConfig:
    model: str = "none"
    limit: int = 12
    p: float = 0.8
    seed: int = 0
    batch_size: int = 4
    gate: str = ""
    gate_at: int = 4
    calls: str = ""
    fail: bool = False
    source: str = ""
    volatile: tuple[str, ...] = field(default=("batch_size", "calls"), repr=False)

    def to_dict(self) -> dict:
        return config_dict(self, "gated")


def run_gated(cfg: GatedConfig, output="runs", *, run_id=None, resume=False, loaded=None, show_progress=None) -> RunFolder:
    if cfg.fail:
        raise WhiteboxError("the gated child was told to fail")
    base = 0.0
    if cfg.source:
        base = json.loads((Path(cfg.source) / "results.json").read_text())["headline"]["acc"]
    folder = open_run(output, cfg.to_dict(), run_id=run_id, resume=resume)
    ids = [f"g-{i}" for i in range(cfg.limit)]
    attempt = os.environ.get("SLURM_RESTART_COUNT", "local")

    def score(batch: list[int]):
        if cfg.gate and any(i >= cfg.gate_at for i in batch):
            Path(cfg.gate + ".waiting").write_text(attempt)
            while not Path(cfg.gate).exists():
                time.sleep(0.05)
        out = []
        for i in batch:
            draw = random.Random(cfg.seed * 1000 + i).random()
            out.append({"id": ids[i], "correct": draw < cfg.p, "draw": draw})
            if cfg.calls:
                with open(cfg.calls, "a") as f:
                    f.write(f"{ids[i]} {attempt}\n")
        return out, {}

    run_pass(folder, "main", ids, cfg.batch_size, score, desc="gated", show_progress=False)
    samples = list(folder.read_samples())
    correct = sum(bool(s["correct"]) for s in samples)
    folder.save_array("draws", np.array([s["draw"] for s in samples]))
    lo, hi = stats.wilson(correct, cfg.limit)
    folder.save_results({"headline": {"acc": correct / cfg.limit, "acc_ci": [lo, hi], "acc_n": cfg.limit,
                                       "acc_ci_method": "wilson"}, "source_acc": base})
    return folder


def work(cfg, mode) -> tuple[int, float]:
    return cfg.limit, float(cfg.limit)


SUITE = Suite("gated", "A gated toy suite (Slurm launcher tests).", None,
              {"study": Mode("gated_suite:GatedConfig", "gated_suite:run_gated")}, work, rate=0.01,
              results=("acc", "source_acc"))


def register():
    from whitebox_eval import suites

    return suites.SUITES.get(SUITE.name) or suites.register(SUITE)
