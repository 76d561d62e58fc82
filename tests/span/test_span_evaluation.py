"""Teacher-forced evaluation, rollout inputs and generation against hand computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from whitebox_eval.span.evaluation import (
    evaluate_teacher_forced,
    generate_greedy,
    generate_greedy_edited,
    generation_scores,
    summarize,
    teacher_forced_pass,
)
from whitebox_eval.span.reinforcement import Reinforcement
from whitebox_eval.span.tasks import generate
from whitebox_eval.span.examples import string_reversal_example
from whitebox_eval.span.tokenization import tokenize_example
from whitebox_eval.internals import Engine


def _toks(tok, n=5):
    exs = generate("string_reversal", n, "id", seed=1, length=(2, 7))
    return [tokenize_example(e, tok, instruction="R:", append_eos=True) for e in exs]


def _plain_logits(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


def test_accuracy_matches_hand_computation_from_unbatched_logits(tiny_span_lm):
    toks = _toks(tiny_span_lm.tokenizer)
    scores = evaluate_teacher_forced(Engine(tiny_span_lm), toks, batch_size=3)
    exact, partial = [], []
    for t, s in zip(toks, scores):
        logits = _plain_logits(tiny_span_lm.model, t.input_ids.tolist())
        pred = [int(logits[p].argmax()) for p in t.prediction_positions]
        right = [p == int(g) for p, g in zip(pred, t.target_ids)]
        assert s.predicted.tolist() == pred
        assert s.correct.tolist() == right
        exact.append(all(right))
        partial.append(sum(right) / len(right))
    summary = summarize([s.correct for s in scores])
    assert summary.accuracy == pytest.approx(np.mean(exact))
    assert summary.partial_accuracy == pytest.approx(np.mean(partial))


def test_results_do_not_depend_on_batch_size(tiny_span_lm):
    engine = Engine(tiny_span_lm)
    toks = _toks(tiny_span_lm.tokenizer, 4)
    one = evaluate_teacher_forced(engine, toks, batch_size=1, rollout=True, head_rows=True)
    many = evaluate_teacher_forced(engine, toks, batch_size=4, rollout=True, head_rows=True)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a.predicted, b.predicted)
        np.testing.assert_allclose(a.rollout_scores, b.rollout_scores, atol=1e-6, equal_nan=True)
        np.testing.assert_allclose(a.head_scores, b.head_scores, atol=1e-6, equal_nan=True)


def test_rollout_heatmap_input_matches_hand_rollout_of_eager_attentions(make_span_lm):
    lm = make_span_lm(attn="eager")
    t = tokenize_example(string_reversal_example("abcd"), lm.tokenizer, instruction="R:")
    [s] = teacher_forced_pass(Engine(lm), [t], rollout=True, keep_rollout=True)
    with torch.no_grad():
        out = lm.model(input_ids=torch.tensor([t.input_ids.tolist()]), output_attentions=True)
    # Abnar & Zuidema by hand: head mean, + identity, row-normalise, multiply through layers
    n = t.seq_len
    roll = np.eye(n)
    for layer_att in out.attentions:
        a = layer_att[0].double().numpy().mean(axis=0) + np.eye(n)
        a = a / a.sum(axis=1, keepdims=True)
        roll = a @ roll
    assert s.rollout.shape == (n, n)
    np.testing.assert_allclose(s.rollout, roll, rtol=1e-5, atol=1e-7)
    # reference score of target row k: rollout mass on input char n-1-k over the data point
    for k, pos in enumerate(t.prediction_positions):
        row = roll[pos]
        ref = t.context_start + (3 - k)
        expected = row[ref] / row[t.context_start:].sum()
        assert s.rollout_scores[k] == pytest.approx(expected, rel=1e-5)


def test_head_scores_nan_on_rows_without_reference(tiny_span_lm):
    toks = _toks(tiny_span_lm.tokenizer, 2)  # append_eos: last row has no reference
    [s, _] = teacher_forced_pass(Engine(tiny_span_lm), toks, rollout=True, head_rows=True)
    assert np.isnan(s.rollout_scores[-1]) and np.isnan(s.head_scores[..., -1]).all()
    assert not np.isnan(s.rollout_scores[:-1]).any()
    assert ((s.head_scores[..., :-1] >= 0) & (s.head_scores[..., :-1] <= 1 + 1e-9)).all()


def test_generate_greedy_matches_a_manual_argmax_loop(tiny_span_lm):
    toks = _toks(tiny_span_lm.tokenizer, 3)
    tok = tiny_span_lm.tokenizer
    gens = generate_greedy(tiny_span_lm, toks, max_new_tokens=4)
    for t, g in zip(toks, gens):
        ids = t.input_ids[: t.prompt_length].tolist()
        new = []
        for _ in range(4):
            nxt = int(_plain_logits(tiny_span_lm.model, ids)[-1].argmax())
            if nxt == tok.eos_token_id:
                break
            ids.append(nxt)
            new.append(nxt)
        assert g == tok.decode(new, skip_special_tokens=True)
    # the engine-driven loop without edits agrees with generate()
    assert generate_greedy_edited(Engine(tiny_span_lm), toks, None, max_new_tokens=4) == gens
    edited = generate_greedy_edited(Engine(tiny_span_lm), toks,
                                    Reinforcement(((0, 0), (1, 1)), 0.0).edits, max_new_tokens=4)
    assert edited == gens
    scores = generation_scores(gens, toks)
    assert all(len(c) == len(t.example.target) for c, t in zip(scores, toks))


def test_summary_correct_vs_error_splits_tokens():
    correct = [np.array([True, False, True]), np.array([False, True])]
    scores = [np.array([0.9, 0.1, 0.8]), np.array([0.2, np.nan])]
    s = summarize(correct, rollout_scores=scores)
    cve = s.correct_vs_error
    assert (cve.n_correct, cve.n_error) == (2, 2)
    assert cve.mean_correct == pytest.approx(0.85) and cve.mean_error == pytest.approx(0.15)
    assert s.reference_attention == pytest.approx((0.9 + 0.1 + 0.8 + 0.2) / 4)
    assert s.to_dict()["correct_vs_error"]["test"] == "welch"
