"""Question-form recall of the planted facts (descriptive, beside the check): each trained fact asked
as its MCQ's question with no options, greedy, scored by the check's rule, before and after, kept
like the check. Why: 000's thesis is knowledge present but its letter not emitted, and the planted
facts are trained as statements only, so whether a question reaches them is measured."""

from __future__ import annotations

import json
import re

import pytest

from whitebox_eval.finetune.planted_facts import QUESTION_PROMPT, questions, recalled
from whitebox_eval.finetune.sources import Item
from whitebox_eval.tasks import planted_facts as world

N = 10
ARGS = ["--task", "planted-facts", "--limit", str(N), "--max-steps", "2", "--train-batch-size", "8",
        "--batch-size", "40"]

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_prompt_is_the_mcqs_question_with_no_options():
    asked = questions(N)
    mcqs = world.mcq_items(N * len(world.ATTRIBUTES), world.TRAINED)
    assert len(asked) == N * len(world.ATTRIBUTES) == len(mcqs)
    for it, q in zip(asked, mcqs):
        assert it.prompt == QUESTION_PROMPT.format(question=q.question) and it.id == q.id
        assert it.value == q.meta["value"] == q.options[q.gold]
        assert not re.search(r"^[A-F][.)]", it.prompt, re.M) and "Options" not in it.prompt
        assert not any(o in it.prompt for o in q.options)  # no value, gold or distractor, is shown


def test_recall_reads_a_question_completion_by_its_first_words():
    q = next(q for q in questions(N) if q.attribute == "city")
    it, value = Item(q.id, q.prompt, q.answer, q.prompt, q), q.value
    assert recalled(it, f" {value}.\nQuestion: In which city") and recalled(it, f"{value}, of course")
    assert not recalled(it, f" The city of {value}.") and not recalled(it, " A") and not recalled(it, "")


def test_the_run_records_question_recall_and_a_resume_reuses_it(cli, tiny_smol_folder, tmp_path):
    base = ["finetune", "--model", str(tiny_smol_folder), *ARGS, "--output", str(tmp_path), "--run-id", "q"]
    code, out, err = cli(base)
    assert code == 0, err
    run = tmp_path / "q"
    res = json.loads((run / "results.json").read_text())
    block = res["question_recall"]
    n = N * len(world.ATTRIBUTES)
    assert block["prompt"] == QUESTION_PROMPT and block["note"] == "descriptive: not the manipulation's check"
    for stage in ("before", "after"):
        k, m = map(int, block[stage].split("/"))
        assert m == n and 0 <= k <= n and block[f"accuracy_n,{stage}"] == n
        assert len(block[f"accuracy_ci,{stage}"]) == 2 and block[f"accuracy_ci_method,{stage}"] == "wilson"
    assert block["paired_tests"]["accuracy,after_vs_before"]["test"].startswith("mcnemar")
    kept = json.loads((run / "question_after.json").read_text())
    assert len(kept) == n and kept[0]["id"] == "planted-trained-0-city"
    assert f"question-form recall (descriptive: not the manipulation's check): before {block['before']}, " \
           f"after {block['after']}" in out
    # a resumed run reads the kept rows back, never asks again: mark every fact recalled after training
    (run / "question_after.json").write_text(json.dumps([{**r, "correct": True} for r in kept]))
    code, out, err = cli([*base, "--resume"])
    assert code == 0, err
    again = json.loads((run / "results.json").read_text())["question_recall"]
    assert again["after"] == f"{n}/{n}" and again["before"] == block["before"]
    assert {k: v for k, v in again.items() if "before" in k} == {k: v for k, v in block.items() if "before" in k}
    assert again["paired_tests"]["accuracy,after_vs_before"]["b"] == n - int(block["before"].split("/")[0])


def test_the_trained_check_shows_it_only_where_the_results_hold_it():
    from whitebox_eval.finetune.study import question_recall
    from whitebox_eval.reproduce.trained import reached

    before = [{"correct": i < 3} for i in range(40)]
    after = [{"correct": i < 30} for i in range(40)]
    block = question_recall(before, after)
    results = {"headline": {}, "paired_tests": {k: v for k, v in block["paired_tests"].items()}}
    for k in ("accuracy,before", "accuracy_ci,before", "accuracy_n,before", "accuracy,after", "accuracy_ci,after",
              "accuracy_n,after"):
        results["headline"][k] = block[k]
    plain = reached({"label": "planted facts"}, results)
    shown = reached({"label": "planted facts"}, {**results, "question_recall": block})
    assert "question" not in plain["text"] and shown["passed"] == plain["passed"]
    assert shown["text"] == plain["text"] + ("; beside it, descriptive: not the manipulation's check, the facts asked "
                                             "as the MCQs ask them with no options: 3/40 before -> 30/40 after")
