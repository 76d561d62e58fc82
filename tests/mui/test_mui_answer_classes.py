"""Rule 6 in the MUI suite (mui/answer_classes.py): a response from which the task's check reads no
answer is off-format, its own class, never "incorrect"; its share with a Wilson interval; the rarefied
correct-vs-incorrect test compares right against wrong with it left out; an old run read back."""

from __future__ import annotations

import math

import numpy as np
import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.answer_classes import (DEFINITION, answer_class, class_results, classes_of_samples,
                                              off_format, options_in_prompt)
from whitebox_eval.mui.statistics import GROUPS, correct_vs_incorrect
from whitebox_eval.mui.utilization import KeySets

ABCD = ["A", "B", "C", "D"]


@pytest.mark.parametrize("check,text,off", [
    ("number", "Styloseness", True),                                   # no number at all
    ("number", "", True),
    ("number", "   \n", True),
    ("number", "To find the value of 9 * 8, we need", False),         # its first number is read: an answer
    ("number", "9 + 8 = 17", False),
    ("final_number", "I am not sure how to do this", True),
    ("final_number", "The answer is 72.", False),
    ("choice", "I think so", True),                                    # no option label is read
    ("choice", " The correct answer is D.", False),
    ("choice", "B. yard", False),
    ("exact", " The", True),                                           # nothing left after normalisation
    ("exact", " I don't know. It is Paris", True),                     # a refusal (004's list)
    ("exact", " Lyon", False),
    ("contains", "?!", True),
    ("regex:#### (\\d+)", "no marker here 12", True),
    ("regex:#### (\\d+)", "#### 12", False),
    ("execution", "    return 1", False),                              # code that may fail is an answer
    ("execution", "", True),
])
def test_off_format_is_no_answer_read_by_the_tasks_own_check(check, text, off):
    assert off_format(check, text, ABCD, ["kite", "water", "yard", "chair"]) is off


def test_lm_eval_off_format_is_its_filter_falling_back_to_invalid():
    assert off_format("lm-eval", "blah", filtered="[invalid]") and not off_format("lm-eval", "blah", filtered="12")


def test_a_response_with_no_number_is_off_format_not_wrong_and_a_correct_one_is_right_first():
    assert answer_class(False, off_format("number", "Styloseness")) == "off_format"
    assert answer_class(False, off_format("number", "100")) == "wrong"
    assert answer_class(True, False) == "right"
    with pytest.raises(WhiteboxError, match="scored correct"):
        answer_class(True, True)


def test_the_off_format_share_and_its_wilson_interval_by_hand():
    classes = ["off_format"] * 3 + ["right"] * 5 + ["wrong"] * 12
    out = class_results(classes)
    assert out["answer_classes"] == {"right": 5, "wrong": 12, "off_format": 3, "definition": DEFINITION}
    z, n, p = 1.959963984540054, 20, 3 / 20
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert out["off_format"] == pytest.approx(0.15)
    assert out["off_format_ci"] == pytest.approx([centre - half, centre + half], abs=1e-12)
    assert centre - half == pytest.approx(0.0524, abs=1e-4) and centre + half == pytest.approx(0.3604, abs=1e-4)


