"""Edited generation with the key/value cache gives the tokens of re-running the whole sequence.

Tokens are compared exactly: the cached and uncached passes differ only by float rounding
(~1e-7 on these float32 models), far below the gap between the two best logits of a
random tiny model, so an argmax (or a seeded draw) cannot flip unless the cache is wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tiny_models import FAMILY_NAMES, tiny_loaded
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, EditAttention, Engine, MaskNeurons, Patch, ScaleHeads, batch_from_ids
from whitebox_eval.internals.generation import generate

PROMPTS = [[5, 9, 17, 33, 41, 7, 12, 3, 8], [8, 21, 30], [11, 6, 4, 5, 20, 22]]
STARTS = [len(p) for p in PROMPTS]
N_NEW = 10


def _newest_rows(mode: str, **kw):
    """Per-step attention edit of each new query row only (cells on key 0 and the row's middle key)."""
    def edits(lengths):
        s = max(lengths)
        cells = torch.zeros(len(lengths), s, s, dtype=torch.bool)
        pattern = torch.zeros(len(lengths), s, s)
        for i, n in enumerate(lengths):
            for r in range(STARTS[i] - 1, n):
                cells[i, r, 0] = cells[i, r, r // 2] = True
                pattern[i, r, 0], pattern[i, r, r // 2] = 0.25, 0.75
        extra = {"pattern": pattern} if mode == "force_pattern" else {}
        return [EditAttention(1, [0, 3], cells, mode="force" if mode == "force_pattern" else mode, **kw, **extra)]
    return edits


def _prompt_rows_static():
    cells = torch.zeros(3, 9, 9, dtype=torch.bool)  # smaller than the sequences it ends up in
    for i, p in enumerate(STARTS):
        cells[i, 1:p, 0] = True
    return [EditAttention(0, [1, 2], cells, mode="force")]


def _patch(family):
    width = tiny_loaded(family).arch.d_model
    return [Patch("resid", 0, [[1, 2]] * 3, torch.randn(3, 2, width, generator=torch.Generator().manual_seed(0)))]


KINDS = {
    "scale_heads": lambda f: [ScaleHeads(1, [0, 2], 0.0), ScaleHeads(2, [1], 3.0, positions=[[0, 1]] * 3)],
    "mask_neurons": lambda f: [MaskNeurons(0, [1, 3, 5, 7, 11]), MaskNeurons(2, [0, 2], value=4.0)],
    "patch": _patch,
    "attn_add": lambda f: _newest_rows("add", value=0.8),
    "attn_add_above": lambda f: _newest_rows("add_above", value=0.8, threshold=0.1),
    "attn_force": lambda f: _newest_rows("force"),
    "attn_force_pattern": lambda f: _newest_rows("force_pattern"),
    "attn_copy_head": lambda f: _newest_rows("copy_head", source_head=1),
    "attn_renormalize": lambda f: _newest_rows("add", value=2.0, renormalize=True),
    "attn_static_prompt": lambda f: _prompt_rows_static(),
}


def _ids(gens):
    return [g.ids for g in gens]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_cached_generation_gives_the_uncached_tokens(family, kind):
    engine = Engine(tiny_loaded(family))
    edits = KINDS[kind](family)
    cached = generate(engine, PROMPTS, max_new_tokens=N_NEW, edits=edits, stop_ids=[])
    full = generate(engine, PROMPTS, max_new_tokens=N_NEW, edits=edits, stop_ids=[], use_cache=False)
    assert _ids(cached) == _ids(full)
    assert all(len(g.ids) == N_NEW and g.truncated for g in cached)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_edit_kind_changes_the_generated_tokens(kind):
    """So that the equality above is a test of the edits, not of unedited generation."""
    engine = Engine(tiny_loaded("llama"))
    plain = generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[])
    assert _ids(generate(engine, PROMPTS, max_new_tokens=N_NEW, edits=KINDS[kind]("llama"), stop_ids=[])) != _ids(plain)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_unedited_generation_equals_hugging_face_generate(family):
    lm = tiny_loaded(family)
    batch = batch_from_ids(PROMPTS)
    with torch.no_grad():
        hf = lm.model.generate(input_ids=batch.input_ids, attention_mask=batch.attention_mask, max_new_tokens=N_NEW,
                               do_sample=False, pad_token_id=0, eos_token_id=None)
    assert _ids(generate(Engine(lm), PROMPTS, max_new_tokens=N_NEW, stop_ids=[])) == hf[:, batch.seq_len:].tolist()


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_sampling_is_the_same_with_and_without_the_cache(family):
    engine = Engine(tiny_loaded(family))
    edits = [MaskNeurons(1, [2, 4, 6])]
    runs = [generate(engine, PROMPTS, max_new_tokens=N_NEW, edits=edits, stop_ids=[], do_sample=True, temperature=1.5,
                     top_k=20, top_p=0.9, generator=torch.Generator().manual_seed(3), use_cache=c) for c in (True, False)]
    assert _ids(runs[0]) == _ids(runs[1])
    greedy = generate(engine, PROMPTS, max_new_tokens=N_NEW, edits=edits, stop_ids=[])
    assert _ids(runs[0]) != _ids(greedy)  # at T=1.5 over 30 draws some token differs from the argmax


def test_top_k_one_and_tiny_top_p_are_greedy():
    engine = Engine(tiny_loaded("qwen2"))
    greedy = _ids(generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[]))
    g = torch.Generator().manual_seed(0)
    assert _ids(generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[], do_sample=True, top_k=1, generator=g)) == greedy
    assert _ids(generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[], do_sample=True, top_p=1e-6, generator=g)) == greedy


