"""Task records, generation items, answer checks and your own generation file (gen=PATH)."""

from __future__ import annotations

import csv
import json

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import answer_checks as checks, registry
from whitebox_eval.tasks.generation import GenItem, load_generation
from whitebox_eval.tasks.rows import MalformedRowsWarning
from whitebox_eval.tasks.spec import GENERATION_TASKS, MCQ_TASKS, TaskSpec


# ---------------------------------------------------------------- records
def test_every_record_resolves_its_loaders_and_styles():
    for rec in registry.RECORDS.values():
        if rec.loader:
            assert callable(registry.resolve(rec.loader)), rec.name
        if rec.generation_loader:
            assert callable(registry.resolve(rec.generation_loader)), rec.name
        assert rec.mcq or rec.generation is not None, f"{rec.name} offers nothing"
        if rec.lm_eval_output and rec.source == registry.FILE:  # the --prompt lm-eval style needs its lm_eval_doc
            assert callable(registry.resolve(rec.lm_eval_doc)), rec.name
        if rec.hub_row:
            assert callable(registry.resolve(rec.hub_row)), rec.name
        if rec.is_file:
            assert rec.files, f"{rec.name} names no file format"
        if rec.generation is not None and rec.generation.check == "choice":
            assert rec.mcq and "{label}" in rec.generation.gold


def test_suites_take_their_kind_of_task():
    assert {"ssd", "mmlu", "arc", "mcq", "lm-eval"} <= set(MCQ_TASKS) and "gsm8k" not in MCQ_TASKS
    assert {"arithmetic-gen", "gsm8k", "gen", "triviaqa", "lm-eval", "mmlu", "ssd"} <= set(GENERATION_TASKS)
    assert "arithmetic" not in GENERATION_TASKS  # asked in free text as arithmetic-gen
    with pytest.raises(WhiteboxError, match="not one this study runs"):
        TaskSpec.parse("gen=x.jsonl", MCQ_TASKS)


def test_spec_round_trips_through_config():
    spec = TaskSpec.parse("gen=qa.csv", fields=("question=q", "answer=a"), answer="regex:is (\\w+)")
    assert spec.answer == "regex:is (\\w+)" and dict(spec.fields) == {"question": "q", "answer": "a"}
    assert TaskSpec.from_config({"task": str(spec), "task_spec": spec.to_config()}) == spec
    assert TaskSpec.from_config({"task": "arithmetic:add1"}) == TaskSpec.parse("arithmetic:add1")
    assert TaskSpec.parse("gen=qa.csv").answer == "exact"  # the default check, recorded
    assert TaskSpec.parse(TaskSpec.parse("gen=qa.csv"), answer="numeric").answer == "numeric"


@pytest.mark.parametrize("answer, message", [
    ("fuzzy", "choose exact, numeric, contains or regex:PATTERN"),
    ("regex:(", "does not compile"),
])
def test_bad_answer_checks_are_one_line(answer, message):
    with pytest.raises(WhiteboxError, match=message):
        TaskSpec.parse("gen=qa.csv", answer=answer)
    with pytest.raises(WhiteboxError, match="--answer chooses the check of your own generation file"):
        TaskSpec.parse("gsm8k=x.jsonl", answer="exact")


def test_lm_eval_generation_names_get_both_forms():
    with pytest.raises(WhiteboxError, match=r"write --task gsm8k=PATH .*, or lm-eval:gsm8k"):
        TaskSpec.parse("gsm8k")


# ---------------------------------------------------------------- checks
def _item(check: str, refs, **kw) -> GenItem:
    refs = [refs] if isinstance(refs, str) else refs
    return GenItem(id="i", question="Q", check=check, gold=refs[0], gold_response=" " + refs[0], references=refs, **kw)


@pytest.mark.parametrize("check, refs, response, want", [
    ("exact", ["Paris"], " Paris.", True),
    ("exact", ["Paris"], "paris\nand more lines", True),          # the first line is the answer
    ("exact", ["Paris"], "It is Paris", False),
    ("exact", ["the Pacific Ocean", "Pacific"], "Pacific ocean", True),  # articles and case dropped
    ("numeric", ["1200"], "so the answer is $1,200.", True),
    ("numeric", ["0.5"], "#### 0.50", True),
    ("numeric", ["7"], "7 apples then 8", False),                  # the final number is 8
    ("contains", ["Shakespeare"], "It was written by William Shakespeare.", True),
    ("contains", ["art"], "a party", False),                        # whole words only
    ("regex:answer is (\\w+)", ["mars"], "I think the answer is Mars, surely", True),
    ("regex:answer is (\\w+)", ["mars"], "Mars", False),            # no match: wrong
])
def test_text_checks(check, refs, response, want):
    assert checks.is_correct(_item(check, refs), response) is want