def _key_sets(seed: int = 0):
    """30 responses over 4 x 50 units: 8 right and 14 wrong from one pool of 120 units, 8 off-format
    (short, empty-ish responses) from a narrow pool of their own."""
    rng = np.random.default_rng(seed)
    cls = np.array(["right"] * 8 + ["wrong"] * 14 + ["off_format"] * 8)
    ks = KeySets(4, 50, "neuron")
    for i, c in enumerate(cls):
        flat = np.sort(rng.choice(np.arange(180, 200), 2, replace=False) if c == "off_format"
                       else rng.choice(120, 6, replace=False))
        ks.add_indices(flat // 50, flat % 50, f"s{i}")
    return ks, cls


def test_correct_vs_incorrect_leaves_the_off_format_responses_out_and_counts_them():
    ks, cls = _key_sets()
    apart = correct_vs_incorrect(ks, cls == "right", off_format=cls == "off_format", permutations=200)
    assert (apart["n_correct"], apart["n_incorrect"], apart["n_off_format"]) == (8, 14, 8)
    assert apart["groups"] == GROUPS and apart["subset_size"] == 7
    # the same as the test on the right and wrong responses alone
    kept = np.flatnonzero(cls != "off_format")
    alone = correct_vs_incorrect(ks.subset(kept), cls[kept] == "right", permutations=200)
    for key in ("mui_correct_at_r", "mui_incorrect_at_r", "diff", "diff_stderr", "p_value"):
        assert apart[key] == pytest.approx(alone[key], abs=1e-12), key
    assert alone["n_off_format"] == 0
    # folded into incorrect they would change the incorrect group's rarefied MUI
    folded = correct_vs_incorrect(ks, cls == "right", permutations=200)
    assert folded["n_incorrect"] == 22 and folded["mui_incorrect_at_r"] != pytest.approx(apart["mui_incorrect_at_r"])
    with pytest.raises(WhiteboxError, match="both correct and off-format"):
        correct_vs_incorrect(ks, cls != "wrong", off_format=cls == "off_format")


def test_options_are_read_from_the_prompt_after_its_last_question():
    prompt = ("Question: demo?\nA. river\nB. candle\nAnswer: B\n\n"
              "Question: Which of the following options corresponds to \" yard \"?\nA. kite\nB. water\nC. yard\n"
              "D. chair\nAnswer with the letter of the correct option.")
    assert options_in_prompt(prompt) == (ABCD, ["kite", "water", "yard", "chair"])
    assert options_in_prompt("Question: What is 1 + 2?\nAnswer:") == ([], [])


SSD = {"suite": "mui", "task": "ssd", "task_spec": {"name": "ssd", "path": None, "categories": []}}


def test_old_samples_are_classified_from_their_texts_or_refused_with_the_reason():
    q = "Question: Which corresponds to \" yard \"?\nA. kite\nB. water\nC. yard\nD. chair\nAnswer:"
    samples = [{"id": "a", "prompt": q, "response": " C", "correct": True},
               {"id": "b", "prompt": q, "response": " B. water", "correct": False},
               {"id": "c", "prompt": q, "response": " hmm", "correct": False},
               {"id": "d", "prompt": q, "response": " yard", "correct": False}]  # an option's text: C, an answer
    assert classes_of_samples(samples, SSD) == ["right", "wrong", "off_format", "wrong"]
    with pytest.raises(WhiteboxError, match="no lettered options"):
        classes_of_samples([{**samples[0], "prompt": "Question: x\nAnswer:"}], SSD)
    with pytest.raises(WhiteboxError, match="own check"):
        classes_of_samples(samples, {"task_spec": {"name": "bigbench", "path": "x", "categories": []}})
    with pytest.raises(WhiteboxError, match="no response text"):
        classes_of_samples([{"id": "e", "prompt": q, "correct": False}], SSD)


def test_an_old_run_read_back_gains_its_classes_and_keeps_every_written_value(tmp_path):
    from whitebox_eval.runs.folder import RunFolder
    from whitebox_eval.suites import read

    arith = {"suite": "mui", "task": "arithmetic-gen",
             "task_spec": {"name": "arithmetic-gen", "path": None, "categories": []}}
    texts = ["10", "1 + 9 = 11", "Styloseness", "", "To find the value of 3 + 4, add"]
    samples = [{"id": f"s{i}", "gold": "10", "prompt": "Question: What is 1 + 9?\nAnswer:", "response": t,
                "correct": t == "10"} for i, t in enumerate(texts)]
    written = {"n_items": 5, "accuracy": 0.2, "n_incorrect": 4,
               "correct_vs_incorrect": {"refused": "groups too small", "n_correct": 1, "n_incorrect": 4}}
    run = RunFolder.create(tmp_path, arith, run_id="old")
    run.append_samples(samples)
    run.save_results(written)
    before = {p.name: p.read_bytes() for p in run.path.rglob("*") if p.is_file()}
    study = read(run.path)
    assert [s["class"] for s in study.samples] == ["right", "wrong", "off_format", "off_format", "wrong"]
    r = study.results
    assert r["answer_classes"]["off_format"] == 2 and r["off_format"] == pytest.approx(0.4)
    assert r["n_incorrect"] == 4 and r["correct_vs_incorrect"] == written["correct_vs_incorrect"]  # never replaced
    assert {p.name: p.read_bytes() for p in run.path.rglob("*") if p.is_file()} == before  # the folder untouched
    # samples that cannot be classified say why, and nothing is guessed
    run2 = RunFolder.create(tmp_path, SSD, run_id="old-ssd")
    run2.append_samples([{**samples[0], "response": "A"}])
    run2.save_results(written)
    got = read(run2.path).results
    assert "no lettered options" in got["answer_classes"]["not_classified"] and "off_format" not in got


def test_a_study_writes_each_responses_class_and_subset_reads_them(tmp_path):
    import json
    import sys
    from pathlib import Path

    from click.testing import CliRunner

    sys.path.insert(0, str(Path(__file__).parent))
    from mui_testing import tiny_lm
    from whitebox_eval.mui.command import command
    from whitebox_eval.mui.study import MUIConfig, run_mui

    lm = tiny_lm("llama")
    cfg = dict(model="tiny", task="arithmetic-gen:add1,mul1", limit=6, batch_size=2, max_new_tokens=4)
    gold = {s["id"]: s["gold"] for s in run_mui(MUIConfig(**cfg, responses="gold"), tmp_path, run_id="g",
                                                 loaded=lm).read_samples()}
    texts = dict(zip(gold, [gold[i] for i in list(gold)[:2]] + ["Vkk", "no idea", str(int(gold[list(gold)[4]]) + 1),
                                                                 f"= {int(gold[list(gold)[5]]) + 1}"]))
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps({"id": i, "response": t}) + "\n" for i, t in texts.items()))
    folder = run_mui(MUIConfig(**cfg, responses=str(path)), tmp_path, run_id="r", loaded=lm)
    samples, res = list(folder.read_samples()), folder.load_results()
    assert [s["class"] for s in samples] == ["right", "right", "off_format", "off_format", "wrong", "wrong"]
    assert res["answer_classes"]["off_format"] == 2 and res["off_format"] == pytest.approx(2 / 6)
    assert res["n_correct"] == 2 and res["n_incorrect"] == 2  # incorrect = wrong
    ci = res["correct_vs_incorrect"]
    assert (ci["n_correct"], ci["n_incorrect"], ci["n_off_format"]) == (2, 2, 2) and "refused" in ci
    out = CliRunner().invoke(command, ["subset", str(folder.path), "--incorrect"])
    assert out.exit_code == 0 and out.output.startswith("2 samples"), out.output


