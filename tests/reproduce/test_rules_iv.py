"""The rules' last pieces on synthetic child runs: strata for every pooled statistic kind
(correlations, rates, length bins), the off-format class of a classification of outputs, and
benchmarks/recompute_claims.py recomputing each (and the cluster-bootstrap interval of the
within-position statistic) with its own code."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from whitebox_eval.reproduce import derived

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import recompute_claims as rc  # noqa: E402
from test_checks import _claim  # noqa: E402


def _tokens(seed: int = 0, sequences: int = 30, length: int = 12):
    """Token scores whose correct-minus-wrong gap is +0.05 at every position, positions of unequal shares."""
    rng = np.random.default_rng(seed)
    v, g, seq, pos = [], [], [], []
    for s in range(sequences):
        for i in range(length):
            c = bool(rng.random() < 0.2 + 0.6 * i / length)
            v.append(0.5 - 0.02 * i + 0.05 * c + rng.normal(0, 0.05))
            g.append(c)
            seq.append(f"s{s}")
            pos.append(i)
    return np.array(v), np.array(g), seq, np.array(pos)


def test_recompute_claims_recomputes_the_within_position_cluster_bootstrap_interval():
    v, g, seq, pos = _tokens()
    twin = derived.within_positions(v, g, pos, seq, permutations=1000)
    tokens = {"value": v.tolist(), "correct": g.tolist(), "sequence": seq, "position": pos.tolist()}
    ck = rc.Check()
    rc.check_within_position("w", twin, tokens, ck, np.random.default_rng(7))
    assert not ck.bad and ck.done["within-position cluster-bootstrap SE (Monte Carlo)"] == 1
    assert ck.done["within-position interval lo (Monte Carlo)"] == ck.done["within-position interval hi (Monte Carlo)"] == 1
    # an SE 30% off (far beyond two bootstraps' disagreement) is caught, at both ends of the interval
    off = {**twin, "se": 1.3 * twin["se"], "lo": twin["value"] - 1.96 * 1.3 * twin["se"],
           "hi": twin["value"] + 1.96 * 1.3 * twin["se"]}
    ck = rc.Check()
    rc.check_within_position("w", off, tokens, ck, np.random.default_rng(7))
    assert sum("within-position" in b and ("SE" in b or "interval" in b) for b in ck.bad) == 3


# ------------------------------------------------------------------ rule 6: the off-format class


def _generation(classes: list[tuple[str, str]]) -> list[dict]:
    return [{"task_id": "t", "index": i, "kr": False, "g2c": False, "error_class": c, "top_token": tok}
            for i, (c, tok) in enumerate(classes)]


def test_off_format_outputs_are_their_own_class_never_an_error_class():
    from types import SimpleNamespace

    from whitebox_eval.gar.evaluation import error_analysis
    from whitebox_eval.gar.generator import generate_task_examples
    from whitebox_eval.reproduce import vocabulary

    # 40 wrong candidates, 20 off the candidates (" pet"), 40 off-format ("\n", " the"), 10 right
    rows = _generation([("other_candidate", " b")] * 40 + [("off_candidates", " pet")] * 20
                       + [("off_format", "\n")] * 30 + [("off_format", " the")] * 10 + [("target", " a")] * 10)
    examples = generate_task_examples("GendersOfPersons/isA,KindsOfThings/kindOf×3", seed=0, n_examples=len(rows))
    rows = [{**r, "task_id": e.task_id, "index": e.index} for r, e in zip(rows, examples)]
    analysis = error_analysis(examples, {f"{r['task_id']}#{r['index']}": r for r in rows})
    assert (analysis["n_wrong"], analysis["n_off_format"], analysis["n_errors"]) == (100, 40, 60)
    assert analysis["share,class2_wrong_candidate"] == 40 / 60 and analysis["share,off_format"] == 40 / 100
    study = SimpleNamespace(samples=rows, results={"error_analysis": analysis}, config={}, folder=None)
    share = vocabulary.compute({"derived": "error_shares", "class": "other_candidate"}, study, "gar")
    # folded into the errors, 40/100 would read "class 2 is no majority"; apart, 40/60 of the answers are class 2
    assert share["value"] == 40 / 60 and share["n"] == 60 and len(share["arms"]["a"]["items"]) == 60
    assert share["off_format"]["n"] == 40 and share["off_format"]["of"] == 100
    assert "40 of 100 wrong outputs off-format" in share["source"] and "reclassified" not in share["source"]
    # a child written before the class (off-format folded into off_candidates, its top token kept): its own
    # share is checked as written, then each output reclassified from its top token, and the source says so
    old = [{**r, "error_class": "off_candidates" if r["error_class"] == "off_format" else r["error_class"]} for r in rows]
    written = {"n_errors": 100, "share,class2_wrong_candidate": 0.4, "share,class1or3_off_candidates": 0.6}
    share = vocabulary.compute({"derived": "error_shares", "class": "other_candidate"},
                               SimpleNamespace(samples=old, results={"error_analysis": written}, config={}, folder=None), "gar")
    assert share["value"] == 40 / 60 and share["off_format"]["n"] == 40 and "reclassified" in share["source"]


# ------------------------------------------------------------------ rule 3: strata for every pooled statistic kind


def _formats_child(free, mcq, subject):
    """A 004 child: per-question free-generation and MCQ P(correct), each question's category."""
    from whitebox_eval import stats

    n = len(free)
    samples = [{"id": f"q{i}", "gold": i % 4, "answer": str(100 + i), "subject": s,
                "p_correct": {"free": float(f), "mcq": float(m)}, "p_correct_answered": {"free": float(f)}}
               for i, (f, m, s) in enumerate(zip(free, mcq, subject))]  # every question answered (formats/answered.py)
    r = float(np.corrcoef(free, mcq)[0, 1])
    results = {"pearson_answered,mcq~free": r, "pearson_answered_ci,mcq~free": [r - 0.05, min(1.0, r + 0.05)],
               "pearson_answered_n,mcq~free": n, "pearson_answered_ci_method,mcq~free": "bootstrap", "paired_tests": {}}
    hi, lo = free >= 0.5, free < 0.5
    results["mcq_by_free_answered"] = {"test": stats.permutation_test(mcq[hi], mcq[lo]).as_dict()}
    return results, samples


