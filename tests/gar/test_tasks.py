"""Task identifiers and the enumeration (sec. 2 "Tasks", sec. 3 counts)."""

from __future__ import annotations

from collections import Counter

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.tasks import (
    GARTask,
    RelationRef,
    enumerate_tasks,
    format_task_id,
    kr_tasks,
    parse_task_id,
    relation_pairs,
)


def test_counts_match_paper():
    tasks = enumerate_tasks()
    assert len(tasks) == 384
    assert sum(not t.g2c for t in tasks) == 192 and sum(t.g2c for t in tasks) == 192
    assert sum(t.n_examples for t in tasks) == 4608
    assert len({t.task_id for t in tasks}) == 384
    pairs = relation_pairs()
    assert len(pairs) == 24
    n_r = Counter(GARTask(l, r).n_r for l, r in pairs)
    assert n_r == {0: 3, 1: 11, 2: 10}


def test_paper_example_id_round_trip():
    text = "GendersOfPersons/same,KindsOfThings/kindOf×3 [negate](swapKV)"
    task = parse_task_id(text)
    assert task == GARTask(RelationRef("GendersOfPersons", "same"),
                           RelationRef("KindsOfThings", "kindOf"), 3, negate=True, swap_kv=True)
    assert format_task_id(task) == text
    assert format_task_id(task, abbreviate=True) == \
        "GendersOfPersons/=,KindsOfThings/∈×3 [negate](swapKV)"


@pytest.mark.parametrize("abbreviate", [False, True])
def test_every_task_id_round_trips(abbreviate):
    for task in enumerate_tasks() + kr_tasks():
        assert parse_task_id(format_task_id(task, abbreviate)) == task


def test_lenient_parsing():
    a = parse_task_id("GendersOfPersons/=, CountriesOfCities/∈ x 2 [](swapKV)")
    assert a.n_kv == 2 and a.swap_kv and not a.negate
    assert a.retrieve == RelationRef("CountriesOfCities", "inCountryOf")
    assert parse_task_id("GendersOfPersons/=,KindsOfThings/=×3 [g2c](swapQA)").g2c


@pytest.mark.parametrize("bad", [
    "GendersOfPersons/same KindsOfThings/kindOf",
    "Foo/same,KindsOfThings/kindOf×3",
    "GendersOfPersons/kindOf,KindsOfThings/kindOf×3",
    "GendersOfPersons/same,KindsOfThings/kindOf×3 [negat]",
    "KindsOfThings/kindOf,GendersOfPersons/same×3",   # object schema cannot be r_lookup
    "GendersOfPersons/sameGender,KindsOfThings/kindOf×3",  # not a task relation kind
    "GendersOfPersons/same,KindsOfThings/kindOf×0",
])
def test_bad_ids_raise(bad):
    with pytest.raises(WhiteboxError):
        parse_task_id(bad)


def test_kr_tasks_and_difficulty():
    kr = kr_tasks()
    assert len(kr) == 7 and all(t.is_kr and t.n_kv == 0 for t in kr)
    t = parse_task_id("OccupationOfPersons/worksAsA,UsagesOfThings/usedFor×3")
    assert t.n_r == 2 and t.syntactic == "none"
    assert parse_task_id("GendersOfPersons/=,KindsOfThings/=×3 (swapQA,swapKV)").syntactic == \
        "swapQA,swapKV"