def test_per_prompt_seeds_make_a_sample_independent_of_the_batch():
    engine = Engine(tiny_loaded("llama"))

    def gens(prompts, seeds):
        return generate(engine, prompts, max_new_tokens=N_NEW, stop_ids=[3], do_sample=True, seeds=seeds, n_samples=2)

    together = gens(PROMPTS, [10, 11, 12])
    alone = [g for p, s in zip(PROMPTS, [10, 11, 12]) for g in gens([p], [s])]
    assert _ids(together) == _ids(alone)
    assert _ids(gens(PROMPTS, [10, 11, 13]))[:4] == _ids(together)[:4] != _ids(gens(PROMPTS, [13, 11, 12]))[:4]


def _seeded_by_hand(lm, prompt, seed, n, temperature, max_new_tokens, stop_ids):
    """Reference: each of the n samples decoded alone, re-running the plain model on its whole
    sequence per token; sample s takes the float64 inverse CDF at U[t, s] of its prompt's table."""
    u = np.random.default_rng(seed).random((max_new_tokens, n))
    out = []
    for s in range(n):
        ids, new = list(prompt), []
        for t in range(max_new_tokens):
            with torch.no_grad():
                logits = lm.model(input_ids=torch.tensor([ids])).logits[0, -1]
            cdf = np.cumsum(torch.softmax(logits.double() / temperature, -1).numpy())
            nxt = int(min(np.searchsorted(cdf, u[t, s] * cdf[-1], side="right"), len(cdf) - 1))
            new.append(nxt)
            ids.append(nxt)
            if nxt in stop_ids:
                break
        out.append(new)
    return out