def _simpson(seed: int = 0):
    """Four categories whose means move free and MCQ P(correct) together; within each, no relation."""
    rng = np.random.default_rng(seed)
    subject = np.repeat(["a", "b", "c", "d"], 50)
    level = np.repeat([0.15, 0.4, 0.6, 0.85], 50)
    free = np.clip(level + rng.normal(0, 0.05, level.size), 0, 1)
    mcq = np.clip(level + rng.normal(0, 0.05, level.size), 0, 1)
    return free, mcq, subject


def test_a_pooled_correlation_that_vanishes_within_strata_is_decided_within_strata():
    from whitebox_eval.reproduce import verdicts

    free, mcq, subject = _simpson()
    out = _claim("004", "weak-correlation-arithmetic", *_formats_child(free, mcq, subject))
    s = out["statistic"]
    # pooled over the categories r ~ 0.97 (contradicting "below 0.5"); within them ~ 0: Fisher z decides
    assert s["pooled"]["value"] > 0.9 and abs(s["value"]) < 0.2 and s["test"].startswith("Pearson r within strata")
    assert out["verdict"] == verdicts.HOLDS and "within subject" in s["source"]
    assert len(s["stratified"]["strata_used"]) == 4
    assert set(out["arms"]["a"]["strata"].values()) == {"a", "b", "c", "d"}  # each item's stratum, in the evidence
    ck = rc.Check()
    rc.check_statistic("r", out, out["arms"], ck, np.random.default_rng(0))
    assert not ck.bad and ck.done["Fisher z within strata"] == 1
    # where the strata agree with the pooled r, the pooled one decides and the twin stands beside it
    rng = np.random.default_rng(1)
    x = rng.random(200)
    agree = _claim("004", "weak-correlation-arithmetic", *_formats_child(x, np.clip(x + rng.normal(0, 0.05, 200), 0, 1), subject))
    assert "pooled" not in agree["statistic"] and agree["statistic"]["stratified"]["value"] > 0.9


def test_a_pooled_gap_between_groups_is_decided_within_strata_from_the_arms():
    from whitebox_eval.reproduce import verdicts

    # categories where the model answers freely carry higher MCQ P(correct); within a category none
    rng = np.random.default_rng(2)
    subject = np.repeat(["easy", "hard"], 100)
    free = np.where(subject == "easy", rng.random(200) < 0.8, rng.random(200) < 0.2).astype(float)
    mcq = np.clip(np.where(subject == "easy", 0.7, 0.3) + rng.normal(0, 0.05, 200), 0, 1)
    out = _claim("004", "partitions-distinct-triviaqa", *_formats_child(free, mcq, subject))
    s = out["statistic"]
    assert s["pooled"]["p_value"] < 0.001 and s["pooled"]["value"] > 0.2  # pooled: "distinct"
    assert s["test"] == "permutation within strata (CMH-weighted difference)" and s["p_value"] > 0.05
    assert out["verdict"] == verdicts.NOT_SHOWN
    ck = rc.Check()
    rc.check_statistic("g", out, out["arms"], ck, np.random.default_rng(0))
    assert not ck.bad and ck.done["stratified difference"] == 1 and ck.done["stratified SE"] == 1


def test_a_paired_statistic_over_strata_needs_no_twin():
    from whitebox_eval.reproduce import strata

    arms = {"a": {"items": {"q0": 1.0, "q1": 0.0}}, "b": {"items": {"q0": 0.0, "q1": 0.0}}}
    out = strata.stratify({"value": 0.5, "test": "mcnemar_exact"}, {"field": "subject"}, arms,
                          [{"id": "q0", "subject": "x"}, {"id": "q1", "subject": "y"}])
    assert "stratified" not in out and "paired on the same items" in out["strata_note"]
    assert arms["a"]["strata"] == {"q0": "x", "q1": "y"}


def test_token_statistics_pooled_over_lengths_are_stratified_by_length_bin_too():
    # long sequences score lower and hold more wrong tokens: at one position, short and long sequences mix
    rng = np.random.default_rng(4)
    samples = []
    for k in range(60):
        n = 12 if k % 2 else 40
        wrong = rng.random(8) < (0.15 if n == 12 else 0.7)
        score = (0.6 if n == 12 else 0.3) + rng.normal(0, 0.05, 8)
        samples.append({"id": f"s{k}", "stage": "ft/ood", "input_length": n, "rollout_scores": score.tolist(),
                        "correct": (~wrong).tolist()})
    by_position = derived.clustered(samples, {"stage": "ft/ood"})["stratified"]
    both = derived.clustered(samples, {"stage": "ft/ood", "length": "input_length"})
    twin = both["stratified"]
    assert by_position["p_value"] < 0.01 and by_position["value"] > 0.1  # position alone: confounded by length
    assert twin["strata"] == "token position x length bin" and twin["p_value"] > 0.05 and abs(twin["value"]) < 0.05
    assert set(both["observations"]["length_bin"]) == {"12-12", "40-40"}  # each token's length bin, in the evidence
    ck = rc.Check()
    rc.check_within_position("t", twin, both["observations"], ck, np.random.default_rng(5))
    assert not ck.bad and ck.done["difference within token position"] == 1
