"""Rule 6 for paper 001 on synthetic mui children: a response from which the check reads no answer
(off-format, mui/answer_classes.py) is its own class, never folded into "incorrect"; 001's
correct-vs-incorrect claims compare right against wrong; a child written before the class is read
back from its texts and key sets; benchmarks/recompute_claims.py recomputes the cells from each
response's class and key units."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from whitebox_eval.mui.answer_classes import class_results
from whitebox_eval.mui.statistics import correct_vs_incorrect
from whitebox_eval.mui.utilization import KeySets
from whitebox_eval.reproduce import assemble, verdicts

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import recompute_claims as rc  # noqa: E402
from test_checks import MODEL, _claim, _Plan  # noqa: E402

CLAIM = "mui-correct-like-incorrect-arithmetic"
ARITH = {"suite": "mui", "task": "arithmetic-gen", "seed": 0,
         "task_spec": {"name": "arithmetic-gen", "path": None, "categories": []}}
TEXTS = {"right": "1 + 9 = 10", "wrong": "1 + 9 = 11", "off_format": "Styloseness"}


def _responses(seed: int = 0):
    """60 responses over 4 layers x 100 units: 20 right and 20 wrong, each 10 units from the same pool
    of 400; 20 off-format (no number), each 1 unit of a pool of 3 -- alike in MUI where they answer."""
    rng = np.random.default_rng(seed)
    cls = np.array(["right"] * 20 + ["wrong"] * 20 + ["off_format"] * 20)
    ks = KeySets(4, 100, "neuron")
    for i, c in enumerate(cls):
        flat = np.sort(rng.choice(3, 1) if c == "off_format" else rng.choice(400, 10, replace=False))
        ks.add_indices(flat // 100, flat % 100, f"s{i}")
    samples = [{"id": f"s{i}", "gold": "10", "prompt": "Question: What is the value of 1 + 9?\nAnswer:",
                "response": TEXTS[c], "correct": c == "right", "class": str(c)} for i, c in enumerate(cls)]
    return ks, cls, samples


def _results(ks, cls, fold: bool = False) -> dict:
    """A child's results: the class apart, or (``fold``) as a child before the class wrote them."""
    if fold:
        t = correct_vs_incorrect(ks, cls == "right", seed=0, permutations=300)
        return {"correct_vs_incorrect": {k: v for k, v in t.items() if k not in ("n_off_format", "groups")}}
    return {"correct_vs_incorrect": correct_vs_incorrect(ks, cls == "right", off_format=cls == "off_format", seed=0,
                                                         permutations=300), **class_results(list(cls))}


def test_folding_off_format_into_incorrect_would_contradict_the_claim_the_class_apart_does_not():
    ks, cls, samples = _responses()
    # folded: the off-format responses' few units pull the incorrect group's rarefied MUI down
    folded_cls = np.where(cls == "off_format", "wrong", cls)
    folded = _claim("001", CLAIM, _results(ks, folded_cls), [{**s, "class": str(c)} for s, c in zip(samples, folded_cls)])
    assert folded["statistic"]["value"] > 0.25 and folded["verdict"] == verdicts.CONTRADICTED
    # apart: right and wrong responses alike, within the margin -- equivalence (no positive control:
    # uninformative, insensitive), with the 20 off-format responses counted beside
    out = _claim("001", CLAIM, _results(ks, cls), samples)
    s = out["statistic"]
    assert s["groups"] == {"correct": 20, "incorrect": 20} and s["n"] == 40
    assert out["statistical_verdict"] == verdicts.HOLDS and out["verdict"] == verdicts.UNINFORMATIVE
    assert abs(s["value"]) < 0.1 and -0.25 < out["equivalence"]["lo"] and out["equivalence"]["hi"] < 0.25
    off = s["off_format"]
    assert (off["n"], off["of"]) == (20, 60) and off["lo"] < 1 / 3 < off["hi"]
    assert "20 of 60 responses off-format, left out" in s["source"]
    # a child whose written count disagrees with its samples is not read
    broken = _claim("001", CLAIM, _results(ks, cls), [{**x, "class": "wrong"} if x["id"] == "s50" else x for x in samples])
    assert broken["verdict"] == verdicts.NOT_TESTED and "19" in broken["reason"]


