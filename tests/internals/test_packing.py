"""Packed rows (a group's shared tokens once, then each sequence's own) give every token the
logits and captures it has when its sequence runs alone, in every family (sliding windows
that bind included) and after a cached prefix."""

from __future__ import annotations

import pytest
import torch

from tiny_models import FAMILY_NAMES, tiny_loaded
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, Engine, batch_from_ids
from whitebox_eval.internals import attention as attn_impl
from whitebox_eval.internals.packing import pack

# an item's choices after one context; a winogrande-like pair (contexts differ at the end,
# one continuation); a lone sequence; a sequence that is a prefix of another
GROUPS = [
    [[5, 9, 17, 33, 2, 41, 7, 12], [5, 9, 17, 33, 2, 41, 8], [5, 9, 17, 33, 2, 41, 30, 11, 6]],
    [[4, 8, 15, 16, 23, 42, 19, 3, 3], [4, 8, 15, 16, 23, 40, 3, 3]],
    [[13, 14, 15]],
    [[21, 22, 23, 24], [21, 22, 23, 24, 25, 26]],
]


def test_the_layout_of_a_packed_row():
    p = pack(GROUPS[:2], pad_id=0)
    b = p.batch
    assert b.lengths.tolist() == [6 + 2 + 1 + 3, 5 + 4 + 3]  # trunk once, then every branch
    assert p.where[0][1] == [0, 1, 2, 3, 4, 5, 8]
    assert p.where[1][1] == [0, 1, 2, 3, 4, 9, 10, 11]
    off = b.seq_len - 12  # row 1 is padded on the left
    assert b.position_ids[1, off:].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 5, 6, 7]
    vis = b.visible[0]
    assert vis[8, :6].all() and not vis[8, 6:8].any() and vis[8, 8]  # branch 2 sees the trunk and itself
    assert not b.visible[1, :off, off:].any() and not b.visible[1, off:, :off].any()  # pads apart
    assert b.visible[1, :off, :off].equal(torch.eye(off, dtype=torch.bool))  # a pad sees only itself


@pytest.mark.parametrize("family, attn", [(f, None) for f in FAMILY_NAMES] + [("llama", "eager"), ("gemma3", "eager")])
def test_packed_rows_equal_each_sequence_alone(family, attn):
    engine = Engine(tiny_loaded(family, attn))  # eager attention takes the mask as an additive float tensor
    p = pack(GROUPS)
    coords = [[x for seq in g for x in seq] for g in p.where]
    width = max(len(c) for c in coords)
    logit_pos = [c + [c[-1]] * (width - len(c)) for c in coords]
    caps = [Capture("resid", logit_pos, layers=[0, 2]), Capture("q", logit_pos)]
    packed = engine.run(p.batch, caps, logits=logit_pos)
    for g, group in enumerate(GROUPS):
        k = 0
        for seq in group:
            pos = [list(range(len(seq)))]
            alone = engine.run(batch_from_ids([seq]), [Capture("resid", pos, layers=[0, 2]), Capture("q", pos)], logits=pos)
            sl = slice(k, k + len(seq))
            torch.testing.assert_close(packed.logits[g, sl], alone.logits[0], atol=2e-5, rtol=2e-5)
            torch.testing.assert_close(packed["resid"][g, :, sl], alone["resid"][0], atol=2e-5, rtol=2e-5)
            torch.testing.assert_close(packed["q"][g, :, sl], alone["q"][0], atol=2e-5, rtol=2e-5)
            k += len(seq)


@pytest.mark.parametrize("family", ["llama", "gemma2", "gemma3", "gpt2"])
def test_packed_rows_after_a_cached_prefix(family):
    """The prefix counts in the positions (sliding windows too): each sequence equals prefix + it alone."""
    engine = Engine(tiny_loaded(family))
    prefix = [3, 1, 4, 1, 5, 9, 2, 6]
    p = pack(GROUPS[:2])
    coords = [[len(prefix) + x for seq in g for x in seq] for g in p.where]
    width = max(len(c) for c in coords)
    logit_pos = [c + [c[-1]] * (width - len(c)) for c in coords]
    packed = engine.run(p.batch, logits=logit_pos, prefix=engine.prefix(prefix))
    for g, group in enumerate(GROUPS[:2]):
        k = 0
        for seq in group:
            full = prefix + seq
            alone = engine.run(batch_from_ids([full]), logits=[list(range(len(prefix), len(full)))])
            torch.testing.assert_close(packed.logits[g, k:k + len(seq)], alone.logits[0], atol=2e-5, rtol=2e-5)
            k += len(seq)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma3", "gpt2"])
def test_a_packed_pass_on_the_cpu_runs_sdpa_by_query_chunks(family, monkeypatch):
    """By chunks of 3 queries, each against the keys up to its last query (gemma3: sliding windows that
    bind), the packed pass gives the whole mask's logits and captures, attention rows and after a cached
    prefix included; an ordinary batch keeps the model's own attention call (its logits bit-identical)."""
    engine = Engine(tiny_loaded(family))
    p = pack(GROUPS)
    prefix = engine.prefix([3, 1, 4, 1, 5, 9, 2, 6])
    caps = [Capture("attn", "last"), Capture("resid", "last")]
    whole = engine.run(p.batch, caps, logits="all"), engine.run(p.batch, logits="all", prefix=prefix)
    plain = batch_from_ids(GROUPS[0])
    calls = []
    chunked = attn_impl.by_query_chunks

    def spy(module, query, key, value, mask, **kwargs):
        calls.append((query.shape[2], key.shape[2]))
        return chunked(module, query, key, value, mask, **kwargs)

    monkeypatch.setattr(attn_impl, "CHUNK", 3)
    monkeypatch.setattr(attn_impl, "by_query_chunks", spy)
    got = engine.run(p.batch, caps, logits="all"), engine.run(p.batch, logits="all", prefix=prefix)
    n_layers = engine.arch.n_layers
    s = p.batch.seq_len
    assert calls == [(s, s)] * n_layers + [(s, s + 8)] * n_layers
    for a, b in zip(whole, got):
        torch.testing.assert_close(b.logits, a.logits, atol=2e-5, rtol=2e-5)  # as each sequence alone (above)
    for key in ("attn", "resid"):
        torch.testing.assert_close(got[0][key], whole[0][key], atol=2e-5, rtol=2e-5)
    before = engine.run(plain).logits
    assert len(calls) == 2 * n_layers  # not for an ordinary batch
    monkeypatch.undo()
    assert torch.equal(before, engine.run(plain).logits)


def test_packing_refuses_empty_sequences_and_generation_caches():
    with pytest.raises(WhiteboxError, match="empty"):
        pack([[[1, 2], []]])
    engine = Engine(tiny_loaded("llama"))
    p = pack(GROUPS[:1])
    cache = engine.new_cache()
    engine.run(batch_from_ids([[1, 2]]), cache=cache)
    with pytest.raises(WhiteboxError, match="packed"):
        engine.run(p.batch, cache=cache)
