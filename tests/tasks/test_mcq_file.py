"""tasks.mcq: your own multiple-choice file (--task mcq=PATH) and --field."""

from __future__ import annotations

import builtins
import csv
import json
import sys
import types
import warnings
from pathlib import Path

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import load_mcq_dataset
from whitebox_eval.tasks.mcq import gold_index, lm_eval_doc, load_mcq_file, parse_fields
from whitebox_eval.tasks.rows import RowError
from whitebox_eval.tasks.loading import load_mcq
from whitebox_eval.tasks.spec import MCQ_TASKS, TaskSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "byod"


def jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def csv_file(path: Path, header: list[str], rows: list[list], delimiter: str = ",") -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f, delimiter=delimiter)
        w.writerow(header)
        w.writerows(rows)
    return path


def summary(items):
    return [(it.question, it.options, it.gold) for it in items]


# ---------------------------------------------------------------------------- formats and column forms


def test_json_lines_with_list_per_choice_and_hub_style_columns(tmp_path):
    path = jsonl(tmp_path / "q.jsonl", [
        {"question": "Q1", "choices": ["a", "b", "c"], "answer": 2},
        {"Question": "Q2", "A": "x", "B": "y", "C": "z", "D": "w", "Answer": "d"},
        {"query": "Q3", "choice1": "p", "choice2": "q", "label": 0},
        {"stem": "Q4", "option_a": "1st", "option_b": "2nd", "option_c": "3rd", "gold": "B"},
        {"question": "Q5", "choices": {"text": ["red", "blue"], "label": ["1", "2"]}, "answerKey": "2"},
        {"question": "Q6", "ending0": "e0", "ending1": "e1", "ending2": "e2", "target": "e1"},
    ])
    assert summary(load_mcq_file(path)) == [
        ("Q1", ["a", "b", "c"], 2), ("Q2", ["x", "y", "z", "w"], 3), ("Q3", ["p", "q"], 0),
        ("Q4", ["1st", "2nd", "3rd"], 1), ("Q5", ["red", "blue"], 1), ("Q6", ["e0", "e1", "e2"], 1)]


def test_csv_per_choice_columns_rows_differ_in_count_and_keep_option_text(tmp_path):
    path = csv_file(tmp_path / "q.csv", ["id", "subject", "context", "question", "A", "B", "C", "D", "E", "answer"], [
        ["x1", "geo", "", "Largest ocean?", "Atlantic", "Pacific ", "Indian", "", "", "B"],
        ["x2", "", "Some passage.", "Pick one", "one", "two", "three", "four", "five", "4"],
        ["x3", "math", "", "2 + 2?", "3", "4", "", "", "", "4"],
    ])
    items = load_mcq_file(path)
    assert summary(items) == [("Largest ocean?", ["Atlantic", "Pacific ", "Indian"], 1),
                              ("Pick one", ["one", "two", "three", "four", "five"], 4), ("2 + 2?", ["3", "4"], 1)]
    assert [it.id for it in items] == ["mcq/x1", "mcq/x2", "mcq/x3"]
    assert [it.subject for it in items] == ["geo", None, "math"] and items[1].context == "Some passage."
    assert items[0].meta == {"source": str(path), "line": 2}


def test_csv_list_cell_and_tsv(tmp_path):
    a = csv_file(tmp_path / "q.csv", ["question", "choices", "answer"], [["Q", '["a", "b", "c"]', "c"]])
    b = csv_file(tmp_path / "q.tsv", ["question", "choices", "answer"], [["Q", '["a", "b", "c"]', "C"]], delimiter="\t")
    assert summary(load_mcq_file(a)) == summary(load_mcq_file(b)) == [("Q", ["a", "b", "c"], 2)]


def test_two_and_twenty_six_options_and_the_limits(tmp_path):
    letters = [chr(ord("a") + i) * 2 for i in range(27)]
    path = jsonl(tmp_path / "q.jsonl", [
        {"question": "two", "choices": letters[:2], "answer": 1},
        {"question": "26", "choices": letters[:26], "answer": "Z"},
        {"question": "27", "choices": letters, "answer": 0},
        {"question": "one", "choices": letters[:1], "answer": 0},
    ])
    with pytest.warns(UserWarning, match="skipped 2 malformed"):
        items = load_mcq_file(path, on_bad_row="skip")
    assert [(len(it.options), it.gold) for it in items] == [(2, 1), (26, 25)]
    assert [str(b) for b in items.bad_rows] == [f"{path}:3: has 27 choice(s); give 2 to 26",
                                                f"{path}:4: has 1 choice(s); give 2 to 26"]