def _old_child(tmp_path: Path, ks, cls, samples, keep_arrays: bool = True) -> Path:
    """A finished mui run written before the class: no classes, its test folded."""
    from whitebox_eval.mui.study import KEY_SETS_FILE
    from whitebox_eval.runs.folder import RunFolder

    run = RunFolder.create(tmp_path, ARITH, run_id="old")
    run.append_samples([{k: v for k, v in s.items() if k != "class"} for s in samples])
    run.save_results({"n_items": len(samples), **_results(ks, cls, fold=True)})
    if keep_arrays:
        run.save_array("correct", (cls == "right").astype(np.int8))
        ks.save(run.path / "arrays" / KEY_SETS_FILE)
    return run.path


def _claim_on(folder: Path) -> dict:
    from whitebox_eval.reproduce import spec

    p = spec.papers()["001"]
    c = next(x for x in p.claims if x.id == CLAIM)
    plan = _Plan()
    child = plan.child("001", c.experiment, MODEL)
    return assemble.claim(p, c, plan, {child.run_id: assemble.Outcome(child, "done", folder=str(folder))}, MODEL)


def test_an_old_child_is_read_back_with_its_off_format_responses_left_out(tmp_path):
    ks, cls, samples = _responses()
    path = _old_child(tmp_path, ks, cls, samples)
    before = {p.name: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    out = _claim_on(path)
    new = _claim("001", CLAIM, _results(ks, cls), samples)
    s = out["statistic"]
    assert s["value"] == pytest.approx(new["statistic"]["value"], abs=1e-12)
    assert s["p_value"] == pytest.approx(new["statistic"]["p_value"])
    assert out["statistical_verdict"] == verdicts.HOLDS and out["verdict"] == new["verdict"]
    assert "computed again from the key sets" in s["source"] and s["off_format"]["n"] == 20
    assert {p.name: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before  # the folder untouched
    # recompute_claims: each response's class and key units give the share and the test again
    obs = s["observations"]
    ck = rc.Check()
    rc.check_rarefied("t", s, obs, ck, np.random.default_rng(3))
    rc.check_response_classes("t", s["off_format"], obs, {}, ck)
    assert not ck.bad, ck.bad
    assert ck.done["off-format Wilson hi"] == 1 and ck.done["rarefied permutation p (Monte Carlo)"] == 1
    tampered = {**obs, "class": ["wrong" if c == "off_format" else c for c in obs["class"]]}
    ck = rc.Check()
    rc.check_rarefied("t", s, tampered, ck, np.random.default_rng(3))
    rc.check_response_classes("t", s["off_format"], tampered, {}, ck)
    assert any("off-format responses" in b for b in ck.bad) and any("rarefied MUI, incorrect" in b for b in ck.bad)


def test_an_old_child_that_cannot_be_classified_or_recomputed_is_not_tested(tmp_path):
    ks, cls, samples = _responses()
    # no key sets to compute the test again without its 20 off-format responses
    out = _claim_on(_old_child(tmp_path / "a", ks, cls, samples, keep_arrays=False))
    assert out["verdict"] == verdicts.NOT_TESTED and "folded 20 off-format responses" in out["reason"]
    # no samples to classify
    out = _claim("001", CLAIM, _results(ks, cls, fold=True))
    assert out["verdict"] == verdicts.NOT_TESTED and "keeps no samples to classify" in out["reason"]
    # an old child with no off-format response keeps its own test, the class apart being the same
    right_wrong = np.flatnonzero(cls != "off_format")
    sub, sub_cls = ks.subset(right_wrong), cls[right_wrong]
    old = _claim("001", CLAIM, _results(sub, sub_cls, fold=True), [samples[i] for i in right_wrong])
    assert old["statistic"]["value"] == _claim("001", CLAIM, _results(sub, sub_cls),
                                               [samples[i] for i in right_wrong])["statistic"]["value"]
    assert "no response is off-format" in old["statistic"]["source"]


def _floor_child(n_off: int = 20):
    """Gemma's arithmetic at the cpu scale in small: 1 right, 39 wrong, ``n_off`` off-format responses --
    the right group too small to compare (a floor)."""
    ks, cls, samples = _responses()
    cls = np.array(["right"] + ["wrong"] * 39 + ["off_format"] * n_off)
    samples = [{**s, "response": TEXTS[c], "correct": c == "right", "class": str(c)} for s, c in zip(samples, cls)]
    return ks.subset(np.arange(len(cls))), cls, samples


def test_a_refused_cell_reports_its_off_format_share_too():
    from whitebox_eval import stats

    ks, cls, samples = _floor_child()
    out = _claim("001", CLAIM, _results(ks, cls), samples)
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "floor" and "statistic" not in out
    off, wilson = out["off_format"], stats.proportion([c == "off_format" for c in cls])
    assert (off["n"], off["of"]) == (20, 60) and (off["value"], off["lo"], off["hi"]) == (wilson.value, wilson.lo, wilson.hi)
    assert off["lo"] < 1 / 3 < off["hi"] and "off-format" in off["definition"]
    # the counts the child wrote stand where it keeps no samples to classify
    assert _claim("001", CLAIM, _results(ks, cls))["off_format"] == off
    # no off-format response: counted all the same (0 of 40)
    ks0, cls0, samples0 = _floor_child(n_off=0)
    zero = _claim("001", CLAIM, _results(ks0, cls0), samples0)["off_format"]
    assert (zero["n"], zero["of"], zero["value"], zero["lo"]) == (0, 40, 0.0, 0.0) and zero["hi"] > 0


def test_a_not_tested_cell_reports_its_off_format_share_where_the_run_has_classes(tmp_path):
    ks, cls, samples = _responses()
    # an old child with no key sets: classified from its texts, its test not computed again
    out = _claim_on(_old_child(tmp_path, ks, cls, samples, keep_arrays=False))
    assert out["verdict"] == verdicts.NOT_TESTED and (out["off_format"]["n"], out["off_format"]["of"]) == (20, 60)
    # nothing tells the classes (no samples, none written): none reported
    assert "off_format" not in _claim("001", CLAIM, _results(ks, cls, fold=True))
    # a child whose written counts disagree with its test is not read, and says what its counts are
    res = _results(ks, cls)
    res["answer_classes"] = {**res["answer_classes"], "off_format": 19, "wrong": 21}
    bad = _claim("001", CLAIM, res)
    assert bad["verdict"] == verdicts.NOT_TESTED and "its classes count 19" in bad["reason"]
    assert bad["off_format"]["n"] == 19


def test_recompute_claims_checks_a_refused_cells_off_format_block(tmp_path):
    """recompute_claims reads a refused cell's top-level share by the tested cells' check (from its own
    count: the evidence keeps no classes there); a tampered count, share or interval disagrees."""
    import json

    ks, cls, samples = _floor_child()
    cell = _claim("001", CLAIM, _results(ks, cls), samples)
    assert "statistic" not in cell

    def recompute(off: dict) -> rc.Check:
        (tmp_path / "claims.json").write_text(json.dumps({"papers": [{"number": "001", "claims": [
            {**cell, "off_format": off}]}]}))
        return rc.recompute(tmp_path)

    ck = recompute(cell["off_format"])
    assert not ck.bad and ck.done["off-format Wilson lo"] == 1 and ck.done["off-format share"] == 1
    assert ck.untested["off-format share of a refused cell"] == 1 and not ck.from_counts  # no tested cell rests on it
    for key, value in (("lo", 0.2), ("hi", 0.5), ("value", 0.3), ("n", 21), ("of", 61)):
        bad = recompute({**cell["off_format"], key: value}).bad
        assert bad and all(b.startswith(f"001 {CLAIM} {MODEL}: off-format") for b in bad), (key, bad)
