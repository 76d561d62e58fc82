"""``--batch-size auto`` off a GPU: a batch size from the memory free on the model's device and
the model's size, read from its config.json before any weights load. (On a GPU the size is
probed instead: :mod:`whitebox_eval.internals.batch_probe`.)

The rule: the weights take ``parameters x bytes per weight``; one example takes, per token
and layer, the float32 activations a white-box pass may hold at once (the residual, q/k/v
and the MLP's hidden units: ``4 x (4 d + 2 d_ff)`` bytes), the float32 attention rows of one
layer (``4 x heads x tokens``), and the float32 logits of one position (``4 x vocab``).
Half of what is left after the weights is given to the batch, and the size is the largest
power of two that fits, between 1 and :data:`AUTO_MAX`. Results never depend on the batch
size (every suite scores an item the same in any batch); the size chosen is recorded in
config.yaml as ``batch_size`` and printed.
"""

from __future__ import annotations

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.config_sizes import ConfigSizes, config_sizes

AUTO_MAX = 64
#: tokens per example the rule budgets for (a 5-shot MMLU prompt is ~600)
AUTO_TOKENS = 1024
_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def free_memory(device: torch.device) -> int:
    """Bytes free on ``device``: CUDA's own count, or the host's MemAvailable."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def rule_batch_size(sizes: ConfigSizes, dtype: str, free: int, tokens: int = AUTO_TOKENS) -> int:
    """The module docstring's rule for a model's sizes (:mod:`.config_sizes`) and ``free`` bytes."""
    z = sizes
    if not (z.d_model and z.n_layers and z.vocab):
        raise WhiteboxError("--batch-size auto: the model's config.json gives no hidden size, layer count or "
                            "vocabulary size; give --batch-size N")
    d, layers, d_ff = z.d_model, z.n_layers, z.d_ff
    params = z.vocab * d * (1 if z.tied else 2) + layers * (4 * d * d + 3 * d * d_ff)
    weights = params * _BYTES.get(dtype, 4)
    per_example = tokens * (layers * 4 * (4 * d + 2 * d_ff) + 4 * max(z.n_heads, 1) * tokens // layers) + 4 * z.vocab
    budget = (free - weights) // 2
    size = 1
    while size * 2 <= AUTO_MAX and size * 2 * per_example <= budget:
        size *= 2
    return size


def auto_batch_size(spec: str, dtype: str = "float32", device=None) -> int:
    """``--batch-size auto`` for the model ``spec`` on ``device`` (the placement's default)."""
    from whitebox_eval.models.placement import PLACEMENT, resolve_device

    where = resolve_device(device if device is not None else PLACEMENT.device)
    return rule_batch_size(config_sizes(spec), dtype, free_memory(where))
