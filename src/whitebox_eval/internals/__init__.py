"""The engine: capture and intervene on a running model (knows nothing of tasks)."""

from whitebox_eval.internals.attribution import Attribution, integrated_gradients, kl_divergence_metric, logit_difference_metric
from whitebox_eval.internals.batching import Batch, batch_from_ids, make_batch
from whitebox_eval.internals.engine import Engine, Prefix
from whitebox_eval.internals.lenses import attention_rollout, logit_lens
from whitebox_eval.internals.requests import (
    CAPTURE_POINTS,
    PATCH_POINTS,
    Capture,
    EditAttention,
    MaskNeurons,
    Patch,
    ScaleHeads,
    Trace,
    cells_from_pairs,
)

__all__ = [
    "Attribution", "integrated_gradients", "kl_divergence_metric", "logit_difference_metric",
    "Batch", "batch_from_ids", "make_batch", "Engine", "Prefix", "attention_rollout", "logit_lens",
    "CAPTURE_POINTS", "PATCH_POINTS", "Capture", "EditAttention", "MaskNeurons", "Patch", "ScaleHeads", "Trace",
    "cells_from_pairs",
]
