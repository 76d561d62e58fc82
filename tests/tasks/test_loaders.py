"""Loaders: real-format samples (shared_datasets) and malformed rows (tmp_path fixtures)."""

import json
from collections import Counter

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import LOADERS, load_mcq_dataset
from whitebox_eval.tasks.halueval import HALUEVAL_QUESTION
from whitebox_eval.tasks.hellaswag import HELLASWAG_QUESTION
from whitebox_eval.tasks.loading import load_from_hub
from whitebox_eval.tasks.rows import BadRow, MalformedRowsWarning


# ----------------------------------------------------------------- real-format samples

def test_mmlu_test_folder(shared_datasets):
    items = load_mcq_dataset("mmlu", shared_datasets / "mmlu" / "test")
    assert len(items) == 532 and items.bad_rows == []
    assert {x.subject for x in items} == {"high_school_geography", "marketing", "us_foreign_policy"}
    first_marketing = next(x for x in items if x.subject == "marketing")
    assert first_marketing.question.startswith("This is a hierarchy of effects")
    assert first_marketing.options == ["ADD.", "AIDA.", "PESTLE.", "SWOT."] and first_marketing.gold == 1
    assert len({x.id for x in items}) == len(items)


def test_mmlu_dev_keeps_its_real_repeated_option_row(shared_datasets):
    """high_school_biology_dev.csv:3 lists one option twice; lm-eval scores that row, so do we."""
    items = load_mcq_dataset("mmlu", shared_datasets / "mmlu" / "dev")
    assert len(items) == 57 * 5 and not items.bad_rows
    repeated = [x for x in items if x.repeated_options]
    assert [x.meta["line"] for x in repeated] == [3] and repeated[0].subject == "high_school_biology"
    assert repeated[0].options[0].strip() == repeated[0].options[2].strip()


def test_mmlu_single_file_and_limit(shared_datasets):
    f = shared_datasets / "mmlu" / "dev" / "abstract_algebra_dev.csv"
    items = load_mcq_dataset("mmlu", f, limit=2)
    assert len(items) == 2 and items[0].options == ["0", "1", "2", "3"] and items[0].gold == 1
    assert items[1].options == ["True, True", "False, False", "True, False", "False, True"]


def test_hellaswag_sample(shared_datasets):
    items = load_mcq_dataset("hellaswag", shared_datasets / "hellaswag" / "hellaswag_val_sample.jsonl")
    assert len(items) == 200
    x = items[0]
    assert x.question == HELLASWAG_QUESTION and x.gold == 3 and x.subject == "Pole vault"
    assert x.context.endswith("swing your body. a few women")
    assert x.options[3].startswith("are in the gym practicing")


def test_cosmosqa_sample(shared_datasets):
    items = load_mcq_dataset("cosmosqa", shared_datasets / "cosmosqa" / "valid_sample.csv")
    assert len(items) == 300
    x = items[0]
    assert x.question == "Why is this person asking about divorce ?" and x.gold == 1
    assert x.options[1] == "He wants to get married to a different person ."
    assert x.context.startswith("Do i need to go for a legal divorce ?")


def test_halueval_sample(shared_datasets):
    path = shared_datasets / "halueval" / "dialogue_data_sample.json"
    items = load_mcq_dataset("halueval", path, seed=0)
    assert len(items) == 300
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for x, row in zip(items, rows):
        assert x.question == HALUEVAL_QUESTION and len(x.options) == 4
        assert x.options[x.gold] == row["right_response"].strip()
        assert row["hallucinated_response"].strip() in x.options
        assert x.context == row["dialogue_history"].strip()
    counts = Counter(x.gold for x in items)
    assert max(counts.values()) - min(counts.values()) <= 1
    assert items == load_mcq_dataset("halueval", path, seed=0)
    assert [x.options for x in items] != [x.options for x in load_mcq_dataset("halueval", path, seed=1)]


def test_arc_sample_keeps_its_real_repeated_option_row(shared_datasets):
    """Row 122 of the ARC sample repeats an option; every one of the 300 rows is an item (lm-eval's n)."""
    path = shared_datasets / "arc" / "arc_challenge_sample.llmfoundry.jsonl"
    items = load_mcq_dataset("arc", path)
    assert len(items) == 300 and not items.bad_rows
    assert [i for i, x in enumerate(items) if x.repeated_options] == [121]
    assert items[0].question.startswith("An astronomer observes") and items[0].gold == 2


def test_triviaqa_sample(shared_datasets):
    from whitebox_eval.tasks.answers import normalize_answer as _normalized
    path = shared_datasets / "triviaqa" / "triviaqa_sample.llmfoundry.jsonl"
    items = load_mcq_dataset("triviaqa", path, seed=0)
    assert len(items) == 300
    x = items[0]
    assert x.question == "Brunswick, Lancastrian and Pearl Pickler are types of which vegetable?"
    assert x.options[x.gold] == "Onion" and "Allium cepa" in x.aliases
    for x in items:
        accepted = {_normalized(a) for a in x.accepted_answers()}
        wrong = [o for i, o in enumerate(x.options) if i != x.gold]
        assert len(wrong) == 3 and not ({_normalized(o) for o in wrong} & accepted)


