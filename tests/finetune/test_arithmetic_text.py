"""Format-neutral arithmetic text: lines in neither of 004's question formats, none of them a question
004's formats children ask."""

from __future__ import annotations

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune.sources import ARITH, load_items, parse_source
from whitebox_eval.finetune.splits import canonical


def test_lines_are_bare_sums_in_neither_question_format():
    items, task = load_items(parse_source("arithmetic-text:add2,sub3"), 20, seed=0)
    assert task is None and len(items) == 20
    first = items[0]
    assert first.prompt.endswith(" =") and "?" not in first.prompt and "value" not in first.prompt
    expression = first.source.meta["expression"]
    assert first.prompt == f"{expression} =" and first.answer == f" {first.source.meta['answer']}"
    assert {it.source.meta["category"] for it in items} == {"add2", "sub3"}
    assert len({it.form for it in items}) == 20


def test_no_training_line_is_a_question_the_formats_child_asks():
    from whitebox_eval.formats.study import FormatsConfig, load_format_items

    items, _ = load_items(parse_source("arithmetic-text:add2,sub2"), 400, seed=0)
    data = load_format_items(FormatsConfig(task="arithmetic:add2,sub2", limit=120, shots=5))
    asked = {canonical(it.meta["expression"]) for it in [*data.items, *data.demos]}
    assert len(asked) > 100
    assert not asked & {it.form for it in items}


def test_a_category_every_problem_of_which_is_asked_gives_none():
    items, _ = load_items(parse_source("arithmetic-text:mul1,add2"), 10, seed=0)
    assert {it.source.meta["category"] for it in items} == {"add2"}
    with pytest.raises(WhiteboxError, match="every problem"):
        load_items(parse_source("arithmetic-text:mul1"), 10, seed=0)


def test_the_source_is_parsed_and_refuses_unknown_categories():
    assert parse_source("arithmetic-text").kind == ARITH
    assert len(parse_source("arithmetic-text").spec) == 16
    with pytest.raises(WhiteboxError, match="unknown arithmetic categories"):
        parse_source("arithmetic-text:add9")
