"""``--batch-size auto`` on a GPU: the largest batch whose white-box pass fits, found once
by running it.

The probe pass is the envelope of the suites' forward passes at :data:`PROBE_TOKENS`
tokens per example (capped at the model's context): logits at every position, every
head's attention row at the last position, and the residual and the MLP's hidden units
at every position of every layer. Each suite's own passes keep a subset of these, so a
batch that passes the probe leaves them room (prompts longer than the probe's are the
exception; the size is printed and recorded, and ``--batch-size N`` overrides it).

The search doubles from 1 until a pass runs out of memory or :data:`PROBE_MAX` is reached,
then bisects between the last size that fitted and the first that did not: the answer is
the largest size that fitted, not only the largest power of two. An out-of-memory error
(:func:`ran_out_of_memory`) is caught, the allocator's cache emptied, and the search goes on;
any other error is raised. Results never depend on the size (every suite scores an item the
same in any batch).
"""

from __future__ import annotations

import gc
from typing import Callable

import torch

from whitebox_eval.errors import WhiteboxError

#: the largest size the probe tries (a GPU gains little past it: padding grows with the batch)
PROBE_MAX = 256
#: tokens per example of the probe's pass (a 5-shot MMLU prompt is ~600)
PROBE_TOKENS = 1024
#: what a RuntimeError says when memory ran out without torch's own OutOfMemoryError (cuBLAS'
#: workspace, cuDNN's fallback, the host allocator): accelerate's find_executable_batch_size reads
#: the same messages
OUT_OF_MEMORY = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_NOT_SUPPORTED",
                 "can't allocate memory")


def ran_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` means the pass did not fit (any other error is a bug, raised as it is)."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and any(m in str(error) for m in OUT_OF_MEMORY)


def largest_fitting(fits: Callable[[int], bool], cap: int = PROBE_MAX) -> int:
    """The largest ``n`` in [1, cap] with ``fits(n)``, assuming fitting is monotone (what fits
    at ``n`` fits below it): doubling, then bisection. Calls ``fits`` O(log cap) times."""
    if not fits(1):
        raise WhiteboxError("--batch-size auto: not even one example's white-box pass fits in the GPU's memory; "
                            "use a smaller --dtype (bfloat16), --device-map auto, or a smaller model")
    good, bad = 1, None
    while good < cap:
        n = min(good * 2, cap)
        if fits(n):
            good = n
        else:
            bad = n
            break
    if bad is None:
        return good
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    return good


def probe_pass(engine, batch_size: int, tokens: int) -> None:
    """One probe pass (the module docstring's envelope) on random token ids; raises out-of-memory
    errors as they come."""
    from whitebox_eval.internals.requests import Capture
    from whitebox_eval.internals.batching import batch_from_ids

    g = torch.Generator().manual_seed(0)
    vocab = int(engine.loaded.model.config.vocab_size)
    ids = torch.randint(0, vocab, (batch_size, tokens), generator=g).tolist()
    batch = batch_from_ids(ids, pad_id=engine.loaded.pad_id).to(engine.loaded.device)
    caps = [Capture("attn", "last"), Capture("resid", "all"), Capture("mlp_act", "all")]
    with torch.no_grad():
        trace = engine.run(batch, caps, logits="all")
        trace.logits.float().log_softmax(-1)  # the float32 log-probabilities loglikelihood scoring takes


def probe_batch_size(loaded, tokens: int = PROBE_TOKENS, cap: int = PROBE_MAX, run=None) -> int:
    """The largest batch (up to ``cap``) whose probe pass of ``tokens`` tokens (at most the model's
    context) runs without running out of memory on ``loaded``'s device. ``run(engine, n, tokens)``
    replaces :func:`probe_pass` (tests)."""
    from whitebox_eval.internals.engine import Engine

    run = run or probe_pass
    engine = Engine(loaded)
    context = getattr(loaded.model.config, "max_position_embeddings", None)
    tokens = min(tokens, context) if context else tokens
    device = loaded.device

    def fits(n: int) -> bool:
        try:
            run(engine, n, tokens)
            return True
        except RuntimeError as error:  # torch.OutOfMemoryError is one
            if not ran_out_of_memory(error):
                raise
            return False
        finally:
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()

    return largest_fitting(fits, cap)
