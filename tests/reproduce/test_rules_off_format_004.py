"""Rule 6 for paper 004 on synthetic formats children: an off-format free generation (no answer at
all, formats/answers.py) is its own class, never folded into "wrong"; a child written before the class
is reclassified from its generations; benchmarks/recompute_claims.py recomputes the new numbers from
each question's counts."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from whitebox_eval import stats
from whitebox_eval.reproduce import verdicts

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import recompute_claims as rc  # noqa: E402
from test_checks import _claim  # noqa: E402

CITIES = ["Paris", "Lyon", "Nice", "Lille", "Metz", "Caen", "Brest", "Dijon", "Reims", "Tours"]


def _child(gens: list[list[str]], mcq: list[float], classes: bool = True):
    """A TriviaQA formats child: each question's free generations, its MCQ P(correct) (renormalised)."""
    from whitebox_eval.formats.answers import classes_of
    from whitebox_eval.formats.metrics import exact_match

    samples = []
    for i, (g, m) in enumerate(zip(gens, mcq)):
        gold = [f"{CITIES[i % 10]} {i}", f"the {CITIES[i % 10]} {i}"]
        g = [t.replace("{gold}", gold[0]) for t in g]
        s = {"id": f"q{i}", "subject": None, "gold": i % 4, "answer": gold,
             "mcq": {"p_renorm": m, "p_raw": 0.9 * m, "letter_mass": 0.9, "pred": 0},
             "p_correct": {"mcq": m, "free": float(np.mean([exact_match(t, gold, truncate_gold=True) for t in g])),
                           "free_options": 0.5},
             "generations": {"free": g, "free_options": [f" {gold[0]}", " Lyon"]}}
        if classes:
            s["classes"] = {f: classes_of(s, f, "text") for f in ("free", "free_options")}
        samples.append(s)
    return {"paired_tests": {}}, samples


def _gens(seed: int = 0) -> tuple[list[list[str]], list[float]]:
    """40 questions: the model answers right 2 or 1 times in 5 and otherwise mostly writes no answer
    (" The", "", " I don't know"); its MCQ P(correct) is about 0.5."""
    rng = np.random.default_rng(seed)
    off = [" The", "", " I don't know"]
    gens = [[" {gold}", " {gold}"] + off if i < 30 else [" {gold}", " Lyon"] + off for i in range(40)]
    return gens, list(np.clip(0.5 + rng.normal(0, 0.05, 40), 0, 1))


def test_folding_off_format_into_wrong_would_decide_the_claim_the_class_apart_does_not():
    gens, mcq = _gens()
    results, samples = _child(gens, mcq)
    free = np.array([s["p_correct"]["free"] for s in samples])
    folded = stats.paired_bootstrap(free, np.array(mcq))
    # folded: free P(correct) 0.35 of all samples, below the MCQ's 0.5 -- "MCQ beats free" would hold
    assert folded.diff < -0.1 and folded.p_value < 0.001
    out = _claim("004", "mcq-beats-free-triviaqa", results, samples)
    s = out["statistic"]
    # apart: among its answers the model is right 35 of 40 times (0.875), above the MCQ: contradicted
    assert s["value"] == pytest.approx(np.mean([1.0] * 30 + [0.5] * 10) - np.mean(mcq))
    assert s["value"] > 0.3 and out["verdict"] == verdicts.CONTRADICTED
    assert out["arms"]["a"]["value"] == pytest.approx(0.875) and out["arms"]["a"]["n"] == 40
    off = s["off_format"]
    assert (off["n"], off["of"], off["questions_without_answer"]) == (120, 200, 0)
    assert off["value"] == pytest.approx(0.6) and off["lo"] < 0.6 < off["hi"]
    assert off["mcq_mass_outside_letters"] == pytest.approx(0.1)
    assert "120 of 200 generations off-format, 60.0% [" in s["source"] and "reclassified" not in s["source"]
    # recompute_claims: each question's P(correct) among its answers, the share and its Wilson interval
    ck = rc.Check()
    rc.check_off_format("t", out, out["arms"], s["observations"], ck)
    rc.check_statistic("t", out, out["arms"], ck, np.random.default_rng(0))
    assert not ck.bad and ck.done["P(correct) among the answers, per question"] == 40
    assert ck.done["off-format Wilson lo"] == 1 and ck.done["paired bootstrap p (Monte Carlo)"] == 1
    tampered = {**out["arms"], "a": {**out["arms"]["a"], "items": {**out["arms"]["a"]["items"], "q0": 0.4}}}
    ck = rc.Check()
    rc.check_off_format("t", out, tampered, s["observations"], ck)
    assert len(ck.bad) == 1 and "P(correct) among the answers, per question" in ck.bad[0]



