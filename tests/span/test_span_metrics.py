"""Scores of AttentionSpan against hand computations and brute-force references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from whitebox_eval.span.metrics import (
    attention_rollout,
    attentions_from_hf,
    compare_correct_vs_error,
    exact_match_accuracy,
    generation_accuracy,
    generation_correctness,
    key_head_scores,
    mean_reference_attention,
    partial_accuracy,
    rank_key_heads,
    reference_attention_scores,
    token_correctness,
)
from whitebox_eval.span.tasks import generate
from whitebox_eval.span.examples import string_reversal_example
from whitebox_eval.span.tokenization import tokenize_example
from whitebox_eval.errors import WhiteboxError

# ----------------------------------------------------------------------- accuracies


def test_exact_and_partial_accuracy_hand_worked():
    correct = [np.array([True, True]), np.array([True, False]),
               np.array([False, False, True, True])]
    assert exact_match_accuracy(correct) == pytest.approx(1 / 3)
    assert partial_accuracy(correct) == pytest.approx((1 + 0.5 + 0.5) / 3)


def test_token_correctness_reads_the_prediction_rows(char_tokenizer):
    tok = tokenize_example(string_reversal_example("ab"), char_tokenizer)  # [BOS a b = b a]
    v = char_tokenizer.get_vocab()
    logits = np.zeros((6, len(char_tokenizer)))
    logits[3, v["b"]] = 5.0  # row 3 ('=') predicts token 4 ('b'): right
    logits[4, v["b"]] = 5.0  # row 4 predicts token 5 ('a'): wrong
    logits[5, v["a"]] = 9.0  # row 5 predicts beyond the sequence: ignored
    assert token_correctness(torch.tensor(logits), tok).tolist() == [True, False]
    with pytest.raises(WhiteboxError, match="seq_len"):
        token_correctness(logits[:4], tok)


def test_generation_accuracy():
    assert generation_correctness("cb", "cba").tolist() == [True, True, False]
    assert generation_correctness(" cxa\nmore", "cba").tolist() == [True, False, True]
    assert generation_accuracy(["cba\nabc=cba", " cb", "13 14"], ["cba", "cba", "13 14 "]) == \
        pytest.approx(2 / 3)
    with pytest.raises(WhiteboxError, match="one generation per target"):
        generation_accuracy(["a"], ["a", "b"])


# -------------------------------------------------------------------------- rollout

LAYER1 = [[[1, 0, 0], [1, 0, 0], [1, 0, 0]],
          [[1, 0, 0], [0, 1, 0], [0, 0.5, 0.5]]]
LAYER2 = [[[1, 0, 0], [0, 1, 0], [0, 0, 1]],
          [[1, 0, 0], [0.5, 0.5, 0], [0, 1, 0]]]


def test_rollout_two_layers_by_hand():
    # layer 1: head mean [[1,0,0],[.5,.5,0],[.5,.25,.25]]; +I and /2 ->
    #   A1 = [[1,0,0],[.25,.75,0],[.25,.125,.625]]
    # layer 2: head mean [[1,0,0],[.25,.75,0],[0,.5,.5]]; +I and /2 ->
    #   A2 = [[1,0,0],[.125,.875,0],[0,.25,.75]]
    # rollout = A2 @ A1:
    #   row 1 = .125*[1,0,0] + .875*[.25,.75,0]          = [.34375, .65625, 0]
    #   row 2 = .25*[.25,.75,0] + .75*[.25,.125,.625]    = [.25, .28125, .46875]
    expected = torch.tensor([[1.0, 0.0, 0.0],
                             [0.34375, 0.65625, 0.0],
                             [0.25, 0.28125, 0.46875]], dtype=torch.float64)
    att = torch.tensor([LAYER1, LAYER2], dtype=torch.float32)  # [L=2, H=2, 3, 3]
    out = attention_rollout(att)
    assert out.shape == (3, 3)
    assert torch.allclose(out, expected, atol=1e-12)
    batched = attention_rollout(att.unsqueeze(0).repeat(2, 1, 1, 1, 1))
    assert batched.shape == (2, 3, 3) and torch.allclose(batched[1], expected, atol=1e-12)


def test_rollout_head_weights_and_hf_stacking():
    att = torch.tensor([LAYER1, LAYER2], dtype=torch.float64)
    # all weight on head 0: A1 = ([[1,0,0]]*3 + I)/2, A2 = (I + I)/2 = I
    only_first = attention_rollout(att, head_weights=[[1, 0], [1, 0]])
    expected = torch.tensor([[1, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5]], dtype=torch.float64)
    assert torch.allclose(only_first, expected)
    per_layer = [att[layer].unsqueeze(0) for layer in range(2)]  # HF: [B, H, S, S]
    stacked = attentions_from_hf(per_layer)
    assert stacked.shape == (1, 2, 2, 3, 3)
    assert torch.allclose(attention_rollout(stacked)[0], attention_rollout(att))
    with pytest.raises(WhiteboxError, match="head_weights"):
        attention_rollout(att, head_weights=[[1, 0]])


# ---------------------------------------------------------------- reference attention


@pytest.fixture
def reversal_ab(char_tokenizer):
    # tokens: [BOS, x, a, b, =, b, a]; context starts at 2; rows 4 and 5 predict
    return tokenize_example(string_reversal_example("ab"), char_tokenizer, instruction="x")


def test_reference_attention_score_worked_example(reversal_ab):
    att = np.zeros((7, 7))
    att[4] = [0.5, 0.1, 0.1, 0.2, 0.1, 0, 0]   # reference: 'b' at token 3
    att[5] = [0.2, 0.0, 0.3, 0.1, 0.1, 0.3, 0]  # reference: 'a' at token 2
    # context normalisation: 0.2 / (0.1+0.2+0.1) = 0.5 ; 0.3 / (0.3+0.1+0.1+0.3) = 0.375
    assert reference_attention_scores(att, reversal_ab).tolist() == \
        pytest.approx([0.5, 0.375])
    # whole-row normalisation: 0.2 / 1.0 ; 0.3 / 1.0
    assert reference_attention_scores(torch.tensor(att), reversal_ab, normalize="row") \
        .tolist() == pytest.approx([0.2, 0.3])
    # a row with no attention in the context scores 0, as the released code
    att[5] = [1, 0, 0, 0, 0, 0, 0]
    assert reference_attention_scores(att, reversal_ab)[1] == 0.0


def test_rows_without_reference_are_nan_and_skipped(char_tokenizer):
    tok = tokenize_example(string_reversal_example("ab"), char_tokenizer, append_eos=True,
                           add_bos=False)  # [a b = b a EOS]: rows 2, 3, 4
    att = np.tril(np.ones((6, 6)))
    att /= att.sum(axis=1, keepdims=True)
    scores = reference_attention_scores(att, tok)
    # row 2 spreads 1/3 over a,b,= -> ref 'b' gets 1/3; row 3 -> ref 'a' 1/4
    assert scores[:2].tolist() == pytest.approx([1 / 3, 1 / 4])
    assert math.isnan(scores[2])
    other = np.array([0.9, np.nan])
    assert mean_reference_attention([scores, other]) == pytest.approx((1 / 3 + 1 / 4 + 0.9) / 3)
    assert mean_reference_attention([scores, other], pooled=False) == \
        pytest.approx(((1 / 3 + 1 / 4) / 2 + 0.9) / 2)


def test_compare_correct_vs_error_welch_by_hand():
    scores = [np.array([0.5, 0.1, np.nan]), np.array([0.6, 0.7, 0.2, 0.4])]
    correct = [np.array([True, False, False]), np.array([True, True, False, False])]
    res = compare_correct_vs_error(scores, correct)
    good, bad = [0.5, 0.6, 0.7], [0.1, 0.2, 0.4]
    m1, m2 = sum(good) / 3, sum(bad) / 3
    v1 = sum((x - m1) ** 2 for x in good) / 2
    v2 = sum((x - m2) ** 2 for x in bad) / 2
    t = (m1 - m2) / math.sqrt(v1 / 3 + v2 / 3)
    df = (v1 / 3 + v2 / 3) ** 2 / ((v1 / 3) ** 2 / 2 + (v2 / 3) ** 2 / 2)
    assert (res.n_correct, res.n_error) == (3, 3)
    assert res.mean_correct == pytest.approx(m1) and res.mean_error == pytest.approx(m2)
    assert res.statistic == pytest.approx(t)
    assert res.p_value == pytest.approx(2 * stats.t.sf(abs(t), df))
    assert res.test == "welch"


def test_compare_correct_vs_error_mann_whitney_exact():
    res = compare_correct_vs_error([np.array([0.5, 0.6, 0.7, 0.1, 0.2, 0.4])],
                                   [np.array([True] * 3 + [False] * 3)], test="mannwhitney")
    # every correct score beats every error score: U = 9 of 9 pairs; exact two-sided
    # p = 2 * P(U = 9) = 2 / C(6, 3) = 0.1
    assert res.statistic == 9.0
    assert res.p_value == pytest.approx(0.1)


def test_compare_with_too_few_tokens_gives_nan():
    res = compare_correct_vs_error([np.array([0.5, 0.1])], [np.array([True, False])])
    assert math.isnan(res.p_value) and res.n_correct == 1


# ------------------------------------------------------------------------ key heads


def test_key_head_scores_brute_force(char_tokenizer):
    rng = np.random.default_rng(0)
    examples = generate("long_multiplication", 3, "id", seed=2)
    toks = [tokenize_example(e, char_tokenizer, append_eos=True) for e in examples]
    atts = []
    for tok in toks:
        raw = rng.random((2, 3, tok.seq_len, tok.seq_len))
        atts.append(raw / raw.sum(axis=-1, keepdims=True))
    expected = np.zeros((2, 3))
    for att, tok in zip(atts, toks):
        for layer in range(2):
            for head in range(3):
                for t, ref in enumerate(tok.example.reference):  # EOS row: none
                    row = tok.target_positions[t] - 1
                    for i in ref or ():
                        expected[layer, head] += att[layer, head, row, tok.context_start + i]
    got = key_head_scores(atts, toks)
    assert np.allclose(got, expected)
    gathered = [a[:, :, tok.prediction_positions, :] for a, tok in zip(atts, toks)]
    assert np.allclose(key_head_scores([torch.tensor(g) for g in gathered], toks,
                                       rows_gathered=True), expected)


def test_rank_key_heads():
    scores = np.array([[0.1, 0.5], [0.5, 0.2]])
    assert rank_key_heads(scores) == [(0, 1), (1, 0), (1, 1), (0, 0)]
    assert rank_key_heads(torch.tensor(scores), top_n=2) == [(0, 1), (1, 0)]


# -------------------------------------------- generation and table 2 within samples


def test_generation_exact_is_whole_string_equality_not_a_prefix():
    from whitebox_eval.span.metrics import generation_exact

    # regression: characters after the target used to be ignored (prefix match)
    assert not generation_exact("z.reverse()", "z")
    assert generation_accuracy(["z.reverse()"], ["z"]) == 0.0
    # the documented stop rule: cut at the first newline, strip whitespace
    assert generation_exact(" cba\nmore text", "cba")
    assert not generation_exact("cb", "cba")


def test_summary_generation_accuracy_counts_trailing_characters_as_wrong():
    from whitebox_eval.span.results import _stage_summary

    # records as the study wrote them before the fix (per-character vectors, prefix verdict)
    recs = [{"correct": [1], "exact": True, "partial": 1.0, "target": "z", "generated": "z.reverse()",
             "generation_correct": [1], "generation_exact": True},
            {"correct": [1, 1], "exact": True, "partial": 1.0, "target": "ab", "generated": "ab",
             "generation_correct": [1, 1], "generation_exact": True}]
    s = _stage_summary(recs, "welch")
    assert s["generation_accuracy"] == 0.5  # was 1.0: "z.reverse()" matched "z" as a prefix
    assert s["generation_accuracy_n"] == 2
    assert s["generation_partial_accuracy"] == 1.0  # per character, the first one is right


def test_within_sample_comparison_is_wilcoxon_on_per_sample_mean_differences():
    from whitebox_eval.span.metrics import compare_within_samples

    scores = [np.array([0.9, 0.7, 0.1]), np.array([0.6, 0.2, np.nan]), np.array([0.5, 0.5]),
              np.array([0.8, 0.3, 0.4, 0.35]), np.array([0.3, 0.6])]
    correct = [np.array([1, 1, 0]), np.array([1, 0, 0]), np.array([1, 1]),
               np.array([1, 0, 1, 0]), np.array([0, 1])]
    res = compare_within_samples(scores, [c.astype(bool) for c in correct])
    # by hand: sample 0: 0.8 - 0.1; sample 1: 0.6 - 0.2 (NaN skipped); sample 2: no
    # wrong token (skipped); sample 3: 0.6 - 0.325; sample 4: 0.6 - 0.3
    diffs = [0.7, 0.4, 0.275, 0.3]
    assert (res["n_samples"], res["n_skipped"]) == (4, 1)
    assert res["mean_correct"] == pytest.approx(np.mean([0.8, 0.6, 0.6, 0.6]))
    assert res["test"]["diff"] == pytest.approx(np.mean(diffs))
    assert res["test"]["p_value"] == pytest.approx(stats.wilcoxon(diffs).pvalue)
    assert res["test"]["test"] == "wilcoxon" and res["test"]["n"] == 4
    none = compare_within_samples([np.array([0.5])], [np.array([True])])
    assert none["n_samples"] == 0 and none["test"] is None


def test_by_position_comparison_groups_tokens_at_the_same_answer_position():
    from whitebox_eval.span.metrics import compare_by_position

    scores = [np.array([0.9, 0.1, 0.3]), np.array([0.8, 0.2]), np.array([0.4, 0.6]),
              np.array([0.5, 0.7, 0.2])]
    correct = [np.array([1, 0, 1]), np.array([1, 1]), np.array([0, 1]), np.array([0, 0, 1])]
    rows = compare_by_position(scores, [c.astype(bool) for c in correct])
    assert [r["position"] for r in rows] == [0, 1, 2]
    p0 = rows[0]  # correct: 0.9, 0.8; wrong: 0.4, 0.5
    assert (p0["n_correct"], p0["n_error"]) == (2, 2)
    assert p0["mean_correct"] == pytest.approx(0.85) and p0["mean_error"] == pytest.approx(0.45)
    ref = stats.ttest_ind([0.9, 0.8], [0.4, 0.5], equal_var=False)
    assert p0["p_value"] == pytest.approx(ref.pvalue)
    p2 = rows[2]  # only the two 3-token samples, both right there
    assert (p2["n_correct"], p2["n_error"]) == (2, 0) and math.isnan(p2["p_value"])


def test_compare_clustered_uses_the_sequence_as_unit_against_statsmodels():
    import statsmodels.api as sm

    from whitebox_eval.span.metrics import compare_clustered

    rng = np.random.default_rng(3)
    scores, correct, y, a, g = [], [], [], [], []
    for i in range(8):  # each sequence shares a level: its tokens are not independent
        level = rng.normal(0, 1)
        s = level + rng.normal(0, 0.1, size=6)
        c = rng.random(6) < 0.5
        c[0], c[1] = True, False
        s[3] = np.nan  # a row without reference is skipped
        scores.append(s)
        correct.append(c)
        keep = ~np.isnan(s)
        y += s[keep].tolist()
        a += c[keep].tolist()
        g += [i] * int(keep.sum())
    out = compare_clustered(scores, correct)
    fit = sm.OLS(np.asarray(y), sm.add_constant(np.asarray(a, dtype=float))).fit(
        cov_type="cluster", cov_kwds={"groups": np.asarray(g)}, use_t=True)
    assert out["n_sequences"] == 8 and out["n_tokens"] == len(y) and out["test"]["n"] == 8
    assert out["test"]["diff"] == pytest.approx(fit.params[1], rel=1e-9)
    assert out["test"]["p_value"] == pytest.approx(fit.pvalues[1], rel=1e-6)
    lo, hi = fit.conf_int()[1]
    assert (out["test"]["lo"], out["test"]["hi"]) == (pytest.approx(lo, rel=1e-6), pytest.approx(hi, rel=1e-6))
    none = compare_clustered([np.array([0.1, 0.2])], [np.array([True, True])])
    assert none["test"] is None and "both groups" in none["why"]
