"""``--edit attn:HEADS:QUERIES>KEYS:MODE``: the cells a rule names, counted by hand; the engine under
a rule equals it under the same cells written out; generation under a rule keeps the cache; every
malformed spec is one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_loaded  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Engine, batch_from_ids  # noqa: E402
from whitebox_eval.internals.edit_specs import build_edits, parse_edit  # noqa: E402
from whitebox_eval.internals.requests import CellRule, EditAttention, cells_from_pairs  # noqa: E402


def _pairs(rule, lengths):
    cells = rule.cells(lengths)
    return [sorted((int(q), int(k)) for q, k in cells[b].nonzero().tolist()) for b in range(len(lengths))]


def test_rules_name_the_cells_counted_by_hand():
    assert _pairs(CellRule("last", "first"), [4, 2]) == [[(3, 0)], [(1, 0)]]
    assert _pairs(CellRule("all", "prev"), [3, 1]) == [[(1, 0), (2, 1)], []]
    assert _pairs(CellRule("all", "self"), [2]) == [[(0, 0), (1, 1)]]
    assert _pairs(CellRule("last", "all"), [3, 2]) == [[(2, 0), (2, 1), (2, 2)], [(1, 0), (1, 1)]]
    assert _pairs(CellRule("last", -2), [4, 1]) == [[(3, 2)], []]  # one token has no second-to-last
    assert _pairs(CellRule(1, 5), [4]) == [[]]  # a key after its query is never a cell
    assert _pairs(CellRule(-1, 0), [5]) == [[(4, 0)]]
    assert _pairs(CellRule("first", "first"), [2]) == [[(0, 0)]]


def test_specs_read_into_attention_edits():
    edits = build_edits(["attn:1.0,L2H3,2.1:last>first:add=0.5,renorm", "attn:L0H1:all>prev:force",
                         "attn:0.2:-1>all:copy=3"], 3, 4, 48)
    assert [(e.layer, tuple(e.heads), e.cells, e.mode, e.value, e.source_head, e.renormalize) for e in edits] == [
        (1, (0,), CellRule("last", "first"), "add", 0.5, None, True),
        (2, (3, 1), CellRule("last", "first"), "add", 0.5, None, True),
        (0, (1,), CellRule("all", "prev"), "force", 0.0, None, False),
        (0, (2,), CellRule(-1, "all"), "copy_head", 0.0, 3, False),
    ]


@pytest.mark.parametrize("spec, says", [
    ("attn:1.0", "attn needs HEADS:QUERIES>KEYS:MODE"),
    ("attn:1.0:last:add=1", "attn needs HEADS:QUERIES>KEYS:MODE"),
    ("attn:1.0:next>first:add=1", "queries 'next' is not one of last, first, all or a position"),
    ("attn:1.0:last>sink:add=1", "keys 'sink' is not one of first, last, all, self, prev or a position"),
    ("attn:1.0:last>first:add", "the mode is add=C, force or copy=HEAD"),
    ("attn:1.0:last>first:add=x", "'x' is not a number"),
    ("attn:1.0:last>first:force=2", "the mode is add=C"),
    ("attn:1.0:last>first:add=1,norm", "only ,renorm"),
    ("attn:1.0:last>first:add=1@last", "drop @last"),
    ("attn:14:last>first:force", "cannot read head '14'"),
])
def test_malformed_attention_specs_are_one_line(spec, says):
    with pytest.raises(WhiteboxError, match=says):
        parse_edit(spec)


@pytest.mark.parametrize("spec, says", [
    ("attn:3.0:last>first:force", r"head 3\.0 is outside this model"),
    ("attn:1.0:last>first:copy=4", "copy=4 is outside this model's 4 heads"),
])
def test_attention_specs_out_of_range_are_one_line(spec, says):
    with pytest.raises(WhiteboxError, match=says):
        build_edits([spec], 3, 4, 48)


IDS = [[5, 9, 2, 7, 3, 8], [4, 6, 1]]  # two lengths: the padded row's cells move with its padding


@pytest.mark.parametrize("spec, pairs, mode, extra", [
    ("attn:1.1,1.3:last>first:add=0.4", [[(5, 0)], [(2, 0)]], "add", {"value": 0.4}),
    ("attn:1.1:all>prev:force", [[(q, q - 1) for q in range(1, 6)], [(1, 0), (2, 1)]], "force", {}),
    ("attn:1.2:last>all:copy=0,renorm", [[(5, k) for k in range(6)], [(2, k) for k in range(3)]], "copy_head",
     {"source_head": 0, "renormalize": True}),
])
def test_a_rule_edits_as_its_cells_written_out(spec, pairs, mode, extra):
    lm = tiny_loaded("llama")
    eng = Engine(lm)
    batch = batch_from_ids(IDS)
    ruled = build_edits([spec], lm.arch.n_layers, lm.arch.n_heads, lm.arch.d_ff)
    cells = cells_from_pairs(2, 6, pairs)
    written = [EditAttention(e.layer, e.heads, cells, mode, **extra) for e in ruled]
    plain = eng.run(batch).logits
    got = eng.run(batch, edits=ruled).logits
    assert torch.equal(got, eng.run(batch, edits=written).logits)
    assert not torch.equal(got, plain)  # the edit did something


def test_generation_under_a_rule_keeps_the_cache():
    """Decoding with the KV cache under attn:...:all>first equals decoding by full passes, each under
    the same rule; a rule that moves with the end (last, -1) is refused by a generating study."""
    import numpy as np

    from whitebox_eval.internals.generation import generate

    lm = tiny_loaded("llama")
    eng = Engine(lm)
    edits = build_edits(["attn:0.0,1.2:all>first:add=0.8"], lm.arch.n_layers, lm.arch.n_heads, lm.arch.d_ff)
    prompts = [IDS[0][:5], IDS[1]]
    out = generate(eng, prompts, max_new_tokens=4, edits=edits, stop_ids=[])
    for prompt, got in zip(prompts, (g.ids for g in out)):
        seq = list(prompt)
        for _ in range(4):
            seq.append(int(np.argmax(eng.run(batch_from_ids([seq]), edits=edits).logits[0].numpy())))
        assert list(got) == seq[len(prompt):]


@pytest.mark.parametrize("spec, refused", [("attn:0.0:last>first:add=1", True), ("attn:0.0:all>-1:force", True),
                                          ("attn:0.0:all>prev:force", False), ("attn:0.0:3>first:add=1", False),
                                          ("ablate:0.0@last", True), ("ablate:0.0", False)])
def test_generating_studies_refuse_edits_that_move_with_the_end(spec, refused):
    from whitebox_eval.sae.feature_edits import refuse_last

    if refused:
        with pytest.raises(WhiteboxError, match="moves at every step"):
            refuse_last([spec], "span generates")
    else:
        refuse_last([spec], "span generates")
