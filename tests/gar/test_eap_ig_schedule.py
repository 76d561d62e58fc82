"""EAP-IG step schedule: no step may sit on the clean input, where the KL metric of 002
sec. 4 has zero gradient."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))

from tiny_models import tiny_loaded  # noqa: E402
from whitebox_eval.internals import Engine, batch_from_ids, integrated_gradients, kl_divergence_metric  # noqa: E402

CLEAN, CORRUPT = [[5, 9, 17, 33, 2, 41]], [[5, 9, 17, 30, 2, 41]]


def _attr(engine, steps):
    batch = batch_from_ids(CLEAN)
    metric = kl_divergence_metric(engine.run(batch).logits)
    return integrated_gradients(engine, batch, metric, points=("head_out",), steps=steps,
                                baseline=batch_from_ids(CORRUPT)).scores["head_out"]


def test_every_step_counts_with_the_kl_metric():
    """Regression: with alpha = k/steps, steps=1 evaluated only the clean input and gave
    all-zero attributions (1e-7 here); midpoints give a real estimate."""
    engine = Engine(tiny_loaded("llama"))
    one, two, many = _attr(engine, 1), _attr(engine, 2), _attr(engine, 32)
    assert one.abs().max() > 1e-2
    # the midpoint rule converges fast: 2 steps are already close to 32 (an independent fine grid)
    assert float(two.sum()) == pytest.approx(float(many.sum()), rel=0.05)
    torch.testing.assert_close(two, many, atol=0.02, rtol=0.2)