def test_choice_and_number_checks_read_the_answer():
    letter = _item("choice", "B", labels=["A", "B", "C"], options=["dog", "cat", "cow"])
    assert checks.is_correct(letter, " B. cat") and checks.is_correct(letter, "cat") and not checks.is_correct(letter, "A")
    number = _item("number", "10")
    assert checks.is_correct(number, "1 + 9 = 10") and not checks.is_correct(number, "9 + 1 = 11")
    with pytest.raises(WhiteboxError, match="own filters and metrics"):
        checks.is_correct(_item("lm-eval", "x"), "x")


# ---------------------------------------------------------------- gen=PATH
def _gen(path, **kw):
    fields = kw.pop("fields", ())
    return load_generation(TaskSpec.parse(f"gen={path}", fields=fields, answer=kw.pop("answer", None)), **kw)


def test_gen_jsonl_with_lists_aliases_context_and_ids(tmp_path):
    p = tmp_path / "qa.jsonl"
    rows = [{"id": "a", "question": "Capital of  France?", "answers": ["Paris", "paris city"], "aliases": ["Lutetia"]},
            {"question": "2 + 2?", "answer": 4, "context": "Arithmetic.", "category": "math"},
            {"prompt": "Complete: the sky is", "target": "blue"}]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    task = _gen(p)
    a, b, c = task.items
    assert (a.id, a.question, a.references, a.check) == ("gen/a", "Question: Capital of France?",
                                                         ["Paris", "paris city", "Lutetia"], "exact")
    assert (b.id, b.question, b.references, b.group) == ("gen/qa.jsonl:2", "Arithmetic.\nQuestion: 2 + 2?", ["4"], "math")
    assert (c.prompt, c.question, c.gold_response) == ("Complete: the sky is", "Complete: the sky is", " blue")
    assert task.score(a, "LUTETIA") == {"correct": True} and task.score(b, "five") == {"correct": False}


def test_gen_csv_with_fields_and_the_numeric_check(tmp_path):
    p = tmp_path / "qa.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["n", "ask", "sol"])
        w.writerows([["1", "How many legs has a cat?", "4"], ["2", "Half of 3?", '["1.5", "3/2"]']])
    with pytest.raises(WhiteboxError, match="no prompt or question column"):
        _gen(p)
    with pytest.warns(MalformedRowsWarning, match="reference '3/2' is not a number"):
        task = _gen(p, fields=("id=n", "question=ask", "answer=sol"), answer="numeric", on_bad_row="skip")
    assert [it.id for it in task.items] == ["gen/1"]  # "3/2" is not a number: row 2 is a bad row
    assert task.score(task.items[0], "A cat has 4 legs.")["correct"]
    with pytest.raises(WhiteboxError, match=r"qa.csv:3: reference '3/2' is not a number"):
        _gen(p, fields=("id=n", "question=ask", "answer=sol"), answer="numeric", on_bad_row="error")


def test_gen_bad_rows_follow_the_policy(tmp_path):
    p = tmp_path / "qa.jsonl"
    p.write_text('{"id": "x", "question": "Q1", "answer": "a"}\n{"question": "Q2"}\nnot json\n'
                 '{"id": "x", "question": "Q3", "answer": "b"}\n{"question": "Q4", "answer": []}\n')
    with pytest.warns(MalformedRowsWarning, match="skipped 4 malformed row"):
        task = _gen(p)
    assert [it.question for it in task.items] == ["Question: Q1"]
    with pytest.raises(WhiteboxError, match=r"qa.jsonl:2: missing field 'answer'|qa.jsonl:2: no answer column"):
        _gen(p, on_bad_row="error")


def test_gen_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    p = tmp_path / "qa.parquet"
    pq.write_table(pa.table({"question": ["Q1", "Q2"], "answer": [["x", "y"], ["z"]]}), p)
    assert [it.references for it in _gen(p).items] == [["x", "y"], ["z"]]


def test_gen_from_the_hub_is_exported_once(tmp_path, monkeypatch):
    from whitebox_eval.tasks import hub

    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))
    calls = []

    def fake(dataset_id, config, split):
        calls.append((dataset_id, config, split))
        return [{"question": "Q1", "answer": "a"}, {"question": "Q2", "answer": ["b", "c"]}]

    monkeypatch.setattr(hub, "datasets_load_dataset", lambda: fake)
    for _ in range(2):
        task = load_generation(TaskSpec.parse("gen=hf:org/qa:main@validation"))
        assert [it.references for it in task.items] == [["a"], ["b", "c"]]
    assert calls == [("org/qa", "main", "validation")]


def test_multiple_choice_datasets_are_asked_with_letters(tmp_path):
    p = tmp_path / "mc.jsonl"
    p.write_text("\n".join(json.dumps({"question": f"Q{i}", "choices": ["red", "green", "blue"], "answer": i % 3,
                                       "subject": "s" + str(i % 2)}) for i in range(6)) + "\n")
    task = load_generation(TaskSpec.parse(f"mcq={p}"), limit=4)
    assert [it.group for it in task.items] == ["s0", "s1", "s0", "s1"]  # dealt over the subjects
    it = task.items[1]
    assert it.question == "Question: Q1\nA. red\nB. green\nC. blue" and it.gold == "B"
    assert it.gold_response == " The correct answer is B. green" and task.score(it, "B")["correct"]
