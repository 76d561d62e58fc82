"""Head activation, matched attention and strong / weak / knock-out interventions on a tiny
random model, each against a hand computation from the model's own attention."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parents[1] / "internals"))

from references import eager_attentions  # noqa: E402
from tiny_models import tiny_loaded  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.gar.generator import generate_task_examples  # noqa: E402
from whitebox_eval.gar.heads import (  # noqa: E402
    activation_from_rows,
    head_activations,
    is_activated,
    matched_attention,
    max_activation,
    parse_heads,
    split_true_false,
)
from whitebox_eval.gar.interventions import (  # noqa: E402
    best_matching_rows,
    intervene,
    knockout_edits,
    strong_edits,
    true_false_scores,
    weak_edits,
)
from whitebox_eval.gar.prompts import RoleSpans  # noqa: E402
from whitebox_eval.gar.roles import EncodedExample, parse_pattern  # noqa: E402
from whitebox_eval.gar.scoring import make_batch  # noqa: E402
from whitebox_eval.internals import Capture, Engine  # noqa: E402

IDS = [[5, 9, 17, 33, 2, 41, 7, 12, 30, 8], [3, 8, 21, 30, 11, 6, 40]]
# token roles of each sequence: K at 1, V at 2-3, K'1 at 4, V'1 at 5, Q at 6, E = last
SPANS = [RoleSpans(end=(9, 10), query=(6, 7), key=(1, 2), value=(2, 4), answer=(8, 9),
                   distractor_keys=((4, 5),), distractor_values=((5, 6),)),
         RoleSpans(end=(6, 7), query=(5, 6), key=(1, 2), value=(2, 4), answer=(6, 7),
                   distractor_keys=((4, 5),), distractor_values=((4, 5),))]


def _encoded(labels=("Yes", "No")) -> list[EncodedExample]:
    cls = generate_task_examples("GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]", seed=0)
    by_label = {e.label: e for e in cls[:2]}
    return [EncodedExample(example=by_label[lab], input_ids=tuple(ids), spans=sp, demo_spans=sp,
                           answer_ids={"Yes": 3, "No": 4})
            for ids, sp, lab in zip(IDS, SPANS, labels)]


@pytest.fixture(scope="module")
def tiny():
    lm = tiny_loaded("llama")
    return lm, Engine(lm)


def test_activation_formula_worked_example():
    rows = torch.tensor([[0.70, 0.20, 0.10, 0.0],    # sink wins: not activated, value 0.20
                         [0.30, 0.10, 0.60, 0.0],    # activated, value 0.60
                         [0.25, 0.25, 0.25, 0.25]])  # tie with the sink: not activated
    torch.testing.assert_close(activation_from_rows(rows), torch.tensor([0.20, 0.60, 0.25]))
    torch.testing.assert_close(activation_from_rows(rows, subtract_first=True),
                               torch.tensor([-0.50, 0.30, 0.0]))
    assert is_activated(rows).tolist() == [False, True, False]


def test_head_activation_matches_hand_computation_from_eager_attention(tiny):
    lm, engine = tiny
    enc = _encoded()
    batch = make_batch(engine, enc)
    positions = [[3, 6], [2, 5]]
    act = head_activations(engine, batch, positions)  # [B, L, H, P]
    for b, ids in enumerate(IDS):
        ref = eager_attentions(lm.model, torch.tensor([ids]))  # unpadded, per layer [1, H, S, S]
        for layer in range(lm.arch.n_layers):
            for h in range(lm.arch.n_heads):
                for p, q in enumerate(positions[b]):
                    row = ref[layer][0, h, q, : q + 1].tolist()
                    hand = max(row[1:])
                    assert act[b, layer, h, p].item() == pytest.approx(hand, abs=1e-5)
    # max over uneven position lists equals the max of the per-position values
    m = max_activation(engine, batch, [[3, 6, 8], [2]], subtract_first=True)
    ref0 = eager_attentions(lm.model, torch.tensor([IDS[0]]))
    hand = max(max(ref0[1][0, 2, q, 1:q + 1].tolist()) - ref0[1][0, 2, q, 0].item() for q in (3, 6, 8))
    assert m[0, 1, 2].item() == pytest.approx(hand, abs=1e-5)


def test_matched_attention_sums_weight_on_key_span(tiny):
    lm, engine = tiny
    enc = _encoded()
    m = matched_attention(engine, enc, ["V->E", "K'->Q", "NOT->E"], batch_size=2)
    assert m.weights.shape == (2, 3, lm.arch.n_layers, lm.arch.n_heads)
    assert np.isnan(m.weights[:, 2]).all()  # no NOT role
    for b, ids in enumerate(IDS):
        ref = eager_attentions(lm.model, torch.tensor([ids]))
        end = len(ids) - 1
        hand = ref[2][0, 1, end, 2].item() + ref[2][0, 1, end, 3].item()  # V spans tokens 2, 3
        assert m.weights[b, 0, 2, 1] == pytest.approx(hand, abs=1e-5)
        q = SPANS[b].query[0]
        assert m.weights[b, 1, 0, 3] == pytest.approx(ref[0][0, 3, q, 4].item(), abs=1e-5)


def _head_out(engine, batch, edits, layer):
    return engine.run(batch, [Capture("head_out", "all", [layer]), Capture("v", "all", [layer])],
                      edits=edits)


def test_strong_intervention_forces_the_pattern(tiny):
    lm, engine = tiny
    enc = _encoded()
    batch = make_batch(engine, enc)
    layer, heads = 1, [0, 3]
    base = _head_out(engine, batch, [], layer)
    t = _head_out(engine, batch, strong_edits(enc, batch, [(layer, h) for h in heads], "V->E"), layer)
    off = batch.offsets
    for b in range(2):
        end = len(IDS[b]) - 1
        v = base["v"][b, 0]  # [S_padded, Hkv, D]
        for h in heads:
            kvh = lm.arch.kv_head(h)
            hand = 0.5 * (v[off[b] + 2, kvh] + v[off[b] + 3, kvh])  # weight 1/2 on each V token
            torch.testing.assert_close(t["head_out"][b, 0, off[b] + end, h], hand, atol=1e-5, rtol=1e-5)
        # other heads and earlier rows untouched
        torch.testing.assert_close(t["head_out"][b, 0, off[b] + end, 1], base["head_out"][b, 0, off[b] + end, 1],
                                   atol=1e-5, rtol=1e-5)
        # (pad rows are not compared; the edited layer runs eager math: float tolerance)
        torch.testing.assert_close(t["head_out"][b, 0, off[b]: off[b] + end], base["head_out"][b, 0, off[b]: off[b] + end],
                                   atol=1e-5, rtol=1e-5)


def test_weak_intervention_copies_the_best_matching_other_head(tiny):
    lm, engine = tiny
    enc = _encoded()
    batch = make_batch(engine, enc)
    target = [(2, 1)]
    refs = [eager_attentions(lm.model, torch.tensor([ids])) for ids in IDS]
    # hand: best (layer, head) != target by weight of END on V (tokens 2, 3)
    best = []
    for b, ids in enumerate(IDS):
        end = len(ids) - 1
        scores = {(l, h): refs[b][l][0, h, end, 2].item() + refs[b][l][0, h, end, 3].item()
                  for l in range(lm.arch.n_layers) for h in range(lm.arch.n_heads) if (l, h) not in target}
        best.append(max(scores, key=scores.get))
    rows, chosen, _ = best_matching_rows(engine, enc, batch, "V->E", exclude=target)
    assert chosen == best
    base = _head_out(engine, batch, [], 2)
    t = _head_out(engine, batch, weak_edits(engine, enc, batch, target, "V->E"), 2)
    off = batch.offsets
    for b, ids in enumerate(IDS):
        end = len(ids) - 1
        l, h = best[b]
        src_row = refs[b][l][0, h, end, : end + 1]
        v = base["v"][b, 0, off[b]: off[b] + end + 1, lm.arch.kv_head(1)]
        torch.testing.assert_close(t["head_out"][b, 0, off[b] + end, 1], src_row @ v, atol=1e-5, rtol=1e-5)


def test_knockout_zeroes_heads_at_the_attending_position_only(tiny):
    lm, engine = tiny
    enc = _encoded()
    batch = make_batch(engine, enc)
    base = _head_out(engine, batch, [], 1)
    t = _head_out(engine, batch, knockout_edits(enc, [(1, 2)], "K->Q", at="pattern"), 1)
    off = batch.offsets
    for b in range(2):
        q = SPANS[b].query[0] + off[b]
        assert torch.all(t["head_out"][b, 0, q, 2] == 0)
        keep = torch.ones(batch.seq_len, lm.arch.n_heads, dtype=torch.bool)
        keep[q, 2] = False
        keep[: off[b]] = False  # pad rows
        torch.testing.assert_close(t["head_out"][b, 0][keep], base["head_out"][b, 0][keep])


def test_true_false_intervention_uses_the_label(tiny):
    lm, engine = tiny
    enc = _encoded()  # example 0 is Yes, example 1 is No
    true_h, false_h = [(1, 0)], [(1, 3)]
    tf = true_false_scores(engine, enc, true_h, false_h, pattern="Q->A")
    inv = true_false_scores(engine, enc, true_h, false_h, inverse=True, pattern="Q->A")
    # by hand: Yes example = strong Q->A on the True head + knock-out of the False head
    yes = [enc[0]]
    b = make_batch(engine, yes)
    edits = strong_edits(yes, b, true_h, parse_pattern("Q->A")) + knockout_edits(yes, false_h, "Q->A")
    p = torch.softmax(engine.run(b, edits=edits).logits.float(), -1)[0]
    assert tf[0].probs["Yes"] == pytest.approx(float(p[3]), abs=1e-6)
    b = make_batch(engine, [enc[1]])  # inverse on the No example: boost True, knock False
    edits = strong_edits([enc[1]], b, true_h, parse_pattern("Q->A")) + knockout_edits([enc[1]], false_h, "Q->A")
    p = torch.softmax(engine.run(b, edits=edits).logits.float(), -1)[0]
    assert inv[1].probs["No"] == pytest.approx(float(p[4]), abs=1e-6)
    with pytest.raises(WhiteboxError):
        true_false_scores(engine, enc, [(1, 0)], [(1, 0)])


def test_intervene_reports_before_and_after(tiny):
    lm, engine = tiny
    enc = _encoded()
    res = intervene(engine, enc, [(2, 0), (2, 1)], "Q->A", "strong", batch_size=1)
    s = res.summary()
    assert s["n"] == 2 and 0 <= s["accuracy_before"] <= 1
    assert res.before[0].probs != res.after[0].probs
    with pytest.raises(WhiteboxError):
        intervene(engine, enc, [(2, 0)], "Q->A", "medium")
    with pytest.raises(WhiteboxError):
        intervene(engine, enc, [(2, 99)], "Q->A", "strong")


def test_split_true_false_and_parse_heads():
    gap = np.zeros((3, 4))
    gap[0, 1], gap[1, 2], gap[2, 3], gap[1, 0] = 0.3, -0.2, 0.1, -0.5
    t, f = split_true_false([(0, 1), (1, 2), (2, 3), (1, 0), (0, 0)], gap, n_true=2, n_false=1)
    assert t == [(0, 1), (2, 3)] and f == [(1, 0)]
    assert parse_heads("14.18, 14.46") == [(14, 18), (14, 46)]
    for bad in ("14", "a.b", ""):
        with pytest.raises(WhiteboxError):
            parse_heads(bad)


def test_edit_rows_at_the_read_position_the_pattern_role_or_both(tiny):
    from whitebox_eval.gar.interventions import edit_positions, edit_rows

    enc = _encoded()[0]  # Q at 6, A at 8, E at 9
    pat = parse_pattern("Q->A")
    assert edit_rows(enc, pat, "pattern") == [(8, [6])]
    assert edit_rows(enc, pat, "read") == [(9, [6])]
    assert edit_rows(enc, pat, "both") == [(8, [6]), (9, [6])]
    assert edit_positions([enc], "V->E", "both") == [[9]]  # E is the read position: one row
    with pytest.raises(WhiteboxError):
        edit_rows(enc, pat, "end")


def test_knocking_out_heads_at_the_read_position_changes_the_output(tiny):
    """Regression: Q->A edits used to act at A only, where a last-layer head cannot
    reach the output; at the read position (the default) they must change it."""
    from whitebox_eval.gar.interventions import intervention_edits
    from whitebox_eval.gar.scoring import score_examples

    lm, engine = tiny
    enc = _encoded()[:1]  # A (8) is before E (9)
    last = lm.arch.n_layers - 1
    every_head = [(l, h) for l in range(lm.arch.n_layers) for h in range(lm.arch.n_heads)]
    last_layer = [(last, h) for h in range(lm.arch.n_heads)]
    before = score_examples(engine, enc)[0].probs
    for heads in (every_head, last_layer):
        after = score_examples(engine, enc, edits_for=intervention_edits(engine, "knockout", heads, "Q->A"))[0].probs
        assert max(abs(after[k] - before[k]) for k in before) > 1e-4
    # the paper's literal position (A) cannot reach the output from the last layer: exactly unchanged
    at_a = score_examples(engine, enc, edits_for=intervention_edits(engine, "knockout", last_layer, "Q->A",
                                                                    at="pattern"))[0].probs
    assert max(abs(at_a[k] - before[k]) for k in before) < 1e-6
    # strong at the read position forces E's row onto Q (a hand check on the edited layer's output)
    batch = make_batch(engine, enc)
    base = _head_out(engine, batch, [], last)
    t = _head_out(engine, batch, strong_edits(enc, batch, [(last, 0)], "Q->A"), last)
    off = int(batch.offsets[0])
    hand = base["v"][0, 0, off + 6, lm.arch.kv_head(0)]  # all weight on Q (token 6)
    torch.testing.assert_close(t["head_out"][0, 0, off + 9, 0], hand, atol=1e-5, rtol=1e-5)