def test_the_mcq_top_token_class_is_read_from_what_an_old_run_keeps_or_said_not_recorded():
    """Questions whose MCQ top next token is no letter: each sample's ``top_is_letter``; a run written
    before it (no such key) is read from the letters' mass where no other token can be on top, else
    the block says "not recorded by this run" -- never a silent 0."""
    from whitebox_eval.formats.read_back import NOT_RECORDED

    gens, mcq = _gens()
    results, samples = _child(gens, mcq)  # written before top_is_letter: letters' mass 0.9, P(gold) 0.45 or so
    assert not any("top_is_letter" in s["mcq"] for s in samples)
    block = lambda rows: _claim("004", "mcq-beats-free-triviaqa", results, rows)["statistic"]["off_format"]  # noqa: E731
    assert block(samples)["mcq_top_token_no_letter"] == 0  # 0.9 / 4 on the letters' top outweighs the 0.1 outside
    # one question whose letters hold 0.3: a token outside them (0.7 in all) may be on top
    spread = [{**s, "mcq": {**s["mcq"], "letter_mass": 0.3, "p_raw": 0.1}} if i == 3 else s for i, s in enumerate(samples)]
    got = block(spread)["mcq_top_token_no_letter"]
    assert isinstance(got, str) and got.startswith(NOT_RECORDED) and "1 of 40" in got
    # a run that keeps the top token: counted, that question too
    kept = [{**s, "mcq": {**s["mcq"], "top_is_letter": i != 3}} for i, s in enumerate(spread)]
    assert block(kept)["mcq_top_token_no_letter"] == 1

def test_a_question_without_any_answer_is_left_out_and_counted():
    gens, mcq = _gens()
    gens[0] = ["", " The", " the.", " I do not know", " ?"]
    out = _claim("004", "mcq-beats-free-triviaqa", *_child(gens, mcq))
    assert out["statistic"]["off_format"]["questions_without_answer"] == 1
    assert out["arms"]["a"]["n"] == out["arms"]["b"]["n"] == out["statistic"]["n"] == 39
    assert "q0" not in out["arms"]["b"]["items"]


def test_a_child_written_before_the_class_is_reclassified_from_its_generations():
    gens, mcq = _gens()
    new = _claim("004", "mcq-beats-free-triviaqa", *_child(gens, mcq))
    old = _claim("004", "mcq-beats-free-triviaqa", *_child(gens, mcq, classes=False))
    assert "reclassified from their texts" in old["statistic"]["source"]
    assert old["statistic"]["value"] == new["statistic"]["value"] and old["verdict"] == new["verdict"]
    assert old["statistic"]["off_format"]["n"] == 120
    # a child whose written P(correct) is not its generations' share right is not read
    results, samples = _child(gens, mcq, classes=False)
    samples[3]["p_correct"]["free"] = 0.9
    broken = _claim("004", "mcq-beats-free-triviaqa", results, samples)
    assert "statistic" not in broken and "q3" in str(broken)


def _old_run(tmp_path, gens, mcq, subjects=None):
    """A finished formats run folder written before the class (no classes, no answered keys)."""
    from whitebox_eval.runs.folder import RunFolder

    results, samples = _child(gens, mcq, classes=False)
    for i, s in enumerate(samples):
        s["subject"] = (subjects or ["s"])[i % len(subjects or ["s"])]
    run = RunFolder.create(tmp_path, {"suite": "formats", "extract": "paper"}, run_id="old")
    run.append_samples(samples)
    run.save_results({"n_items": len(samples), "extract": "paper", "p_correct,free": 0.123, **results})
    return run.path


