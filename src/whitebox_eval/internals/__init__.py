"""The engine: capture and intervene on a running model (knows nothing of tasks)."""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.internals.attribution": ["Attribution", "integrated_gradients", "kl_divergence_metric", "logit_difference_metric"],
    "whitebox_eval.internals.batching": ["Batch", "batch_from_ids", "make_batch", "to_device"],
    "whitebox_eval.internals.engine": ["Engine", "Prefix"],
    "whitebox_eval.internals.lenses": ["attention_rollout", "logit_lens"],
    "whitebox_eval.internals.requests": ["ATTENTION_MODES", "CAPTURE_POINTS", "PATCH_POINTS", "AddVector", "Capture", "ClampFeature", "EditAttention", "MaskNeurons", "Patch", "Replace", "ScaleHeads", "Trace", "cells_from_pairs"],
})
