"""GAR metrics beside the paper's rule: intervals, paired tests, flips, and the summary's
words, checked against scipy and hand counts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from whitebox_eval.gar.generator import generate_task_examples
from whitebox_eval.gar.metrics import intervention_summary, random_control, score_metrics
from whitebox_eval.gar.prompts import RoleSpans
from whitebox_eval.gar.roles import EncodedExample
from whitebox_eval.gar.scoring import score_from_probs

SP = RoleSpans(end=(3, 4), query=(1, 2), key=(0, 1), value=(0, 1), answer=(2, 3))


def _enc(answer_ids=None) -> EncodedExample:
    ex = generate_task_examples("GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]", seed=0)[0]  # a Yes item
    return EncodedExample(example=ex, input_ids=(1, 2, 3, 4), spans=SP, demo_spans=SP,
                          answer_ids=answer_ids or {"Yes": 10, "No": 11})


def _score(p_yes: float, p_no: float):
    return score_from_probs(_enc(), {"Yes": p_yes, "No": p_no})


def test_choice_mass_counts_a_shared_first_token_once():
    enc = _enc({"Yes": 10, "No": 10})
    s = score_from_probs(enc, {"Yes": 0.2, "No": 0.2})
    assert s.choice_mass == pytest.approx(0.2) and s.shared_first_token
    assert _score(0.2, 0.1).choice_mass == pytest.approx(0.3)


def test_score_metrics_against_scipy_and_hand_means():
    # Yes is the target. paper's rule: P(Yes) > 1/2; argmax: P(Yes) > P(No)
    scores = [_score(0.6, 0.1), _score(0.3, 0.1), _score(0.05, 0.2), _score(0.4, 0.05), _score(0.1, 0.05)]
    m = score_metrics(scores)
    assert m["acc,appc"] == pytest.approx(1 / 5) and m["acc,argmax"] == pytest.approx(4 / 5)
    ci = binomtest(4, 5).proportion_ci(0.95, method="wilson")
    assert m["acc_ci,argmax"] == pytest.approx([ci.low, ci.high], abs=1e-9)
    assert m["p_target"] == pytest.approx(np.mean([0.6, 0.3, 0.05, 0.4, 0.1]))
    assert m["choice_mass"] == pytest.approx(np.mean([0.7, 0.4, 0.25, 0.45, 0.15]))
    assert m["p_target_ci"][0] <= m["p_target"] <= m["p_target_ci"][1] and m["p_target_n"] == 5


def test_intervention_summary_paired_tests_and_flips_by_hand():
    before = [_score(0.3, 0.1), _score(0.3, 0.1), _score(0.3, 0.1), _score(0.1, 0.3), _score(0.2, 0.1)]
    after = [_score(0.1, 0.3), _score(0.1, 0.3), _score(0.35, 0.1), _score(0.3, 0.1), _score(0.2, 0.1)]
    s = intervention_summary(before, after)
    # argmax: before 1,1,1,0,1 ; after 0,0,1,1,1 -> 1 to the target, 2 away, 3 predictions changed
    assert s["flips"] == {"changed": 3, "argmax_to_correct": 1, "argmax_to_wrong": 2}
    mc = s["paired_tests"]["acc,argmax"]
    assert mc["b"] == 1 and mc["c"] == 2  # after right & before wrong, the reverse
    assert mc["p_value"] == pytest.approx(binomtest(1, 3, 0.5).pvalue)
    assert mc["diff"] == pytest.approx(3 / 5 - 4 / 5)
    pb = s["paired_tests"]["p_target"]
    assert pb["diff"] == pytest.approx(np.mean([-0.2, -0.2, 0.05, 0.2, 0.0]))
    assert s["argmax_before"] == pytest.approx(0.8) and s["argmax_after"] == pytest.approx(0.6)
    assert s["before"]["acc,argmax"] == s["argmax_before"]
    assert s["effect"].startswith("3/5 argmax predictions changed (1 to the target, 2 away from it)")
    assert "no effect" not in s["effect"]


def test_the_summary_never_says_no_effect_when_predictions_changed():
    """Regression: the paper's rule read 0% -> 0% while 6/8 predictions changed."""
    before = [_score(0.2, 0.1)] * 4 + [_score(0.1, 0.2)] * 4  # all below 1/2: 0% by the paper's rule
    after = [_score(0.1, 0.2)] * 3 + [_score(0.2, 0.1)] + [_score(0.2, 0.1)] * 3 + [_score(0.1, 0.2)]
    s = intervention_summary(before, after)
    assert s["accuracy_before"] == s["accuracy_after"] == 0.0
    assert s["predictions_changed"] == 6 and s["effect"].startswith("6/8 argmax predictions changed")
    same = intervention_summary(before, before)
    assert same["effect"].startswith("no argmax prediction changed (0/8)")
    assert "P(target) after - before: +0" in same["effect"]  # still gives the change in P(target)


