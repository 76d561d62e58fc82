"""Key heads and attention reinforcement (003 App. G) through the engine on a tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from whitebox_eval.span.evaluation import evaluate_teacher_forced
from whitebox_eval.span.reinforcement import (
    Reinforcement,
    best_key_setting,
    find_key_heads,
    reference_cells,
    sweep_reinforcement,
)
from whitebox_eval.span.examples import string_reversal_example, value_assignment_example
from whitebox_eval.span.tokenization import tokenize_example
from whitebox_eval.controls import band, random_heads
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, Engine, batch_from_ids


def _examples(tok):
    # different lengths, so the batch is left-padded and coordinates must be unpadded
    return [tokenize_example(string_reversal_example("abcde"), tok, instruction="R:"),
            tokenize_example(string_reversal_example("xy"), tok, instruction="R:"),
            tokenize_example(value_assignment_example([("a", "1"), ("b", "0")], "ba"), tok)]


def test_reference_cells_hand_worked(char_tokenizer):
    tok = tokenize_example(string_reversal_example("abc"), char_tokenizer)
    # layout: BOS a b c = c b a  -> positions 0..7; targets at 5,6,7 predicted from 4,5,6
    cells = reference_cells([tok], seq_len=8)[0]
    expected = torch.zeros(8, 8, dtype=torch.bool)
    expected[4, 3] = expected[5, 2] = expected[6, 1] = True
    assert torch.equal(cells, expected)


def _full(engine, toks, edits=()):
    batch = batch_from_ids([t.input_ids.tolist() for t in toks], pad_id=0)
    return engine.run(batch, [Capture("attn_full")], list(edits), logits=False)["attn_full"]


@pytest.mark.parametrize("mode,threshold", [("standard", 0.0), ("conditional", 0.15)])
def test_reinforcement_changes_exactly_the_chosen_cells_of_the_chosen_heads(tiny_span_lm, mode, threshold):
    engine = Engine(tiny_span_lm)
    toks = _examples(tiny_span_lm.tokenizer)
    heads = ((1, 0), (1, 3), (2, 2))
    r = Reinforcement(heads, value=0.7, mode=mode, threshold=threshold)
    before = _full(engine, toks)
    after = _full(engine, toks, r.edits(toks))
    cells = reference_cells(toks, before.shape[-1])
    # layer 0 is upstream of every edit: untouched
    torch.testing.assert_close(after[:, 0], before[:, 0], rtol=0, atol=0)
    # layer 1: chosen heads differ from the clean pass by exactly C on reference cells
    # (above the threshold in conditional mode); the other heads are untouched
    for h in range(4):
        diff = after[:, 1, h] - before[:, 1, h]
        if (1, h) in heads:
            where = cells if mode == "standard" else cells & (before[:, 1, h] > threshold)
            assert where.any()
            torch.testing.assert_close(diff, where.float() * 0.7, rtol=0, atol=1e-6)
        else:
            torch.testing.assert_close(diff, torch.zeros_like(diff), rtol=0, atol=0)
    # layer 2's inputs changed, so compare the edited head against its own un-edited self:
    # re-run with only layer-1 edits, then layer 2 head 2 must differ by C on the cells only
    only_l1 = [e for e in r.edits(toks) if e.layer == 1]
    mid = _full(engine, toks, only_l1)
    diff = after[:, 2, 2] - mid[:, 2, 2]
    where = cells if mode == "standard" else cells & (mid[:, 2, 2] > threshold)
    torch.testing.assert_close(diff, where.float() * 0.7, rtol=0, atol=1e-6)
    for h in (0, 1, 3):
        torch.testing.assert_close(after[:, 2, h], mid[:, 2, h], rtol=0, atol=0)


def test_zero_reinforcement_leaves_predictions_unchanged(tiny_span_lm):
    engine = Engine(tiny_span_lm)
    toks = _examples(tiny_span_lm.tokenizer)
    plain = evaluate_teacher_forced(engine, toks)
    zero = evaluate_teacher_forced(engine, toks, edits_for=Reinforcement(((0, 1), (2, 3)), 0.0).edits)
    strong = evaluate_teacher_forced(engine, toks, edits_for=Reinforcement(
        tuple((l, h) for l in range(3) for h in range(4)), 50.0).edits)
    for a, b in zip(plain, zero):
        np.testing.assert_array_equal(a.predicted, b.predicted)
    assert any((a.predicted != c.predicted).any() for a, c in zip(plain, strong))


def test_key_heads_equal_brute_force_sum_over_reference_cells(tiny_span_lm):
    engine = Engine(tiny_span_lm)
    toks = _examples(tiny_span_lm.tokenizer)
    found = find_key_heads(engine, toks, batch_size=2)
    expected = np.zeros((3, 4))
    for t in toks:  # one example at a time, full matrices, loops
        att = _full(engine, [t])[0].double().numpy()
        for l in range(3):
            for h in range(4):
                for row, pos in enumerate(t.prediction_positions):
                    if t.valid[row]:
                        expected[l, h] += att[l, h, pos][t.reference_mask[row]].sum()
    np.testing.assert_allclose(found.scores, expected, rtol=1e-5, atol=1e-6)
    flat = [found.scores[l, h] for l, h in found.ranking]
    assert flat == sorted(flat, reverse=True)
    assert found.top(2) == found.ranking[:2]
    with pytest.raises(WhiteboxError):
        found.top(13)


def test_random_heads_are_seeded_distinct_and_respect_exclusions():
    key = [(3, 0), (20, 4)]
    a = random_heads(key, (30, 9), 2, 3, "widened-band")
    assert a == random_heads(key, (30, 9), 2, 3, "widened-band")
    assert a != random_heads(key, (30, 9), 2, 4, "widened-band")
    for d in a:
        assert len(set(d)) == 2 and not set(d) & set(key) and d == sorted(d)
    assert random_heads([(0, 0)], (2, 2), 1, 0, "widened-band") == [[(0, 1)]]  # the band's only other head
    with pytest.raises(WhiteboxError, match="reinforce fewer heads"):
        random_heads([(0, 0), (0, 1), (1, 0)], (2, 2), 1, 0, "widened-band", fix="reinforce fewer heads (--heads)")


def test_sweep_has_baseline_key_and_random_points(tiny_span_lm):
    engine = Engine(tiny_span_lm)
    toks = _examples(tiny_span_lm.tokenizer)
    heads = find_key_heads(engine, toks)
    points = sweep_reinforcement(engine, toks, heads, n_values=[1, 2], c_values=[0.0, 0.5],
                                 random_draws=2, batch_size=2)
    labels = [p.label for p in points]
    assert labels[0] == "baseline" and len(points) == 1 + 2 * 2 * 3
    base = points[0]
    for p in points:
        if p.value == 0.0:  # adding zero changes nothing
            assert p.accuracy == base.accuracy and p.partial_accuracy == base.partial_accuracy
    assert best_key_setting(points).heads_from == "key"


def test_reinforcement_rejects_bad_modes():
    with pytest.raises(WhiteboxError, match="mode"):
        Reinforcement(((0, 0),), 1.0, mode="sometimes")
    with pytest.raises(WhiteboxError, match="head"):
        Reinforcement((), 1.0)


# ---------------------------------------------------------------------- the controls


def test_shifted_reference_cells_hand_worked(char_tokenizer):
    from whitebox_eval.span.reinforcement import shifted_reference_cells

    tok = tokenize_example(string_reversal_example("abc"), char_tokenizer)
    # BOS a b c = c b a: rows 4,5,6 reference columns 3,2,1 -> the right neighbours 4,3,2
    # ('=' for the first answer character, then the character answered one step before)
    cells = shifted_reference_cells([tok], seq_len=8)[0]
    expected = torch.zeros(8, 8, dtype=torch.bool)
    expected[4, 4] = expected[5, 3] = expected[6, 2] = True
    assert torch.equal(cells, expected)
    assert not (cells & reference_cells([tok], seq_len=8)[0]).any()
    # a row whose right neighbour is another reference of the same row shifts left;
    # columns outside the data point are never used
    va = tokenize_example(value_assignment_example([("a", "1"), ("b", "0")], "ba"), char_tokenizer)
    ref = reference_cells([va])[0]
    shifted = shifted_reference_cells([va])[0]
    assert not (shifted & ref).any()
    for row in va.prediction_positions[va.valid]:
        cols = torch.nonzero(shifted[row]).flatten().tolist()
        assert cols and all(va.context_start <= c <= row for c in cols)
        for c in cols:
            assert ref[row, c - 1] or ref[row, c + 1]  # every shifted cell neighbours a reference


def test_shifted_reinforcement_edits_exactly_the_shifted_cells(tiny_span_lm):
    from whitebox_eval.span.reinforcement import shifted_reference_cells

    engine = Engine(tiny_span_lm)
    toks = _examples(tiny_span_lm.tokenizer)
    r = Reinforcement(((1, 2),), value=0.4, cells="shifted")
    before, after = _full(engine, toks), _full(engine, toks, r.edits(toks))
    cells = shifted_reference_cells(toks, before.shape[-1])
    torch.testing.assert_close(after[:, 1, 2] - before[:, 1, 2], cells.float() * 0.4, rtol=0, atol=1e-6)
    two = Reinforcement(((1, 2),), value=0.4, cells="shifted", shift=2)
    edit = two.edits(toks)[0]
    torch.testing.assert_close(edit.cells, shifted_reference_cells(toks, offset=2), rtol=0, atol=0)
    assert not torch.equal(edit.cells, cells)
    with pytest.raises(WhiteboxError, match="cells"):
        Reinforcement(((0, 0),), 1.0, cells="elsewhere")


def test_control_band_spans_the_key_layers_and_widens_until_enough_free_heads():
    assert band([(3, 0), (5, 1)], (10, 4), "widened-band") == (3, 5)
    # layer 2 has 4 heads, all key heads: widen to 1..3
    key = [(2, h) for h in range(4)]
    assert band(key, (10, 4), "widened-band") == (1, 3)
    assert band([(0, 0), (0, 1), (0, 2)], (3, 3), "widened-band") == (0, 1)
    with pytest.raises(WhiteboxError, match="fewer heads"):
        random_heads([(l, h) for l in range(2) for h in range(2)][:3], (2, 2), 1, 0, "widened-band",
                     fix="reinforce fewer heads (--heads)")


def test_random_heads_in_band_never_hit_a_key_head():
    key = [(4, 1), (4, 2), (6, 0)]
    for seed in range(30):
        for drawn in random_heads(key, (12, 3), 2, seed, "widened-band"):
            assert len(set(drawn)) == 3
            assert not set(drawn) & set(key)
            assert all(4 <= l <= 6 for l, _ in drawn)
