"""Which of its two gather paths a pass takes, by device: on an accelerator a small pass keeps
references and gathers once after it (fewer launches); on the CPU every pass gathers each layer's
rows in its hook (no launch to save, and lighter: ``benchmarks/results/engine_ops.md``). An engine's
``keep_bytes`` still overrides the choice (the op-count test runs both paths on the CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.internals import Capture, Engine, batch_from_ids  # noqa: E402
from whitebox_eval.internals.pass_plan import KEEP_BYTES, Plan, keep_bytes_for  # noqa: E402
from tiny_models import tiny_loaded  # noqa: E402


def test_the_limit_by_device():
    assert keep_bytes_for("cpu") == 0 and keep_bytes_for(torch.device("cpu")) == 0
    assert keep_bytes_for("cuda:0") == KEEP_BYTES == keep_bytes_for("mps")


def test_a_cpu_pass_gathers_per_layer_unless_told(monkeypatch):
    seen = []
    decide = Plan.decide

    def spy(plan, keep_bytes, itemsize):
        decide(plan, keep_bytes, itemsize)
        seen.append((keep_bytes, plan.keep))

    monkeypatch.setattr(Plan, "decide", spy)
    engine = Engine(tiny_loaded("llama"))
    batch = batch_from_ids([[5, 9, 17, 33], [2, 41, 7]], pad_id=0)
    caps = [Capture("resid", "last"), Capture("attn", "last")]
    per_layer = engine.run(batch, caps)
    engine.keep_bytes = 1 << 62
    kept = engine.run(batch, caps)
    assert seen == [(0, False), (1 << 62, True)]
    for key in ("resid", "attn"):
        torch.testing.assert_close(per_layer[key], kept[key], atol=1e-6, rtol=1e-6)