def test_random_control_lists_every_draw():
    sel = intervention_summary([_score(0.2, 0.1)] * 4, [_score(0.4, 0.1)] * 4)
    draws = [intervention_summary([_score(0.2, 0.1)] * 4, [_score(0.2 + d, 0.1)] * 4) for d in (0.0, 0.05, -0.05,
                                                                                                0.3, 0.01)]
    c = random_control(sel, draws)
    r = c["delta_p_target"]["random"]
    assert r["n"] == 5 and r["draws"] == pytest.approx([0.0, 0.05, -0.05, 0.3, 0.01])
    assert r["sd"] == pytest.approx(np.std([0.0, 0.05, -0.05, 0.3, 0.01], ddof=1))
    assert c["delta_p_target"]["selected"] == pytest.approx(0.2)
    assert c["delta_p_target"]["random_draws_at_least_selected"] == 1


def test_error_class_of_the_top_token():
    from whitebox_eval.gar.scoring import error_class

    enc = _enc()  # target Yes (id 10), other choice No (id 11)
    assert [error_class(enc, t) for t in (10, 11, 99)] == ["target", "other_candidate", "off_candidates"]
    # off-format, by its stated definition: no letter or digit, a special token, an article -- no answer at all
    assert [error_class(enc, 99, t) for t in ("\n", " .", "<eos>", "<|endoftext|>", " The", " pet", " 3", " Paris")] == \
        ["off_format"] * 5 + ["off_candidates"] * 3
    assert error_class(enc, 11, "\n") == "other_candidate"  # a candidate's first token is never off-format


def test_error_analysis_counts_app_c_classes_over_generation_errors():
    from whitebox_eval.gar.evaluation import error_analysis

    gen = generate_task_examples("GendersOfPersons/isA,KindsOfThings/kindOf×3", seed=0)[:6]
    cls = generate_task_examples("GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]", seed=0)[:2]
    classes = ["target", "other_candidate", "other_candidate", "off_candidates", "off_candidates", "off_candidates"]
    tokens = [" a", " b", " c", " pet", " pet", " the"]
    recs = {f"{e.task_id}#{e.index}": {"error_class": c, "top_token": t} for e, c, t in zip(gen, classes, tokens)}
    recs.update({f"{e.task_id}#{e.index}": {"error_class": "off_candidates", "top_token": " x"} for e in cls})
    out = error_analysis(gen + cls, recs)  # classification items are not part of App. C's analysis
    # " the" (an article: no answer) is off-format, its own class, not one of the errors (a run written
    # before the class kept it as off_candidates: reclassified from its top token)
    assert out["n_generation"] == 6 and out["n_wrong"] == 5 and out["n_off_format"] == 1 and out["n_errors"] == 4
    assert out["share,off_format"] == pytest.approx(1 / 5)
    assert out["share,class2_wrong_candidate"] == pytest.approx(2 / 4)
    assert out["share,class1or3_off_candidates"] == pytest.approx(2 / 4)
    ci = binomtest(2, 4).proportion_ci(0.95, method="wilson")
    assert out["share_ci,class2_wrong_candidate"] == pytest.approx([ci.low, ci.high], abs=1e-9)
    assert out["off_candidate_tokens"] == [{"token": " pet", "count": 2}]
    assert out["off_format_tokens"] == [{"token": " the", "count": 1}]
    recs[f"{gen[0].task_id}#{gen[0].index}"] = {}
    assert error_analysis(gen, recs) is None  # an old run without error classes


def test_matched_gap_fig4a_by_hand():
    from scipy.stats import permutation_test as sp_perm

    from whitebox_eval.gar.metrics import matched_gap

    easy = generate_task_examples("GendersOfPersons/same,CountriesOfCities/same×3", seed=0)[:4]  # n_r = 0
    hard = generate_task_examples("GendersOfPersons/isA,KindsOfThings/kindOf×3", seed=0)[:3]  # n_r = 2
    assert {e.task.n_r for e in easy} == {0} and {e.task.n_r for e in hard} == {2}
    w = np.array([0.9, 0.8, 0.7, np.nan, 0.2, 0.4, 0.3])
    out = matched_gap(easy + hard, w)
    assert set(out) == {"A"}  # no negative task given
    a = out["A"]
    assert a["matched,easiest"] == pytest.approx(0.8) and a["matched_n,easiest"] == 3  # the NaN is left out
    assert a["matched,hardest"] == pytest.approx(0.3)
    gap = a["paired_tests"]["gap"]
    assert gap["diff"] == pytest.approx(0.5)
    ref = sp_perm(([0.9, 0.8, 0.7], [0.2, 0.4, 0.3]), lambda x, y: np.mean(x) - np.mean(y),
                  permutation_type="independent", n_resamples=np.inf).pvalue
    # 3 vs 3: the exact p is 2/20 = 0.1; the stats module's Monte Carlo p is close to it
    assert ref == pytest.approx(0.1) and gap["p_value"] == pytest.approx(ref, abs=0.03)
