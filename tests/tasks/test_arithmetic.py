"""Arithmetic dataset of paper 004 App. B."""

import re
from collections import Counter

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.arithmetic import (
    ARITHMETIC_CATEGORIES, evaluate, make_arithmetic, make_arithmetic_suite)
from whitebox_eval.tasks.prompts import render_prompt


def test_categories_are_the_papers():
    assert ARITHMETIC_CATEGORIES == (
        "add1", "add2", "add3", "add4", "add5", "sub1", "sub2", "sub3", "sub4", "sub5",
        "mul1", "mul2", "mul3", "multiops1", "multiops2", "multiops3")


@pytest.mark.parametrize("operands, ops, answer", [  # Table 5 examples
    ((8, 8, 4), ("*", "-"), 60),
    ((22, 35, 84), ("+", "-"), -27),
    ((727, 590, 722), ("+", "*"), 426707),
    ((48732, 62785), ("-",), -14053),
    ((887, 895), ("*",), 793865),
])
def test_evaluate_matches_table_5(operands, ops, answer):
    assert evaluate(operands, ops) == answer


def _reference(expression: str) -> int:
    assert re.fullmatch(r"[0-9 +*-]+", expression)
    return eval(expression)  # only digits and + - * here: an independent reference


@pytest.mark.parametrize("category", ARITHMETIC_CATEGORIES)
def test_answers_correct_distractors_distinct_and_wrong(category):
    items = make_arithmetic(category, 40, seed=5)
    kind = category.rstrip("0123456789")
    digits = int(category[len(kind):])
    for x in items:
        answer = _reference(x.meta["expression"])
        assert x.meta["answer"] == answer and x.options[x.gold] == str(answer) and x.aliases == [str(answer)]
        assert len(set(x.options)) == 4
        assert all(int(o) != answer for i, o in enumerate(x.options) if i != x.gold)
        assert x.question == f"What is the value of {x.meta['expression']}?"
        assert len(x.meta["operands"]) == (3 if kind == "multiops" else 2)
        assert all(len(str(v)) == digits for v in x.meta["operands"])
        if kind == "multiops":
            assert len(set(x.meta["operators"])) == 2
        else:
            assert x.meta["operators"] == [{"add": "+", "sub": "-", "mul": "*"}[kind]]
    counts = Counter(x.gold for x in items)
    assert max(counts.values()) - min(counts.values()) <= 1


def test_seeded():
    assert make_arithmetic("mul2", 30, seed=1) == make_arithmetic("mul2", 30, seed=1)
    assert make_arithmetic("mul2", 30, seed=1) != make_arithmetic("mul2", 30, seed=2)


def test_suite_and_three_formats():
    suite = make_arithmetic_suite(3, seed=0)
    assert len(suite) == 3 * 16 and len({x.id for x in suite}) == 48
    x = suite[0]
    assert render_prompt(x, fmt="mcq_plain").text.endswith("\nAnswer:")
    free = render_prompt(x, fmt="free")
    assert free.text == f"Question: {x.question}\nAnswer:" and free.gold_answer == " " + x.aliases[0]
    opts = render_prompt(x, fmt="free_options")
    assert "Here are some possible answers:\n" + "\n".join(x.options) + "\nAnswer:" in opts.text


def test_unknown_category_raises():
    with pytest.raises(WhiteboxError, match="add6"):
        make_arithmetic("add6", 3)