@pytest.mark.parametrize("family", ["llama", "gemma3", "gpt2"])
def test_n_samples_from_one_prefill_equal_n_separate_seeded_runs(family):
    lm = tiny_loaded(family)
    engine = Engine(lm)
    n, seeds = 4, [21, 22]
    prompts = PROMPTS[:2]
    kw = dict(max_new_tokens=N_NEW, do_sample=True, temperature=1.3, seeds=seeds, n_samples=n)
    free = [set(x) for x in _ids(generate(engine, prompts, **kw, stop_ids=[]))]
    stop = max(set().union(*free), key=lambda t: (0 < sum(t in x for x in free) < len(free), t))  # some rows stop
    kw["stop_ids"] = [stop]
    prefilled = generate(engine, prompts, **kw)
    assert len(prefilled) == len(prompts) * n
    # the uncached reference computes every row (prompt repeated n times) from scratch at every step
    assert _ids(prefilled) == _ids(generate(engine, prompts, **kw, use_cache=False))
    by_hand = [g for p, s in zip(prompts, seeds) for g in _seeded_by_hand(lm, p, s, n, 1.3, N_NEW, {stop})]
    assert _ids(prefilled) == by_hand
    assert len({tuple(x) for x in by_hand}) > 2  # the samples differ: each row reads its own column of U
    assert any(g.stop == stop for g in prefilled) and any(g.truncated for g in prefilled)


def test_shared_generator_draws_what_hugging_face_generate_samples():
    lm = tiny_loaded("llama")
    batch = batch_from_ids(PROMPTS)
    torch.manual_seed(7)
    with torch.no_grad():
        hf = lm.model.generate(input_ids=batch.input_ids, attention_mask=batch.attention_mask, max_new_tokens=N_NEW,
                               do_sample=True, temperature=1.0, top_k=None, top_p=None, pad_token_id=0, eos_token_id=None)
    ours = generate(Engine(lm), PROMPTS, max_new_tokens=N_NEW, stop_ids=[], do_sample=True,
                    generator=torch.Generator().manual_seed(7))
    assert _ids(ours) == hf[:, batch.seq_len:].tolist()


class _EosTok:
    """A tokenizer with an EOS (2) and no pad token."""

    pad_token_id = None
    eos_token_id = 2


def test_stop_ids_are_the_tokenizer_eos_and_the_generation_config_eos_ids():
    lm = tiny_loaded("llama")
    lm.tokenizer = _EosTok()
    plain = _ids(generate(Engine(lm), PROMPTS, max_new_tokens=N_NEW, stop_ids=[]))
    extra = plain[1][2]  # e.g. an instruct model's end-of-turn token, listed by its generation config only
    lm.model.generation_config.eos_token_id = [2, extra]
    assert lm.stop_ids == tuple(sorted({2, extra}))
    assert lm.end_id == min(2, extra)  # a trained answer ends with the first stop id
    assert lm.pad_id == 2  # no pad token: the EOS pads
    lm.model.generation_config.eos_token_id = extra
    assert lm.stop_ids == tuple(sorted({2, extra}))
    gens = generate(Engine(lm), PROMPTS, max_new_tokens=N_NEW)  # the default is the model's rule
    for g, full in zip(gens, plain):
        cut = next((i + 1 for i, t in enumerate(full) if t in (2, extra)), len(full))
        assert g.ids == full[:cut]
    assert gens[1].stop in (2, extra) and gens[1].content_ids == gens[1].ids[:-1]
    lm.model.generation_config.eos_token_id = None
    lm.tokenizer = type("NoSpecial", (), {"pad_token_id": None, "eos_token_id": None})()
    assert lm.stop_ids == () and lm.pad_id == 0 and lm.end_id is None


def test_greedy_generation_with_stop_ids_equals_hugging_face_generate():
    """Left-padded batch, rows stopping at different steps (HF pads them, we stop them)."""
    lm = tiny_loaded("qwen2")
    batch = batch_from_ids(PROMPTS)
    plain = _ids(generate(Engine(lm), PROMPTS, max_new_tokens=N_NEW, stop_ids=[]))
    stop = plain[0][3]
    lm.model.generation_config.eos_token_id = stop
    with torch.no_grad():
        hf = lm.model.generate(input_ids=batch.input_ids, attention_mask=batch.attention_mask, max_new_tokens=N_NEW,
                               do_sample=False, pad_token_id=0)[:, batch.seq_len:].tolist()
    gens = generate(Engine(lm), PROMPTS, max_new_tokens=N_NEW)
    assert any(g.stop == stop for g in gens)
    for g, h in zip(gens, hf):
        assert g.ids == h[:len(g.ids)] and (g.truncated or all(t == 0 for t in h[len(g.ids):]))