# ----------------------------------------------------------------- malformed rows (tmp_path)

def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def _expect(name, path, line, fragment, n_good):
    with pytest.raises(WhiteboxError) as err:
        load_mcq_dataset(name, path)
    assert f"{path}:{line}:" in str(err.value) and fragment in str(err.value)
    with pytest.warns(MalformedRowsWarning, match=f"{path.name}:{line}"):
        items = load_mcq_dataset(name, path, on_bad_row="skip")
    assert len(items) == n_good
    assert any(b.line == line and fragment in b.reason and b.path == str(path) for b in items.bad_rows)
    return items


MMLU_ROWS = ('Q1?,a,b,c,d,A\n'
             '"Multi\nline?",a,b,c,d,B\n'     # lines 2-3, fine
             'Q3?,a,b,a,d,C\n'                # line 4: a repeated option, kept (lm-eval scores it)
             'Q4?,a,,c,d,D\n'                 # line 5 empty option
             'Q5?,a,b,c,d,Z\n'                # line 6 bad letter
             'Q6?,a,b,c,d\n'                  # line 7 missing field
             'Q7?,a,b,c,d,D\n')


@pytest.mark.parametrize("line, fragment", [
    (5, "option 1 is empty"), (6, "not an option letter"), (7, "expected 6 fields")])
def test_mmlu_malformed_rows(tmp_path, line, fragment):
    path = _write(tmp_path / "x_test.csv", MMLU_ROWS)
    with pytest.warns(MalformedRowsWarning):
        items = load_mcq_dataset("mmlu", path, on_bad_row="skip")
    assert [x.question for x in items] == ["Q1?", "Multi\nline?", "Q3?", "Q7?"]
    assert [b.line for b in items.bad_rows] == [5, 6, 7]
    assert fragment in items.bad_rows[[5, 6, 7].index(line)].reason
    assert items[2].repeated_options


def test_mmlu_headered_variant(tmp_path):
    path = _write(tmp_path / "anatomy_dev.csv",
                  "question,choice0,choice1,choice2,choice3,answer\nQ1?,a,b,c,d,1\nQ2?,a,b,c,d,7\n")
    items = _expect("mmlu", path, 3, "out of range", 1)
    assert items[0].gold == 1 and items[0].subject == "anatomy"


def test_mmlu_folder_without_csv_names_subfolders(tmp_path):
    (tmp_path / "test").mkdir()
    with pytest.raises(WhiteboxError, match=r"sub-folders: \['test'\]"):
        load_mcq_dataset("mmlu", tmp_path)


def test_hellaswag_malformed(tmp_path):
    good = {"ctx": "A man", "endings": ["a", "b", "c", "d"], "label": 1}
    lines = [json.dumps(good), "{not json", json.dumps({**good, "label": 4}),
             json.dumps({k: v for k, v in good.items() if k != "endings"}), "", json.dumps(good)]
    path = _write(tmp_path / "h.jsonl", "\n".join(lines) + "\n")
    items = _expect("hellaswag", path, 2, "invalid JSON", 2)
    assert [(b.line, b.reason.split(" ")[0]) for b in items.bad_rows] == [(2, "invalid"), (3, "gold"), (4, "missing")]


def test_cosmosqa_csv_and_jsonl_malformed(tmp_path):
    header = "id,context,question,answer0,answer1,answer2,answer3,label\n"
    path = _write(tmp_path / "c.csv", header + "1,ctx,q?,a,b,c,d,0\n2,ctx,q?,a,b,c,d,9\n3,ctx,q?,a,b\n")
    items = _expect("cosmosqa", path, 3, "out of range", 1)
    assert [b.line for b in items.bad_rows] == [3, 4]
    row = {"id": "x", "context": "ctx", "question": "q?", "answer0": "a", "answer1": "b",
           "answer2": "c", "answer3": "d", "label": 2}
    jpath = _write(tmp_path / "c.jsonl", json.dumps(row) + "\n" + json.dumps({**row, "answer2": "a"}) + "\n")
    items = load_mcq_dataset("cosmosqa", jpath)  # a repeated option is kept, as lm-eval keeps it
    assert len(items) == 2 and not items.bad_rows and items[1].repeated_options
    assert items[0].id == "cosmosqa/x" and items[0].gold == 2


def test_halueval_malformed(tmp_path):
    rows = [{"knowledge": "k", "dialogue_history": f"[Human]: hi {i}", "right_response": f"right {i}",
             "hallucinated_response": f"wrong {i}"} for i in range(5)]
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, json.dumps({"knowledge": "k", "dialogue_history": "h", "right_response": "r"}))
    path = _write(tmp_path / "d.json", "\n".join(lines) + "\n")
    items = _expect("halueval", path, 3, "missing field 'hallucinated_response'", 5)
    assert all(len(x.options) == 4 and x.options[x.gold].startswith("right") for x in items)


