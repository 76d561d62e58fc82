"""BIG-Bench task.json files asked as BIG-Bench Hard asks them: three demonstrations from the file,
options lettered in a seeded shuffled order (multiple_choice_grade), or an exact string match."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import bigbench
from whitebox_eval.tasks.answer_checks import is_correct
from whitebox_eval.tasks.generation import load_generation
from whitebox_eval.tasks.spec import GENERATION_TASKS, GENERATION_USAGE, TaskSpec

MC = {"name": "toy_mc", "task_prefix": "Pick the colour of the sky.\n\n", "metrics": ["multiple_choice_grade"],
      "examples": [{"input": f"Sky {i}?", "target_scores": {"blue": 1, "green": 0, "red": 0}} for i in range(8)]}
EXACT = {"name": "toy_count", "description": "Count things.", "metrics": ["exact_str_match"],
         "examples": [{"input": f"I have {'a cat, ' * i}a dog. How many animals?", "target": [w, str(i + 1)]}
                      for i, w in enumerate(["one", "two", "three", "four", "five", "six"])]}


def write(folder: Path, name: str, doc: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.task.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def spec(path) -> TaskSpec:
    return TaskSpec.parse(f"bigbench={path}", GENERATION_TASKS, GENERATION_USAGE)


def test_a_multiple_choice_task_is_asked_with_lettered_shuffled_options_after_three_shots(tmp_path):
    items = load_generation(spec(write(tmp_path, "toy_mc", MC))).items
    assert [it.id for it in items] == [f"toy_mc/{i}" for i in range(3, 8)]  # the first three are demonstrations
    it = items[0]
    assert it.prompt.startswith("Pick the colour of the sky.\n\nQ: Sky 0?\nOptions:\n(A) ")
    assert it.prompt.count("Q: ") == 4 and it.prompt.endswith("Q: Sky 3?\nOptions:\n" + "\n".join(
        f"({lab}) {opt}" for lab, opt in zip("ABC", it.options)) + "\nA:")
    for x in items:  # the gold letter is where "blue" was shuffled to; the letter read from a response decides
        assert x.options[x.labels.index(x.gold)] == "blue" and sorted(x.options) == ["blue", "green", "red"]
        assert is_correct(x, f" ({x.gold})") and is_correct(x, x.gold_response)
        assert not is_correct(x, f" ({next(lab for lab in x.labels if lab != x.gold)})")
    assert len({x.gold for x in items}) > 1  # not always A (BIG-Bench lists the correct choice first)
    again = load_generation(spec(tmp_path / "toy_mc.task.json")).items
    assert [x.options for x in again] == [x.options for x in items]  # seeded: the same order every time


def test_an_exact_match_task_accepts_any_target_after_normalisation(tmp_path):
    items = load_generation(spec(write(tmp_path, "toy_count", EXACT))).items
    it = items[0]  # example 3: four animals
    assert it.prompt.startswith("Count things.\n\nQ: I have a dog. How many animals?\nA: 1\n\n")  # numeral answers
    assert it.check == "exact" and it.references == ["four", "4"] and it.gold_response == " 4"
    assert is_correct(it, " 4") and is_correct(it, " Four.\nQ: next") and not is_correct(it, " 5")


def test_a_folder_deals_its_tasks_in_turn_and_groups_by_task(tmp_path):
    write(tmp_path / "bb", "toy_mc", MC)
    write(tmp_path / "bb", "toy_count", EXACT)
    items = load_generation(spec(tmp_path / "bb"), limit=4).items
    assert [it.group for it in items] == ["toy_count", "toy_mc", "toy_count", "toy_mc"]


def test_bad_files_are_one_line(tmp_path):
    with pytest.raises(WhiteboxError, match="needs a non-empty 'examples'"):
        load_generation(spec(write(tmp_path, "empty", {"examples": []})))
    with pytest.raises(WhiteboxError, match="example 1 needs an 'input'"):
        load_generation(spec(write(tmp_path, "bad", {"examples": [MC["examples"][0], {"input": "x"}]})))
    with pytest.raises(WhiteboxError, match="3 are demonstrations"):
        load_generation(spec(write(tmp_path, "short", {"examples": MC["examples"][:3]})))


def test_the_shared_tasks_read_as_published(shared_datasets):
    folder = shared_datasets / "bigbench"
    counts = {bigbench.task_name(p, {}): len(bigbench.task_items(p)) for p in bigbench.task_files(folder)}
    assert counts == {"date_understanding": 366, "logical_deduction_three_objects": 297, "object_counting": 997,
                      "sports_understanding": 997}
    for p in bigbench.task_files(folder):
        _, _, examples = bigbench.read_task(p)
        for it, ex in zip(bigbench.task_items(p), examples[bigbench.SHOTS:]):
            if "target_scores" in ex:  # the gold letter names the choice BIG-Bench scores 1
                assert ex["target_scores"][it.options[it.labels.index(it.gold)]] == 1
            else:
                assert it.references == ex["target"]
