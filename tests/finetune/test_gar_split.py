"""``finetune --task gar``'s items and splits: training lines from the train half in an equal mix of
the conditions 002's claims compare, the test split the test half exactly as ``gar --elements test``
draws it, no test element in any training or validation line, deterministic and recorded."""

from __future__ import annotations

from collections import Counter

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune import gar_tasks
from whitebox_eval.finetune.sources import Item, load_items, parse_source
from whitebox_eval.finetune.splits import canonical
from whitebox_eval.gar.elements import element_split
from whitebox_eval.gar.selection import example_id, select_tasks, task_examples

PAIRS = ("GendersOfPersons/same,CountriesOfCities/same", "GendersOfPersons/isA,KindsOfThings/kindOf",
         "OccupationOfPersons/worksAsA,Adjectives/synonym")
#: 3 relation pairs (n_r 0, 2, 2) x negate x {none, swapQA} x format: 24 tasks in 16 cells
TASKS = "; ".join(f"{p}×3{' ' if s or n or g else ''}{'[' if n or g else ''}{','.join(x for x, on in (('negate', n), ('g2c', g)) if on)}"
                  f"{']' if n or g else ''}{'(swapQA)' if s else ''}"
                  for p in PAIRS for n in (False, True) for g in (False, True) for s in (False, True))


@pytest.fixture(scope="module")
def drawn():
    source = parse_source(f"gar:{TASKS}")
    items, _ = load_items(source, 160, seed=0, test=0.2)
    return source, items, gar_tasks.splits(items, validation=0.1, seed=0)


def test_training_is_an_equal_mix_of_the_compared_conditions(drawn):
    source, items, _ = drawn
    train = [it for it in items if it.id.startswith("train:")]
    cells = Counter(gar_tasks.cell(it.source.task) for it in train)
    assert len(source.spec) == 24 and len(cells) == 16 and set(cells.values()) == {10}  # 160 // 16
    for key in ("n_r", "negate", "syntactic", "g2c"):  # each level of each condition equally often
        assert set(Counter(getattr(it.source.task, key) for it in train).values()) == {80}
    yes = Counter(it.source.target for it in train if it.source.task.g2c)
    assert yes["Yes"] == yes["No"]  # whole Yes/No pairs


def test_no_test_element_is_in_a_training_line_and_the_splits_are_disjoint(drawn):
    _, items, s = drawn
    test_elements = element_split(0)["test"].elements
    assert gar_tasks.leaked(s.train + s.validation, test_elements) == []
    assert all(gar_tasks.leaked([it], test_elements) for it in s.test if it.source.value in test_elements)
    forms = [it.form for part in (s.train, s.validation, s.test) for it in part]
    assert len(forms) == len(set(forms))
    assert {it.id.partition(":")[0] for it in s.test} == {"test"}
    assert {it.id.partition(":")[0] for it in s.train + s.validation} == {"train"}


def test_a_test_element_in_a_training_line_is_refused(drawn):
    _, items, _ = drawn
    test_item = next(it for it in items if it.id.startswith("test:"))
    planted = Item("train:planted", test_item.prompt, test_item.answer, canonical("planted" + test_item.prompt), None)
    with pytest.raises(WhiteboxError, match="training lines name test elements"):
        gar_tasks.splits([planted, *items], validation=0.1, seed=0)


def test_the_test_split_is_what_gar_elements_test_evaluates(drawn):
    source, _, s = drawn
    n = gar_tasks.test_per_task(160, 0.2, len(source.spec))
    examples = task_examples(select_tasks(TASKS, include_kr=False), n, 0, element_split(0)["test"])
    assert [f"test:{example_id(e)}" for e in examples] == [it.id for it in s.test] and n == 2


def test_the_splits_are_deterministic_and_recorded(drawn):
    source, items, s = drawn
    again, _ = load_items(source, 160, seed=0, test=0.2)
    other, _ = load_items(source, 160, seed=1, test=0.2)
    assert [it.form for it in again] == [it.form for it in items]
    rec = s.record(0)
    assert rec == gar_tasks.splits(again, validation=0.1, seed=0).record(0)
    assert rec["test"]["sha256"] != gar_tasks.splits(other, validation=0.1, seed=1).record(1)["test"]["sha256"]
    assert element_split(0)["test"].sha256 in rec["rule"] and rec["demos"]["n"] == 0
    sizes = gar_tasks.sizes(source.spec, 160, 0.2, 0.1)
    assert sizes == {"train": len(s.train), "validation": len(s.validation), "test": len(s.test)}
