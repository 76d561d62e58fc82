"""Edited generation on the bundled models: the key/value cache gives the uncached tokens.

Tokens are compared exactly: the two paths differ by float32 rounding (~1e-6 of the
logits' size, 4e-6 measured here), and an argmax flips only at a near-exact tie, which
these fixed prompts do not have: the smallest top-2 logit gap over every step, edit, path
and model is 1.2e-3 (Gemma, scale_heads; logits up to ~25), 30x any CPU's rounding (a flip
would show as a difference here and be worth a look, not a retry).
"""

from __future__ import annotations

import pytest
import torch

from whitebox_eval.internals import EditAttention, Engine, MaskNeurons, ScaleHeads
from whitebox_eval.internals.generation import generate
from whitebox_eval.models import BUNDLED, load_model

pytestmark = pytest.mark.integration

TEXTS = ["Question: What is 17 + 25? Answer:", "The capital of France is",
         "Write the word 'banana' backwards, letter by letter:"]
N_NEW = 12


@pytest.fixture(scope="module", params=sorted(BUNDLED))
def engine(request):
    return Engine(load_model(request.param))


def _prompts(engine):
    return [engine.tokenizer(t)["input_ids"] for t in TEXTS]


def _edits(engine, kind, prompts):
    arch = engine.arch
    g = torch.Generator().manual_seed(0)
    if kind == "mask_neurons":  # MUI masking: 16 random neurons in every layer, every position
        return [MaskNeurons(l, torch.randperm(arch.d_ff, generator=g)[:16].tolist()) for l in range(arch.n_layers)]
    if kind == "scale_heads":
        return [ScaleHeads(l, [0], 0.0) for l in range(0, arch.n_layers, 3)]
    starts = [len(p) for p in prompts]

    def newest_rows(lengths):  # AttentionSpan-like: each new query row gets +0.5 on its first token
        s = max(lengths)
        cells = torch.zeros(len(lengths), s, s, dtype=torch.bool)
        for i, n in enumerate(lengths):
            cells[i, starts[i] - 1:n, 0] = True
        return [EditAttention(l, [0, 1], cells, mode="add", value=0.5) for l in (2, arch.n_layers // 2)]

    return newest_rows


@pytest.mark.parametrize("kind", ["mask_neurons", "scale_heads", "attention_newest_row"])
def test_cached_edited_generation_equals_uncached(engine, kind):
    prompts = _prompts(engine)
    edits = _edits(engine, kind, prompts)
    cached = generate(engine, prompts, max_new_tokens=N_NEW, edits=edits, stop_ids=[])
    full = generate(engine, prompts, max_new_tokens=N_NEW, edits=edits, stop_ids=[], use_cache=False)
    assert [g.ids for g in cached] == [g.ids for g in full]
    plain = generate(engine, prompts, max_new_tokens=N_NEW, stop_ids=[])
    assert [g.ids for g in cached] != [g.ids for g in plain]  # the edits act (a test of edits, not of decoding)


def test_unedited_generation_equals_hugging_face_generate(engine):
    prompts = _prompts(engine)
    batch = engine.batch(TEXTS)
    with torch.no_grad():
        hf = engine.model.generate(input_ids=batch.input_ids, attention_mask=batch.attention_mask, do_sample=False,
                                   max_new_tokens=N_NEW, pad_token_id=engine.tokenizer.pad_token_id or 0,
                                   eos_token_id=None, temperature=None, top_p=None, top_k=None)
    assert [g.ids for g in generate(engine, prompts, max_new_tokens=N_NEW, stop_ids=[])] == hf[:, batch.seq_len:].tolist()