def test_arc_ai2_layout_and_malformed(tmp_path):
    def row(key, labels="ABCD"):
        return json.dumps({"id": "Mercury_1", "question": {"stem": "Which?", "choices": [
            {"text": t, "label": lab} for t, lab in zip(["w", "x", "y", "z"], labels)]}, "answerKey": key})
    path = _write(tmp_path / "ARC-Challenge-Test.jsonl", "\n".join([row("C"), row("3", "1234"), row("E")]) + "\n")
    items = _expect("arc", path, 3, "answerKey 'E'", 2)
    assert items[0].gold == 2 and items[1].gold == 2 and items[0].question == "Which?"


def test_triviaqa_file_distractors_and_malformed(tmp_path):
    rows = [{"context": f"Question: q{i}?\nAnswer:", "answer": f"ans{i}", "aliases": [f"ans{i}", f"alias{i}"]}
            for i in range(6)]
    rows[0]["distractors"] = ["The ans0", "d1", "d2", "d3", "d4"]  # 'The ans0' normalizes to the gold
    lines = [json.dumps(r) for r in rows] + [json.dumps({"context": "Question: q?\nAnswer:"})]
    path = _write(tmp_path / "t.jsonl", "\n".join(lines) + "\n")
    items = _expect("triviaqa", path, 7, "missing field 'answer'", 6)
    x = items[0]
    assert x.question == "q0?" and x.options[x.gold] == "ans0" and x.aliases == ["alias0"]
    assert sorted(o for i, o in enumerate(x.options) if i != x.gold) == ["d1", "d2", "d3"]
    assert x.meta["distractor_source"] == "file"


# ----------------------------------------------------------------- entry point errors

def test_unknown_name_lists_known_ones(tmp_path):
    with pytest.raises(WhiteboxError) as err:
        load_mcq_dataset("squad", tmp_path)
    for name in LOADERS:
        assert name in str(err.value)


def test_missing_path_mentions_hub(tmp_path):
    with pytest.raises(WhiteboxError, match="does not exist.*Hugging Face"):
        load_mcq_dataset("arc", tmp_path / "cais-mmlu")


def _fake_hub(rows_by_id, calls):
    def load_dataset(dataset_id, config, split):
        calls.append((dataset_id, config, split))
        if dataset_id not in rows_by_id:
            raise ConnectionError("no network")
        return rows_by_id[dataset_id]
    return load_dataset


def test_hub_rows_are_exported_to_the_local_format_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path))
    rows = {
        "cais/mmlu": [{"question": "2+2?", "subject": "math", "choices": ["3", "4", "5", "6"], "answer": 1}],
        "allenai/ai2_arc": [{"question": "Sky?", "choices": {"text": ["blue", "green"], "label": ["A", "B"]}, "answerKey": "A"}],
        "mandarjoshi/trivia_qa": [{"question": "Capital of France?", "answer": {"value": "Paris", "aliases": ["Paris", "paris"]}},
                                  {"question": "Capital of Italy?", "answer": {"value": "Rome", "aliases": ["Rome"]}},
                                  {"question": "Capital of Spain?", "answer": {"value": "Madrid", "aliases": []}},
                                  {"question": "Capital of Peru?", "answer": {"value": "Lima", "aliases": []}}],
    }
    calls = []
    fake = _fake_hub(rows, calls)
    mmlu = load_from_hub("mmlu", "cais/mmlu:all@test", load_dataset=fake)
    assert mmlu[0].options == ["3", "4", "5", "6"] and mmlu[0].gold == 1 and mmlu[0].subject == "math"
    arc = load_from_hub("arc", "allenai/ai2_arc:ARC-Challenge", load_dataset=fake)
    assert arc[0].options == ["blue", "green"] and arc[0].gold == 0 and arc[0].question.startswith("Sky?")
    trivia = load_from_hub("triviaqa", "mandarjoshi/trivia_qa:rc.nocontext@validation", load_dataset=fake)
    assert trivia[0].options[trivia[0].gold] == "Paris"
    assert calls[0] == ("cais/mmlu", "all", "test") and calls[1][2] == "test"
    load_from_hub("mmlu", "cais/mmlu:all@test", load_dataset=fake)  # second time: read from the export
    assert len(calls) == 3
    with pytest.raises(WhiteboxError, match="could not load 'nobody/nothing'"):
        load_from_hub("hellaswag", "nobody/nothing", load_dataset=fake)


def test_bad_policy_rejected(tmp_path):
    path = _write(tmp_path / "a.jsonl", json.dumps({"query": "Question: q", "choices": ["a", "b"], "gold": 0}))
    with pytest.raises(WhiteboxError, match="on_bad_row"):
        load_mcq_dataset("arc", path, on_bad_row="ignore")
    assert str(BadRow("f.jsonl", 3, "bad")) == "f.jsonl:3: bad"