def test_parquet_or_its_install_line(tmp_path, monkeypatch):
    path = tmp_path / "q.parquet"
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"question": ["Q1", "Q2"], "choices": [["a", "b", "c"], ["x", "y"]], "answer": [2, 0]}), path)
        assert summary(load_mcq_file(path)) == [("Q1", ["a", "b", "c"], 2), ("Q2", ["x", "y"], 0)]
        cells = tmp_path / "cells.parquet"  # per-choice columns, a null trailing cell, a bad row numbered from 1
        pq.write_table(pa.table({"question": ["Q1", None], "A": ["a", "x"], "B": ["b", "y"], "C": ["c", None],
                                 "answer": ["C", "1"]}), cells)
        with pytest.warns(UserWarning, match=r"cells.parquet:2: missing field 'question'"):
            items = load_mcq_file(cells, on_bad_row="skip")
        assert summary(items) == [("Q1", ["a", "b", "c"], 2)]
    except ImportError:
        path.write_bytes(b"PAR1")
    real = builtins.__import__

    def no_parquet(name, *args, **kw):
        if name.split(".")[0] in ("pyarrow", "pandas"):
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_parquet)
    with pytest.raises(WhiteboxError, match=r"^reading q.parquet \(Parquet\) needs pyarrow: pip install pyarrow$"):
        load_mcq_file(path)


def test_unknown_suffix_and_missing_columns_are_one_line(tmp_path):
    (tmp_path / "q.txt").write_text("x")
    with pytest.raises(WhiteboxError, match="name it .jsonl"):
        load_mcq_file(tmp_path / "q.txt")
    path = csv_file(tmp_path / "q.csv", ["prompt_text", "A", "B", "key"], [["Q", "a", "b", "A"]])
    with pytest.raises(WhiteboxError, match=r"q.csv: no question column .*columns: prompt_text, A, B, key\); "
                                            r"name it with --field question=COLUMN$"):
        load_mcq_file(path)


# ---------------------------------------------------------------------------- answers


@pytest.mark.parametrize("value, gold", [(1, 1), ("1", 1), (" 2 ", 2), (2.0, 2), ("B", 1), ("b", 1), ("gamma", 2),
                                         ("beta", 1)])
def test_answer_forms(value, gold):
    assert gold_index(value, ["alpha", "beta", "gamma"]) == gold


@pytest.mark.parametrize("value, options, message", [
    ("2", ["1", "2", "3"], r"reads two ways \(as a 0-based index: choice 2; as text: choice 1\)"),
    ("A", ["B", "A"], r"reads two ways \(as a letter: choice 0; as text: choice 1\)"),
    (3, ["a", "b", "c"], r"answer 3 is out of range for 3 choices \(numbers are 0-based indices: 0..2\)"),
    ("D", ["a", "b", "c"], r"not a letter of the 3 choices \(A-C\)"),
    ("delta", ["a", "b", "c"], "neither a 0-based index, a letter A-C nor the text of a choice"),
    ("", ["a", "b"], "the answer is empty"),
    (True, ["a", "b"], "neither index, letter nor text"),
])
def test_answers_that_name_no_single_choice_are_bad_rows(value, options, message):
    with pytest.raises(RowError, match=message):
        gold_index(value, options)


def test_numbers_that_agree_with_the_text_are_fine():
    assert gold_index("2", ["0", "1", "2"]) == 2 and gold_index("20", ["10", "20", "30"]) == 1