class _CharTok:
    """Token t decodes to one letter; enough for stop strings."""

    pad_token_id = 0
    eos_token_id = 2

    def decode(self, ids):
        return "".join(chr(ord("a") + int(t) % 26) for t in ids)


def test_stop_ids_and_stop_strings_end_each_row_and_finished_rows_get_pads():
    lm = tiny_loaded("llama")
    engine = Engine(lm)
    plain = _ids(generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[]))
    stop_tok = plain[0][3]
    gens = generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[stop_tok])
    for g, full in zip(gens, plain):
        if stop_tok in full:
            cut = full.index(stop_tok) + 1
            assert g.ids == full[:cut] and g.stop == stop_tok and not g.truncated
        else:
            assert g.ids == full and g.truncated
    # rows that stopped are fed pads: the others continue exactly as in their own batch
    assert _ids(generate(engine, PROMPTS[1:], max_new_tokens=N_NEW, stop_ids=[stop_tok])) == _ids(gens[1:])
    lm.tokenizer = _CharTok()
    engine = Engine(lm)
    text = _CharTok().decode(plain[1])
    stop = text[4:6]
    [g] = generate(engine, [PROMPTS[1]], max_new_tokens=N_NEW, stop_ids=[], stop_strings=[stop])
    assert g.stop == stop and _CharTok().decode(g.ids) == text[: text.index(stop) + 2]


def _cells_to_newest_key(lengths):
    s = max(lengths)
    cells = torch.zeros(len(lengths), s, s, dtype=torch.bool)
    for i, n in enumerate(lengths):
        cells[i, :n, n - 1] = True  # earlier rows gain a key after they were computed
    return [EditAttention(1, [0], cells, mode="add", value=1.0)]


def _row_changes(lengths):
    s = max(lengths)
    cells = torch.zeros(len(lengths), s, s, dtype=torch.bool)
    cells[:, : s - 1, s % 3] = True  # the key of every earlier row moves with the length
    return [EditAttention(1, [0], cells, mode="add", value=1.0)]


@pytest.mark.parametrize("edits, match", [
    ([ScaleHeads(1, [0], 0.0, positions="last")], "counted from the end"),
    ([MaskNeurons(1, [0], positions=[[-1]] * 3)], "counted from the end"),
    (_cells_to_newest_key, "changes query rows already generated"),
    (_row_changes, "changes query rows already generated"),
    (lambda lengths: [ScaleHeads(1, [0], float(max(lengths)))], "edits changed between generation steps"),
])
def test_edits_the_cache_cannot_reproduce_are_refused(edits, match):
    engine = Engine(tiny_loaded("llama"))
    with pytest.raises(WhiteboxError, match=match):
        generate(engine, PROMPTS, max_new_tokens=N_NEW, edits=edits, stop_ids=[])
    generate(engine, PROMPTS, max_new_tokens=3, edits=edits, stop_ids=[], use_cache=False)  # the way to run them


def test_generation_arguments_are_checked():
    engine = Engine(tiny_loaded("llama"))
    for kwargs, match in [({"max_new_tokens": 0}, "max_new_tokens"), ({"do_sample": True, "temperature": 0.0}, "temperature"),
                          ({"do_sample": True, "top_p": 0.0}, "top_p"), ({"do_sample": True, "seeds": [1]}, "one seed per prompt"),
                          ({"do_sample": True, "generator": [torch.Generator()]}, "for one stream per prompt give seeds"),
                          ({"seeds": [1, 2, 3]}, "need do_sample"), ({"n_samples": 0}, "n_samples")]:
        with pytest.raises(WhiteboxError, match=match):
            generate(engine, PROMPTS, **{"max_new_tokens": 2, **kwargs})
    with pytest.raises(WhiteboxError, match="empty prompt"):
        generate(engine, [[]], max_new_tokens=2)