def test_finishing_a_run_whose_parts_predate_the_class_classifies_each_by_its_items_check(tmp_path):
    """A resumed run whose parts were written before the class (samples without ``class``): finalize
    classifies each response by the study's rule (:func:`response_class`, its item's own check), a
    BigBench run too, whose config names no one check; samples.jsonl gains the classes."""
    from whitebox_eval.mui.config import MUIConfig
    from whitebox_eval.mui.finalize import PASS, finalize
    from whitebox_eval.runs.folder import RunFolder
    from whitebox_eval.runs.passes import run_pass
    from whitebox_eval.tasks.generation import GenItem

    bigbench = {"suite": "mui", "task": "bigbench", "seed": 0,
                "task_spec": {"name": "bigbench", "path": "bigbench.json", "categories": []}}
    q = "Question: Which is a colour?\nA. red\nB. dog\nC. run\nD. six\nAnswer:"
    choice = dict(question=q, check="choice", gold="A", gold_response="A", labels=ABCD, options=["red", "dog", "run", "six"])
    exact = dict(question="Question: Capital of France?\nAnswer:", check="exact", gold="Paris", gold_response="Paris",
                 references=["Paris"])
    items = [GenItem(id="c0", **choice), GenItem(id="c1", **choice), GenItem(id="c2", **choice),
             GenItem(id="e0", **exact), GenItem(id="e1", **exact), GenItem(id="e2", **exact)]
    texts = {"c0": " A", "c1": " B. dog", "c2": " hmm", "e0": " Paris", "e1": " Lyon", "e2": " I don't know"}
    rng = np.random.default_rng(0)

    def score(chunk):  # as the study wrote its parts before the class: no ``class`` in the records
        flats = [np.sort(rng.choice(40, 5, replace=False)).astype(np.int64) for _ in chunk]
        records = [{"id": items[i].id, "group": None, "gold": items[i].gold, "prompt": items[i].question,
                    "response": texts[items[i].id], "correct": texts[items[i].id] in (" A", " Paris"),
                    "n_response_tokens": 2, "stopped_by": "eos", "n_key_units": 5} for i in chunk]
        return records, {"indices": np.concatenate(flats), "offsets": np.concatenate([[0], np.cumsum([5] * len(chunk))])}

    folder = RunFolder.create(tmp_path, bigbench, run_id="old-bigbench")
    run_pass(folder, PASS, [it.id for it in items], 4, score, collect=False, show_progress=False)
    assert not any("class" in s for s in folder.read_samples())
    with pytest.raises(WhiteboxError, match="own check"):  # the config alone cannot tell the check
        classes_of_samples(list(folder.read_samples()), folder.config)
    finalize(folder, items, 2, 20, "neuron", MUIConfig(responses="gold"))
    want = ["right", "wrong", "off_format", "right", "wrong", "off_format"]
    assert [s["class"] for s in folder.read_samples()] == want
    res = folder.load_results()
    assert {c: res["answer_classes"][c] for c in ("right", "wrong", "off_format")} == {"right": 2, "wrong": 2, "off_format": 2}
    assert res["n_incorrect"] == 2 and res["correct_vs_incorrect"]["n_off_format"] == 2