def test_a_one_based_file_is_refused_not_guessed(tmp_path):
    rows = [{"question": f"Q{i}", "choices": ["a", "b", "c"], "answer": a} for i, a in enumerate([1, 3, 2])]
    with pytest.raises(WhiteboxError, match=r"q.jsonl: the numeric answers look 1-based \(none is 0; line 2 answers 3 of "
                                            r"3 choices\).*subtract 1"):
        load_mcq_file(jsonl(tmp_path / "q.jsonl", rows), on_bad_row="skip")
    rows[1]["answer"] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [it.gold for it in load_mcq_file(jsonl(tmp_path / "q.jsonl", rows))] == [1, 0, 2]
    rows[1]["answer"] = 2
    with pytest.warns(UserWarning, match="no numeric answer is 0"):
        load_mcq_file(jsonl(tmp_path / "q.jsonl", rows))


# ---------------------------------------------------------------------------- bad rows


def test_bad_rows_skip_with_file_line_or_stop_with_one_line(tmp_path):
    path = jsonl(tmp_path / "q.jsonl", [
        {"question": "ok", "choices": ["a", "b"], "answer": 0},
        "{not json",
        {"question": "gap", "A": "a", "B": "", "C": "c", "answer": "A"},
        {"question": "", "choices": ["a", "b"], "answer": 0},
        {"question": "dup id", "choices": ["a", "b"], "answer": 0, "id": "7"},
        {"question": "dup id again", "choices": ["a", "b"], "answer": 1, "id": "7"},
        {"choices": ["a", "b"], "answer": 1},
    ])
    with pytest.warns(UserWarning):
        items = load_mcq_file(path, on_bad_row="skip")
    assert [it.question for it in items] == ["ok", "dup id"]
    reasons = [str(b) for b in items.bad_rows]
    assert [r.split(": ")[0] for r in reasons] == [f"{path}:{n}" for n in (2, 3, 4, 6, 7)]
    assert "invalid JSON" in reasons[0] and "choice column 'B' is empty but a later choice column is not" in reasons[1]
    assert "missing field 'question'" in reasons[2] and "id '7' repeats line 5's" in reasons[3]
    assert "no question column" in reasons[4]
    with pytest.raises(WhiteboxError, match=rf"^{path}:2: invalid JSON.*pass --on-bad-row skip") as exc:
        load_mcq_file(path)
    assert "\n" not in str(exc.value)


