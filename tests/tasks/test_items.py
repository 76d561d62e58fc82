"""MCQItem validation and helpers."""

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem


def _item(**kw):
    base = dict(id="q1", question="Where is the Louvre museum?", options=["Paris", "Lyon", "Geneva", "Vichy"], gold=0)
    base.update(kw)
    return MCQItem(**base)


def test_valid_item_passes_and_returns_itself():
    item = _item()
    assert item.validate() is item
    assert item.gold_text == "Paris"


@pytest.mark.parametrize("kw, fragment", [
    (dict(gold=4), "out of range"),
    (dict(gold=-1), "out of range"),
    (dict(gold="A"), "integer"),
    (dict(options=["Paris", "  ", "Lyon"]), "option 1 is empty"),
    (dict(options=["Paris"]), "at least 2"),
    (dict(question=" "), "question is empty"),
])
def test_malformed_items_raise_whitebox_error(kw, fragment):
    with pytest.raises(WhiteboxError, match=fragment):
        _item(**kw).validate()


def test_repeated_options_are_kept_and_marked():
    """lm-eval scores rows whose options repeat, so they are valid items (marked, not dropped)."""
    it = _item(options=["Paris", "Lyon", "Paris "]).validate()
    assert it.repeated_options and not _item().validate().repeated_options


def test_error_names_the_item():
    with pytest.raises(WhiteboxError, match="'q1'"):
        _item(gold=9).validate()


def test_permuted_moves_gold_with_its_text():
    item = _item(gold=2)
    p = item.permuted([2, 0, 3, 1])
    assert p.options == ["Geneva", "Paris", "Vichy", "Lyon"]
    assert p.gold_text == "Geneva" and p.gold == 0
    assert item.options == ["Paris", "Lyon", "Geneva", "Vichy"]  # original untouched
    with pytest.raises(WhiteboxError, match="permutation"):
        item.permuted([0, 0, 1, 2])


def test_accepted_answers_put_gold_first_without_repeats():
    item = _item(aliases=["Paris", "Paris, France"])
    assert item.accepted_answers() == ["Paris", "Paris, France"]
