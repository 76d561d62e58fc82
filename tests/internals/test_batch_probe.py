"""``--batch-size auto`` on a GPU: the search finds the largest size that fits, a real pass that
runs out of memory leaves the engine as it was, and the probe runs the envelope pass."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_loaded  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals.batch_probe import largest_fitting, probe_batch_size, probe_pass  # noqa: E402
from whitebox_eval.internals.batching import batch_from_ids  # noqa: E402
from whitebox_eval.internals.engine import Engine  # noqa: E402


@pytest.mark.parametrize("cap", [1, 7, 64, 256])
def test_largest_fitting_is_the_largest_size_that_fits(cap):
    for limit in range(1, 300):
        calls = []

        def fits(n):
            calls.append(n)
            return n <= limit

        assert largest_fitting(fits, cap) == min(limit, cap), (limit, cap)
        assert all(1 <= n <= cap for n in calls)
        assert len(calls) <= 2 * math.ceil(math.log2(cap)) + 1  # doubling, then bisection


def test_nothing_fits_is_an_error_naming_the_fixes():
    with pytest.raises(WhiteboxError, match="bfloat16"):
        largest_fitting(lambda n: False)


def _out_of_memory_above(model, limit):
    """A forward pre-hook raising CUDA's out-of-memory error for batches above ``limit``: where a
    GPU would fail, inside the model, with the engine's hooks in place."""
    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        emb = kwargs.get("inputs_embeds")
        rows = (ids if ids is not None else emb).shape[0]
        if rows > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory (simulated: {rows} rows)")

    return model.model.register_forward_pre_hook(hook, with_kwargs=True)


def test_probe_on_a_real_pass_finds_the_limit_and_leaves_the_engine_clean():
    lm = tiny_loaded("llama")
    engine = Engine(lm)
    ids = [[5, 6, 7, 8, 9], [3, 4, 5, 6, 7]]
    before = engine.run(batch_from_ids(ids)).logits.clone()
    sizes = []

    def run(eng, n, tokens):
        sizes.append((n, tokens))
        probe_pass(eng, n, tokens)

    handle = _out_of_memory_above(lm.model, 5)
    try:
        assert probe_batch_size(lm, run=run) == 5
    finally:
        handle.remove()
    # tokens: the probe's 1024, capped at the tiny model's context (128)
    assert {t for _, t in sizes} == {lm.model.config.max_position_embeddings}
    assert [n for n, _ in sizes] == [1, 2, 4, 8, 6, 5]
    # the failed passes left no hook or edit behind: the same logits, bit for bit
    assert torch.equal(engine.run(batch_from_ids(ids)).logits, before)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in lm.model.modules())


def test_the_probe_pass_holds_the_envelope_it_names():
    lm = tiny_loaded("llama")
    seen = {}
    engine = Engine(lm)
    run = engine.run

    def spy(batch, captures=(), edits=(), **kw):
        trace = run(batch, captures, edits, **kw)
        seen.update(rows=batch.size, cols=batch.seq_len, points={c.point: c.positions for c in captures},
                    logits=tuple(trace.logits.shape))
        return trace

    engine.run = spy
    probe_pass(engine, 3, 16)
    assert seen["points"] == {"attn": "last", "resid": "all", "mlp_act": "all"}
    assert seen["logits"] == (3, 16, lm.model.config.vocab_size)  # logits at every position


@pytest.mark.parametrize("error, fits_below", [
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
    (RuntimeError("CUDA error: out of memory"), True),
    (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"), True),
    (RuntimeError("shape mismatch"), False),
    (ValueError("CUDA out of memory"), False),
])
def test_only_out_of_memory_means_too_large(error, fits_below):
    lm = tiny_loaded("llama")

    def run(engine, n, tokens):
        if n > 2:
            raise error

    if fits_below:
        assert probe_batch_size(lm, run=run, cap=8) == 2
    else:
        with pytest.raises(type(error)):
            probe_batch_size(lm, run=run, cap=8)
