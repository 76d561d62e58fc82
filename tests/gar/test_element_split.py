"""The element split of the GAR generator: each category's elements in a train and a test half,
disjoint, seeded, recorded by hash; the generator on one half names no element of the other; the
full benchmark is unchanged without a half."""

from __future__ import annotations

import hashlib
import json

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.config import GARConfig
from whitebox_eval.gar.elements import HALVES, element_half, element_split, mentioned, split_record
from whitebox_eval.gar.generator import generate_gar
from whitebox_eval.gar.schemas import SCHEMA_NAMES, load_schema
from whitebox_eval.gar.tasks import enumerate_tasks, kr_tasks

#: SHA-256 of every example of the 384 tasks at seed 0 (to_dict, sorted keys), as before the split existed
FULL_BENCHMARK_SHA256 = "0f8826fa9b14bb84a5c23d7e2a0d631f99f71595eef7b9992fab91d5d631e153"


def test_the_halves_are_disjoint_cover_every_element_and_keep_every_category_in_both():
    halves = element_split(0)
    train, test = halves["train"].elements, halves["test"].elements
    every = {e for name in SCHEMA_NAMES for e in load_schema(name).elements}
    assert not train & test and train | test == every
    for name in SCHEMA_NAMES:
        schema = load_schema(name)
        for cat, members in schema.categories.items():
            assert set(members) & train and set(members) & test, (name, cat)
            assert len(set(members) & train) >= len(members) // 2  # train holds half, rounded up, or more
        for g1, g2 in schema.antonym_pairs:  # Adjectives: a whole antonym pair in one half
            assert len({"train" if a in train else "test" for a in (*g1, *g2)}) == 1
    assert "kind" in train  # a word of the templates ("a kind of") is never a test element


def test_the_split_is_seeded_and_recorded_by_hash():
    again = element_split.__wrapped__(0)  # computed afresh, not the cached one
    assert {h: again[h].elements for h in HALVES} == {h: element_split(0)[h].elements for h in HALVES}
    rec, other = split_record(0), split_record(1)
    for h in HALVES:
        assert rec[h]["sha256"] == hashlib.sha256("\n".join(sorted(element_split(0)[h].elements)).encode()).hexdigest()
        assert rec[h]["sha256"] != other[h]["sha256"]
    assert rec["train"]["n"] + rec["test"]["n"] == len({e for n in SCHEMA_NAMES for e in load_schema(n).elements})
    assert sum(sum(rec[h]["by_schema"].values()) for h in HALVES) == sum(len(load_schema(n).elements)
                                                                        for n in SCHEMA_NAMES)


@pytest.mark.parametrize("name", HALVES)
def test_every_task_on_one_half_names_no_element_of_the_other(name):
    halves = element_split(0)
    other = halves["test" if name == "train" else "train"].elements - {"kind"}  # "kind": template text
    examples = generate_gar(seed=0, half=halves[name]) + generate_gar(kr_tasks(), seed=0, half=halves[name])
    assert len(examples) == 4608 + 8 * len(kr_tasks())
    named = [(ex.task_id, mentioned(ex.prompt + " " + ex.target) & other) for ex in examples]
    assert [n for n in named if n[1]] == []
    assert all(ex.value in halves[name].elements for ex in examples)


def test_mentioned_reads_the_longest_element_and_folds_case():
    assert mentioned("Tokyo Tower attracts John. Kind describes Mary.") == {"Tokyo Tower", "John", "kind", "Mary"}
    assert "Tokyo" not in mentioned("Tokyo Tower")


def test_without_a_half_the_benchmark_is_the_papers_as_before():
    h = hashlib.sha256()
    for ex in generate_gar(seed=0):
        h.update(json.dumps(ex.to_dict(), sort_keys=True).encode())
    assert h.hexdigest() == FULL_BENCHMARK_SHA256
    first = generate_gar(enumerate_tasks()[:1], seed=0, half=element_split(0)["test"])
    assert first[0].prompt != generate_gar(enumerate_tasks()[:1], seed=0)[0].prompt


def test_elements_outside_evaluate_and_truth_heads_is_one_line(cli, tmp_path):
    code, _, err = cli(["gar", "--mode", "attribute", "--elements", "test", "--output", str(tmp_path)])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "applies to --mode evaluate and truth-heads" in lines[0]
    assert not any(tmp_path.iterdir())


def test_the_config_records_elements_only_when_a_half_is_asked():
    assert "elements" not in GARConfig().to_dict()
    assert GARConfig(elements="test").to_dict()["elements"] == "test"
    with pytest.raises(WhiteboxError, match="elements 'half'"):
        element_half("half", 0)
