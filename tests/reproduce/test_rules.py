"""The rules every claim gets by construction, one test per rule, on synthetic child runs read
through the papers' own claims: an arm at chance outside paper 000, a contradiction a control
explains, a failed manipulation, a reliability warning, an equivalence on a measure that cannot show
its margin, a pooled effect that vanishes within strata, a random-draw control with too few draws."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest, ttest_1samp

from whitebox_eval import stats
from whitebox_eval.reproduce import chance, verdicts

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_checks import _claim, _gar, _kinds  # noqa: E402


# ------------------------------------------------------------------ rule 1: uninformed levels


def _formats(free: np.ndarray, mcq: np.ndarray, answers: list[str], gold: list[int], k: int = 20) -> tuple[dict, list]:
    """A 004 child: per question ``k`` free generations, round(free x k) of them the answer, the rest a
    wrong one (no off-format generation), and its MCQ P(correct)."""
    right = [int(round(float(f) * k)) for f in free]
    samples = [{"id": f"q{i}", "gold": g, "answer": a, "mcq": {"letter_mass": 1.0},
                "p_correct": {"free": r / k, "mcq": float(m)}, "generations": {"free": [f" {a}"] * r + [" 7"] * (k - r)}}
               for i, (r, m, a, g) in enumerate(zip(right, mcq, answers, gold))]
    results: dict[str, Any] = {"paired_tests": {}}
    stats.add_paired(results, "free_vs_mcq", stats.paired_bootstrap(np.array(right) / k, mcq))
    return results, samples


def test_an_mcq_arm_at_its_letter_floor_cannot_decide_a_comparison_with_free_generation():
    # 004 as the committed cpu run saw it: MCQ P(correct) renormalised over 4 letters sits at 0.25 on
    # every item (a quarter built into the format), free generation at 0.05: "significantly" MCQ > free
    rng = np.random.default_rng(0)
    n = 40
    mcq = np.clip(0.25 + rng.normal(0, 0.01, n), 0, 1)
    free = np.where(np.arange(n) < 2, 1.0, 0.0)
    answers, gold = [str(100 + i) for i in range(n)], [i % 4 for i in range(n)]
    results, samples = _formats(free, mcq, answers, gold)
    out = _claim("004", "free-beats-mcq-arithmetic", results, samples)
    assert out["statistical_verdict"] == verdicts.CONTRADICTED  # the difference favours the MCQ arm ...
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "at chance"  # ... which is at 1/4
    ch = out["rules"]["chance"]
    # holds and not shown need the arm the claim favours (free), contradicted the one the difference favours
    assert ch["needed"] == ["a"] and ch["needed_if_contradicted"] == ["b"]
    assert ch["arms"]["b"]["level"] == pytest.approx(0.25)
    assert ch["arms"]["b"]["uniform"] == pytest.approx(0.25) and ch["arms"]["b"]["constant"] == pytest.approx(0.25)
    # a mean against a mean-defined level: a one-sample t-test of the mean, by hand with scipy
    assert ch["arms"]["b"]["p_value"] == pytest.approx(ttest_1samp(mcq, 0.25, alternative="greater").pvalue)
    assert ch["arms"]["b"]["test"] == "one-sample t-test of the mean"
    # free text has no options to guess from: its level is the best constant answer, 1/40 here
    assert ch["arms"]["a"]["level"] == pytest.approx(1 / n) and ch["arms"]["a"]["uniform"] == 0.0
    # a real MCQ signal (0.9 on every item) lifts the arm off its floor: the contradiction stands
    results, samples = _formats(free, np.full(n, 0.9), answers, gold)
    assert _claim("004", "free-beats-mcq-arithmetic", results, samples)["verdict"] == verdicts.CONTRADICTED


def test_levels_take_the_better_of_a_constant_answer_and_a_uniform_guess():
    # balanced Yes/No: constant 1/2 = uniform 1/2; 3 candidates with gold always the first: constant 1
    yes_no = {f"i{i}": [2, "Yes" if i % 2 else "No", i % 2] for i in range(10)}
    assert chance.levels(yes_no, sorted(yes_no))["level"] == pytest.approx(0.5)
    first = {f"i{i}": [3, f"name{i}", 0] for i in range(9)}
    lv = chance.levels(first, sorted(first))
    assert lv["uniform"] == pytest.approx(1 / 3) and lv["constant"] == 1.0 and lv["level"] == 1.0
    free = {f"i{i}": [None, "42" if i < 3 else str(i), None] for i in range(12)}
    assert chance.levels(free, sorted(free)) == {"constant": 0.25, "constant_answer": "always '42'", "uniform": 0.0,
                                                 "level": 0.25}


def _gar_eval(gen_correct: list[int], cls_correct: list[int], tasks_gen: list[str], tasks_cls: list[str]) -> list:
    rows = []
    for i, (c, t) in enumerate(zip(gen_correct, tasks_gen)):
        rows.append({"id": f"g{i}", "task_id": t, "g2c": False, "kr": False, "negate": False, "n_r": 0,
                     "syntactic": "none", "correct": bool(c), "alternatives": ["x", "y", "z"], "target": "xyz"[i % 3]})
    for i, (c, t) in enumerate(zip(cls_correct, tasks_cls)):
        rows.append({"id": f"c{i}", "task_id": t, "g2c": True, "kr": False, "negate": False, "n_r": 0,
                     "syntactic": "none", "correct": bool(c), "alternatives": ["Yes", "No"],
                     "target": "Yes" if i % 2 else "No"})
    return rows


def test_a_group_gap_between_two_chance_levels_is_uninformative_at_chance():
    # 002 "generation is harder": generation at 1/3 over three candidates, classification at 1/2 on a
    # balanced Yes/No set -- the gap is the two formats' floors, not the model
    n = 300
    gen = [1 if i % 3 == 0 else 0 for i in range(n)]
    cls = [1 if i % 2 == 0 else 0 for i in range(n)]
    tasks = [f"T{i % 5}" for i in range(n)]
    samples = _gar_eval(gen, cls, tasks, [f"T{i % 5} [g2c]" for i in range(n)])
    out = _claim("002", "generation-harder-than-classification", {}, samples)
    assert out["statistical_verdict"] == verdicts.HOLDS  # -17 pp, permutation p < 0.001
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "at chance"
    assert out["rules"]["chance"]["needed"] == ["b"] and out["rules"]["chance"]["arms"]["b"]["level"] == 0.5


# ------------------------------------------------------------------ rule 6: strata


def test_a_pooled_gap_that_vanishes_within_strata_is_decided_within_strata():
    # Simpson: task A (easy) has many generation items, task B (hard) many classification items; inside
    # each task generation and classification score the same. Pooled, generation "is easier".
    rows = []
    spec = [("A", False, 200, 0.9), ("A", True, 20, 0.9), ("B", False, 20, 0.6), ("B", True, 200, 0.6)]
    rng = np.random.default_rng(1)
    for task, g2c, n, acc in spec:
        k = int(round(acc * n))
        correct = rng.permutation([1] * k + [0] * (n - k))
        for i, c in enumerate(correct):
            rows.append({"id": f"{task}{g2c}{i}", "task_id": f"{task} [g2c]" if g2c else task, "g2c": g2c, "kr": False,
                         "negate": False, "n_r": 0, "syntactic": "none", "correct": bool(c),
                         "alternatives": ["Yes", "No"] if g2c else [f"a{i}", f"b{i}", f"c{i}", f"d{i}", f"e{i}"],
                         "target": ("Yes" if i % 2 else "No") if g2c else f"a{i}"})
    out = _claim("002", "generation-harder-than-classification", {}, rows)
    pooled = out["statistic"]["pooled"]
    assert pooled["value"] > 0.2 and pooled["p_value"] < 0.05  # pooled: generation 27 points *easier*
    s = out["statistic"]
    assert abs(s["value"]) < 0.02 and s["p_value"] > 0.05 and "within task_id" in s["source"]
    assert out["verdict"] == verdicts.NOT_SHOWN  # within tasks: no gap either way
    used = out["statistic"]["stratified"]["strata_used"]
    assert set(used) == {"A", "B"} and used["A"][:2] == [200, 20]


# ------------------------------------------------------------------ rule 2: controls and warnings


def test_a_contradiction_the_opposite_edit_explains_is_uninformative():
    # 002's True/False edit drops accuracy; the inverse edit, meant to move the other way, drops it too
    n = 60
    before = np.arange(n) < 40
    broken = np.arange(n) < 5
    results, samples = _gar(broken, before, [before.copy() for _ in range(20)], broken)
    out = _claim("002", "true-false-intervention-raises", results, samples)
    assert out["statistical_verdict"] == verdicts.CONTRADICTED
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "control explains"
    assert "opposite_edit explains" in out["reason"]


def test_a_head_selection_the_child_marks_unreliable_is_a_failed_precondition():
    n = 60
    before, after = np.arange(n) < 20, np.arange(n) < 50
    results, samples = _gar(after, before, [before.copy() for _ in range(20)], before)
    results["selection"] = {"reliable": False, "warnings": ["median KL 0.00035 nats (< 0.001)"]}
    out = _claim("002", "true-false-intervention-raises", results, samples)
    assert out["statistical_verdict"] == verdicts.HOLDS and out["verdict"] == verdicts.UNINFORMATIVE
    assert out["qualifier"] == "precondition failed" and "0.00035" in out["reason"]


# ------------------------------------------------------------------ rule 3: antecedents


def _contamination(gsm_b: int, gsm_c: int, mui_diff: float) -> dict[str, Any]:
    n = 48
    x = np.zeros(n, bool)
    y = np.zeros(n, bool)
    x[:gsm_b] = True  # right after, wrong before
    y[gsm_b:gsm_b + gsm_c] = True
    results: dict[str, Any] = {"paired_tests": {}}
    stats.add_paired(results, "accuracy,gsm8k", stats.mcnemar(x, y))
    stats.add_proportion(results, "accuracy,gsm8k,final", x)
    stats.add_proportion(results, "accuracy,gsm8k,base", y)
    results["paired_tests"]["mui,gsm8k"] = {"diff": mui_diff, "lo": mui_diff - 0.001, "hi": mui_diff + 0.001,
                                            "p_value": 0.001, "n": n, "test": "jackknife"}
    return results


def test_a_contamination_claim_without_contamination_is_uninformative_manipulation_failed():
    # GSM8K accuracy 1/48 -> 1/48 after training on those items, yet MUI moved "significantly"
    out = _claim("001", "contamination-raises-mui-gsm8k", _contamination(0, 0, -0.002))
    assert out["statistical_verdict"] == verdicts.CONTRADICTED
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "manipulation failed"
    assert "GSM8K accuracy" in out["reason"] and "not significantly up" in out["reason"]
    # contamination that took: 15 items learned, none lost -- the MUI claim is read
    assert _claim("001", "contamination-raises-mui-gsm8k", _contamination(15, 0, 0.002))["verdict"] == verdicts.HOLDS
    # the accuracy claim is the check itself: it is not conditional on itself
    acc = _claim("001", "contamination-raises-accuracy-gsm8k", _contamination(1, 1, 0.0))
    assert acc["rules"]["manipulation"] == [] and acc["verdict"] == verdicts.NOT_SHOWN


def test_an_edit_that_drains_the_choice_mass_fails_its_manipulation_check():
    n = 60
    before, after = np.arange(n) < 20, np.arange(n) < 50
    results, samples = _gar(after, before, [before.copy() for _ in range(20)], before)
    results["interventions"]["true_false"]["after"]["choice_mass"] = 0.43  # Gemma's 0.98 -> 0.43
    out = _claim("002", "true-false-intervention-raises", results, samples)
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "manipulation failed"
    assert "0.43" in out["reason"] and "off the candidates" in out["reason"]
    # the inverse edit's claim reads its own intervention's mass (0.9): not this one
    inv = _claim("002", "inverse-intervention-lowers", results, samples)
    assert [m["applies"] if "applies" in m else m["passed"] for m in inv["rules"]["manipulation"]] == [True]


# ------------------------------------------------------------------ rule 5: sensitivity


def test_an_equivalence_on_a_measure_that_cannot_show_the_margin_is_insensitive():
    # swapping Q/A changes nothing (equivalence holds by TOST), but the positive control -- the
    # generation/classification gap -- is itself only 2 points: this n and measure show no 10-point gap
    n = 1200
    rows = []
    for i in range(n):
        swap = i % 2 == 0
        rows.append({"id": f"s{i}", "task_id": "T (swapQA,swapKV)" if swap else "T", "g2c": i % 4 < 2, "kr": False,
                     "negate": False, "n_r": 0, "syntactic": "swapQA,swapKV" if swap else "none",
                     "correct": bool((i // 4) % 5 < 4 if i % 4 < 2 else (i // 4) % 50 < 39),
                     "alternatives": ["Yes", "No"] if i % 4 < 2 else ["p", "q", "r", "s", "t", "u", "v", "w"],
                     "target": ("Yes" if (i // 4) % 2 else "No") if i % 4 < 2 else "p"})
    out = _claim("002", "syntactic-variation-small", {}, rows)
    assert out["statistical_verdict"] == verdicts.HOLDS
    sens = out["rules"]["sensitivity"]
    assert not sens["reaches"] and abs(sens["value"]) < 0.1
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "insensitive"


# ------------------------------------------------------------------ rule 7: draws


def test_five_random_draws_are_descriptive_and_twenty_are_a_test():
    from whitebox_eval.reproduce.draw_controls import draw_rank

    few = draw_rank(0.8, [0.5] * 5, "greater")
    assert few["descriptive"] and not few["explains"] and few["p_value"] == pytest.approx(1 / 6)
    many = draw_rank(0.8, [0.5] * 20, "greater")
    assert not many["descriptive"] and not many["explains"] and many["p_value"] == pytest.approx(1 / 21)
    tied = draw_rank(0.8, [0.5] * 19 + [0.8], "greater")
    assert tied["explains"] and tied["p_value"] == pytest.approx(2 / 21)
    # in a verdict: a probe beyond its 5 draws still holds, but its specificity is untested
    probe = {"acc": 0.70, "random_heads": stats.draws([0.6, 0.62, 0.61, 0.6, 0.63]).as_dict(), "paired_tests": {}}
    stats.add_paired(probe, "probe_vs_majority", stats.mcnemar(np.arange(200) < 140, np.arange(200) < 100))
    out = _claim("002", "truth-probe-snli", {"probes": {"snli.jsonl": probe}})
    assert out["verdict"] == verdicts.HOLDS and any("specificity untested" in c for c in out["caveats"])
    assert _kinds(out, "controls")["random_draws"]["descriptive"]


def test_stability_across_lengths_reads_the_chosen_reinforcement_stage():
    # 003's headline: reinforced exact accuracy 0.8 on the shorter half, 0.1 on the longer; the
    # positive control (OOD vs ID without intervention) shows the measure registers such gaps
    setting = "key-top10-C1-standard"
    samples = [{"id": f"reinforce/{setting}/{i}", "stage": f"reinforce/{setting}", "input_length": 10 + i,
                "exact": (i < 20 and i % 5 != 0) or (i >= 20 and i % 10 == 0), "target": f"t{i}"} for i in range(40)]
    samples += [{"id": f"base/{sp}/{i}", "stage": f"base/{sp}", "exact": sp == "id" or i < 2, "target": f"t{i}"}
                for sp in ("id", "ood") for i in range(40)]
    results = {"reinforcement": {"selection": {"chosen": {"setting": setting}}}, "phase": "base"}  # as span writes it
    out = _claim("003", "reinforcement-stable-across-lengths-string-reversal", results, samples)
    s = out["statistic"]
    assert s["value"] == pytest.approx(0.1 - 0.8) and s["test"] == "permutation"
    assert out["rules"]["sensitivity"]["reaches"]  # -95 points OOD vs ID
    assert out["verdict"] == verdicts.CONTRADICTED  # the whole interval beyond -15 points
    # a contradicted claim of no difference has found a difference: it needs the arm that difference
    # favours above its level (the shorter half, 16/20 against a constant answer's 1/20), not both --
    # the longer half sitting at its floor is how stability fails
    ch = out["rules"]["chance"]
    assert ch["needed"] == ["a", "b"] and ch["needed_if_contradicted"] == ["b"]
    assert ch["arms"]["a"]["above"] is False and ch["arms"]["b"]["above"] is True
    # every target the same string: always answering it scores 100%, so the shorter half's 80% shows nothing
    same = [{**s, "target": "x"} for s in samples]
    out = _claim("003", "reinforcement-stable-across-lengths-string-reversal", results, same)
    assert out["statistical_verdict"] == verdicts.CONTRADICTED
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "at chance"


def test_an_edit_read_against_a_constant_answer_is_at_chance():
    # SmolLM2 at the cpu scale: "No" to every report item (50% on a balanced Yes/No set); the strong
    # edit drops accuracy to 13%. The edited stages carry no label: their level is read from the
    # unedited stage's rows of the same items
    n = 60
    before = np.arange(n) % 2 == 1  # right exactly on the items whose label is "No"
    after = np.arange(n) < 8
    results, samples = _gar(after, before, [before.copy() for _ in range(20)], before)
    out = _claim("002", "true-false-intervention-raises", results, samples)
    assert out["statistical_verdict"] == verdicts.CONTRADICTED
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "at chance"
    ch = out["rules"]["chance"]
    assert ch["needed_if_contradicted"] == ["b"] and ch["arms"]["b"]["level"] == 0.5 and ch["arms"]["a"]["level"] == 0.5
    assert ch["arms"]["b"]["p_value"] == pytest.approx(binomtest(30, 60, 0.5, alternative="greater").pvalue)
    # a model that reads the question (before 45/60): the same drop is a contradiction
    results, samples = _gar(after, np.arange(n) < 45, [np.arange(n) < 45 for _ in range(20)], np.arange(n) < 45)
    assert _claim("002", "true-false-intervention-raises", results, samples)["verdict"] == verdicts.CONTRADICTED


def test_a_group_too_small_to_compare_is_a_floor_naming_its_failed_precondition():
    # Gemma's arithmetic at the cpu scale: 1 correct response of 48, so the child refuses the test
    results = {"correct_vs_incorrect": {"refused": "fewer than 2 responses in a group", "n_correct": 1,
                                        "n_incorrect": 47}}
    out = _claim("001", "mui-correct-like-incorrect-arithmetic", results)
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "floor"
    assert "precondition enough_per_group failed" in out["reason"] and "correct 1, incorrect 47" in out["reason"]


def test_a_measure_without_answers_gets_no_uninformed_level_and_no_caveat_about_one():
    # 001's masking: the answer's log-probability under the key-neuron mask against 20 random masks
    rng = np.random.default_rng(2)
    key = -5.0 + rng.normal(0, 0.3, 32)
    draws = [-0.3 + rng.normal(0, 0.3, 32) for _ in range(20)]
    rows = [{"task": "arithmetic-gen", "k": 4, "masking": "key", "item_answer_logprob": key.tolist()}]
    rows += [{"task": "arithmetic-gen", "k": 4, "masking": "random", "draw": d, "item_answer_logprob": x.tolist()}
             for d, x in enumerate(draws)]
    results = {"curves": {"arithmetic-gen": {"key": [{"answer_logprob": float(key.mean())}], "random": [
        {"answer_logprob,draws": {"draws": [float(x.mean()) for x in draws]}}]}}}
    out = _claim("001", "masking-key-below-random-logprob", results, rows)
    assert out["verdict"] == verdicts.HOLDS
    ch = out["rules"]["chance"]["arms"]
    assert ch["a"]["level"] is None and ch["a"]["applies"] is False and "without answers" in ch["a"]["text"]
    assert not any("uninformed level" in c for c in out["caveats"])