def test_csv_row_with_the_wrong_field_count(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text("question,A,B,answer\nQ1,a,b,A\nQ2,a,b\n")
    with pytest.raises(WhiteboxError, match=r"q.csv:3: expected 4 fields as in the header, found 3"):
        load_mcq_file(path)


# ---------------------------------------------------------------------------- --field and the spec


def test_field_mapping_names_other_columns(tmp_path):
    items = load_mcq_file(EXAMPLES / "quiz.csv", fields=parse_fields(
        ["question=prompt_text", "choices=first,second,third,fourth,fifth", "answer=key", "id=num"]))
    assert [(it.id, len(it.options), it.gold_text) for it in items] == [
        ("mcq/q1", 3, "mercury"), ("mcq/q2", 4, "32"), ("mcq/q3", 5, "piano"), ("mcq/q4", 3, "seven"),
        ("mcq/q5", 5, "vitamin D"), ("mcq/q6", 4, "2")]
    path = jsonl(tmp_path / "q.jsonl", [{"q": "Q", "opts": ["a", "b"], "ans": "b", "question": "not this"}])
    assert summary(load_mcq_file(path, fields={"question": "q", "choices": "opts", "answer": "ans"})) == [("Q", ["a", "b"], 1)]
    with pytest.raises(WhiteboxError, match=r"--field choices=nope: no such column"):
        load_mcq_file(path, fields={"choices": "nope", "answer": "ans"})


@pytest.mark.parametrize("values, message", [
    (["question"], "write NAME=COLUMN"), (["title=x"], "NAME one of question, choices"),
    (["answer=a,b"], "only choices takes a comma list"), (["question=a", "question=b"], "given twice"),
])
def test_bad_field_values(values, message):
    with pytest.raises(WhiteboxError, match=message):
        parse_fields(values)


def test_spec_carries_fields_into_the_config_and_the_items():
    spec = TaskSpec.parse(f"mcq={EXAMPLES / 'quiz.csv'}", MCQ_TASKS,
                          fields=["id=num", "question=prompt_text", "answer=key", "choices=first,second,third,fourth,fifth"])
    assert spec.fields == (("question", "prompt_text"), ("choices", "first,second,third,fourth,fifth"), ("answer", "key"),
                           ("id", "num"))
    assert spec.to_config()["fields"] == dict(spec.fields)
    assert "fields" not in TaskSpec.parse("mcq=x.jsonl").to_config()
    hub = TaskSpec.parse("MCQ=hf:org/name:cfg@validation", MCQ_TASKS)
    assert (hub.name, hub.path) == ("mcq", "hf:org/name:cfg@validation") and TaskSpec.parse(str(hub)) == hub
    assert len(load_mcq(spec, 0)) == 6
    with pytest.raises(WhiteboxError, match="--field maps the columns of your own file"):
        TaskSpec.parse("arc=x.jsonl", fields=["question=q"])


def test_the_example_file_mixes_counts_and_answer_forms():
    items = load_mcq_dataset("mcq", EXAMPLES / "questions.jsonl")
    assert sorted({len(it.options) for it in items}) == [3, 5, 8] and len(items) == 24
    raw = [json.loads(line)["answer"] for line in (EXAMPLES / "questions.jsonl").read_text().splitlines()]
    assert {type(a) for a in raw} == {int, str} and any(isinstance(a, str) and len(a) == 1 for a in raw)
    assert all(it.options[it.gold] for it in items)


def test_hub_split_is_read_with_the_same_columns(tmp_path, monkeypatch):
    from whitebox_eval.tasks.loading import load_from_hub

    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path))
    rows = [{"stem": "Q1", "opts": ["a", "b", "c"], "key": "C"}, {"stem": "Q2", "opts": ["x", "y"], "key": "x"}]
    seen = []
    fake = lambda ident, config, split: seen.append((ident, config, split)) or rows  # noqa: E731
    items = load_from_hub("mcq", "org/name:cfg@train", load_dataset=fake, fields={"choices": "opts", "answer": "key"})
    assert seen == [("org/name", "cfg", "train")] and summary(items) == [("Q1", ["a", "b", "c"], 2), ("Q2", ["x", "y"], 0)]
    offline = types.ModuleType("datasets")  # the hub unreachable, whether or not datasets is installed

    def unreachable(*args, **kw):
        raise ConnectionError("no network")

    offline.load_dataset = unreachable
    monkeypatch.setitem(sys.modules, "datasets", offline)
    with pytest.raises(WhiteboxError, match=r"^could not load 'org/other' \(default, test\) from the hub: no network\. "
                                            r"Offline, download the files and pass their local path$"):
        load_mcq_file("hf:org/other@test")


def test_lm_eval_doc_is_mmlus_letters_format_without_a_header():
    from whitebox_eval.tasks.items import MCQItem
    from whitebox_eval.tasks.lm_eval import render_letters

    item = MCQItem(id="mcq/1", question=" Largest ocean? ", options=["Atlantic", "Pacific ", "Indian"], gold=1)
    doc = lm_eval_doc(item)
    assert doc.text == "Largest ocean?\nA. Atlantic\nB. Pacific \nC. Indian\nAnswer:" and doc.description == ""
    assert doc.choices == ["A", "B", "C"] and doc.output == "letters" and doc.metrics == ("acc",)
    r = render_letters(doc, [], item.id)
    assert r.answer_strings == [" A", " B", " C"] and [o.content.of(r.text) for o in r.options] == item.options


def test_per_choice_columns_are_the_run_from_the_first():
    from whitebox_eval.tasks.mcq import find_layout

    assert find_layout(["question", "A", "B", "C", "E", "x", "answer"], {}).choices == ("A", "B", "C")
    assert find_layout(["question", "choice_2", "choice_1", "answer"], {}).choices == ("choice_1", "choice_2")
    assert find_layout(["question", "answer0", "answer1", "label"], {}).choices == ("answer0", "answer1")
    with pytest.raises(RowError, match="no choices"):
        find_layout(["question", "B", "C", "answer"], {})
    with pytest.raises(RowError, match="two sets of choice columns"):
        find_layout(["question", "A", "B", "choice1", "choice2", "answer"], {})