@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2"])
def test_a_cached_pass_reads_the_new_rows_like_a_full_pass(family):
    """Engine.run(cache=...): logits and captures of the computed rows match the uncached pass
    (float32, different matmul shapes: differences ~1e-7, checked at 1e-5)."""
    engine = Engine(tiny_loaded(family))
    full = batch_from_ids([p + [7, 9] for p in PROMPTS])
    first = batch_from_ids([p + [7] for p in PROMPTS])
    caps = [Capture("attn", "last"), Capture("head_out", "last"), Capture("k_rot", [[s + 1] for s in STARTS])]
    edits = [ScaleHeads(1, [1], 0.0), MaskNeurons(0, [3])]
    cache = engine.new_cache()
    engine.run(first, edits=edits, cache=cache)
    step = engine.run(full, caps, edits, cache=cache)
    ref = engine.run(full, caps, edits)
    torch.testing.assert_close(step.logits, ref.logits, atol=1e-5, rtol=1e-5)
    for key in ref.captures:
        torch.testing.assert_close(step[key], ref[key], atol=1e-5, rtol=1e-5, msg=key)
    with pytest.raises(WhiteboxError, match="already in the key/value cache"):
        engine.run(full.append(torch.tensor([1, 1, 1])), [Capture("q", [[0]] * 3)], cache=cache)


def test_attention_cells_smaller_than_the_batch_are_zero_filled():
    """Regression: cells covering only the first tokens raised a shape error in an uncached pass."""
    engine = Engine(tiny_loaded("llama"))
    batch = batch_from_ids(PROMPTS)
    small = torch.zeros(3, 4, 4, dtype=torch.bool)
    small[:, 3, 0] = True
    big = torch.zeros(3, 9, 9, dtype=torch.bool)
    big[:, 3, 0] = True
    got = engine.run(batch, edits=[EditAttention(1, [0], small, mode="force")], logits="all").logits
    want = engine.run(batch, edits=[EditAttention(1, [0], big, mode="force")], logits="all").logits
    torch.testing.assert_close(got, want, atol=0, rtol=0)  # the same computation: bit-equal


def test_captures_at_generated_tokens_equal_a_full_pass_over_the_text_so_far():
    """``generate(..., captures=...)``: one vector per generated token, the row that produced it,
    the same with and without the cache and as a plain pass over the prompt and tokens so far."""
    engine = Engine(tiny_loaded("llama"))
    asked = [Capture("resid", layers=[0, 2]), Capture("mlp_act", layers=[1], name="act")]
    cached = generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[], captures=asked)
    full = generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[], captures=asked, use_cache=False)
    plain = generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[])
    assert _ids(cached) == _ids(plain) and not plain[0].captures
    for g, f, prompt in zip(cached, full, PROMPTS):
        assert g.captures["resid"].shape == (2, N_NEW, engine.arch.d_model)
        assert g.captures["act"].shape == (1, N_NEW, engine.arch.d_ff)
        torch.testing.assert_close(g.captures["resid"], f.captures["resid"], atol=1e-4, rtol=1e-4)
        for t in range(N_NEW):
            with torch.no_grad():
                tr = engine.run(batch_from_ids([list(prompt) + g.ids[:t]]), [Capture("resid", "last", [0, 2])])
            torch.testing.assert_close(g.captures["resid"][:, t], tr["resid"][0, :, 0], atol=1e-4, rtol=1e-4)


def test_captures_of_stopped_rows_end_with_their_stop_token():
    engine = Engine(tiny_loaded("llama"))
    plain = generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[])
    stop = plain[0].ids[1]
    gens = generate(engine, PROMPTS, max_new_tokens=N_NEW, stop_ids=[stop], captures=[Capture("resid", layers=[1])])
    assert [g.captures["resid"].shape[1] for g in gens] == [len(g.ids) for g in gens]
    assert len(gens[0].ids) <= 2