def test_an_old_run_read_back_gains_the_answered_keys_and_keeps_every_written_value(tmp_path):
    from whitebox_eval.formats.answered import PARTITION, PEARSON
    from whitebox_eval.suites import read

    gens, mcq = _gens()
    path = _old_run(tmp_path, gens, mcq)
    before = {p.name: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    study = read(path)
    r = study.results
    assert r["p_correct,free"] == 0.123 and r["paired_tests"] == {}  # written values stay, even a wrong one
    assert r["off_format,free"] == pytest.approx(0.6) and r["n_unanswered,free"] == 0
    assert r["p_correct_answered,free"] == pytest.approx(0.875)
    assert study.samples[0]["p_correct_answered"]["free"] == pytest.approx(1.0)
    assert study.samples[35]["p_correct_answered"]["free"] == pytest.approx(0.5)
    assert PEARSON in r and r[PARTITION]["partitions"]["free>=0.5"]["n"] == 40
    assert {p.name: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before  # the folder untouched


def _spread(seed: int = 1):
    """40 questions answered right k of 2 times (k = 0, 1, 2) beside 3 off-format generations each;
    the MCQ P(correct) rises with k."""
    rng = np.random.default_rng(seed)
    off = [" The", "", " I don't know"]
    ks = [i % 3 for i in range(40)]
    gens = [[" {gold}"] * k + [" Lyon"] * (2 - k) + off for k in ks]
    return gens, [float(np.clip(0.3 + 0.2 * k + rng.normal(0, 0.05), 0, 1)) for k in ks]


def test_the_partition_claims_split_by_p_correct_among_the_answers(tmp_path):
    from whitebox_eval.suites import read

    gens, mcq = _spread()
    study = read(_old_run(tmp_path, gens, mcq, ["a", "b"]))
    folded = np.array([s["p_correct"]["free"] for s in study.samples])
    assert (folded >= 0.5).sum() == 0  # of all 5 samples no question reaches 0.5: the paper's partition is empty
    out = _claim("004", "partitions-distinct-triviaqa", study.results, study.samples)
    a, b = out["arms"]["a"], out["arms"]["b"]
    # among the answers, k = 1 and 2 (0.5, 1.0) are answered freely, k = 0 is not
    assert (a["n"], b["n"]) == (26, 14)
    assert out["statistic"]["value"] == pytest.approx(a["value"] - b["value"]) and out["statistic"]["value"] > 0.2
    assert "mcq_by_free_answered" in out["statistic"]["source"]
    assert out["verdict"] == verdicts.HOLDS and out["statistic"]["stratified"]["p_value"] < 0.05
    ck = rc.Check()
    rc.check_statistic("t", out, out["arms"], ck, np.random.default_rng(0))
    assert not ck.bad and ck.done["difference of means"] == ck.done["stratified difference"] == 1


def test_the_correlation_claim_reads_r_among_the_answers_and_leaves_out_questions_without_one(tmp_path):
    from whitebox_eval.suites import read

    gens, mcq = _spread()
    gens[0] = ["", " The", " I do not know", " ?", " the."]
    study = read(_old_run(tmp_path, gens, mcq, ["a", "b"]))
    out = _claim("004", "weak-correlation-arithmetic", study.results, study.samples)
    x = {s["id"]: s["p_correct_answered"]["free"] for s in study.samples if s["p_correct_answered"]["free"] is not None}
    ids = sorted(x)
    r = np.corrcoef([x[i] for i in ids], [mcq[int(i[1:])] for i in ids])[0, 1]
    assert len(ids) == 39 and study.results["n_unanswered,free"] == 1 and "q0" not in out["arms"]["a"]["items"]
    assert out["statistic"].get("pooled", out["statistic"])["value"] == pytest.approx(r)
    assert r > 0.9 and out["verdict"] == verdicts.CONTRADICTED  # strongly correlated: not "weak"
    ck = rc.Check()
    rc.check_statistic("t", out, out["arms"], ck, np.random.default_rng(0))
    assert not ck.bad and ck.done["Pearson r"] == ck.done["Fisher z within strata"] == 1
