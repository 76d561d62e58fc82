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


def test_the_validation_exact_match_agrees_with_greedy_decoding(tiny_smol_folder):
    """The teacher-forced exact match (validation, every few steps) is what the greedy decoder of
    the check gives: a tiny model taught one free-format answer gets it right in both, and a
    wrong answer wrong in both."""
    from whitebox_eval.finetune.check import _free_format, free_exact_match
    from whitebox_eval.finetune.splits import make_splits
    from whitebox_eval.models import load_model
    from whitebox_eval.models.training import Recipe, train_rows
    from whitebox_eval.tasks.prompts import render_prompt

    items, _ = load_items(parse_source("arithmetic-text:add2"), 12, seed=0)
    splits = make_splits(items, validation=0.2, test=0.2, shots=1, seed=0)
    assert not {it.form for it in splits.demos} & {it.form for it in splits.train}
    lm = load_model(str(tiny_smol_folder))
    target = splits.test[0]
    tok = lm.tokenizer
    prompt = list(tok(render_prompt(target.source, fmt="free", demos=[splits.demos[0].source]).text)["input_ids"])
    answer = list(tok(f" {target.source.meta['answer']}\n", add_special_tokens=False)["input_ids"])
    seq = (prompt + answer, list(range(len(prompt) - 1, len(prompt) + len(answer) - 1)), answer)
    assert free_exact_match(lm, [target], splits.demos, batch_size=2) == [False]
    train_rows(lm, [seq], Recipe(1e-2, (0.9, 0.999), 0.0, 1, 40, 0, "t"))
    other = splits.validation[0]
    assert other.source.meta["answer"] != target.source.meta["answer"]
    exact = free_exact_match(lm, [target, other], splits.demos, batch_size=2)
    greedy = [r["correct"] for r in _free_format(lm, [target, other], splits.demos, 0, 0, 6)]
    assert exact == greedy == [True, False]


def test_an_answer_ended_by_a_double_newline_token_is_right_in_both(tiny_smol_folder):
    """A tiny model taught to close a free-format answer with the one-token blank line ("\n\n"):
    the decoder cuts its text at the newline and reads the answer right, and so does the
    validation exact match (a line ends at any token the newline stop cuts to white space)."""
    from whitebox_eval.finetune.check import _free_format, free_exact_match, line_end_ids
    from whitebox_eval.finetune.splits import make_splits
    from whitebox_eval.models import load_model
    from whitebox_eval.models.training import Recipe, train_rows
    from whitebox_eval.tasks.prompts import render_prompt

    lm = load_model(str(tiny_smol_folder))
    tok = lm.tokenizer
    blank = tok("\n\n", add_special_tokens=False)["input_ids"]
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    assert len(blank) == 1 and blank != newline and {blank[0], newline[0]} <= line_end_ids(tok)
    words = {tok(w, add_special_tokens=False)["input_ids"][-1] for w in (" 7", " A", ".")}
    assert not words & line_end_ids(tok)
    items, _ = load_items(parse_source("arithmetic-text:add2"), 12, seed=0)
    splits = make_splits(items, validation=0.2, test=0.2, shots=1, seed=0)
    target = splits.test[0]
    prompt = list(tok(render_prompt(target.source, fmt="free", demos=[splits.demos[0].source]).text)["input_ids"])
    answer = list(tok(f" {target.source.meta['answer']}", add_special_tokens=False)["input_ids"]) + blank
    seq = (prompt + answer, list(range(len(prompt) - 1, len(prompt) + len(answer) - 1)), answer)
    train_rows(lm, [seq], Recipe(1e-2, (0.9, 0.999), 0.0, 1, 40, 0, "t"))
    greedy = _free_format(lm, [target], splits.demos, 0, 0, 6)[0]
    assert greedy["correct"] and greedy["response"].strip() == str(target.source.meta["answer"])
    assert free_exact_match(lm, [target], splits.demos, batch_size=2) == [True]


def test_need_end_false_reads_the_answer_without_its_end(tiny_smol_folder):
    """A tiny model taught a free-format answer's digits but not the line's end: the exact match
    (which needs the end) says no, the digits-only reading says yes."""
    from whitebox_eval.finetune.check import free_exact_match
    from whitebox_eval.finetune.splits import make_splits
    from whitebox_eval.models import load_model
    from whitebox_eval.models.training import Recipe, train_rows
    from whitebox_eval.tasks.prompts import render_prompt

    items, _ = load_items(parse_source("arithmetic-text:add2"), 12, seed=0)
    splits = make_splits(items, validation=0.2, test=0.2, shots=1, seed=0)
    lm = load_model(str(tiny_smol_folder))
    target, tok = splits.test[0], lm.tokenizer
    prompt = list(tok(render_prompt(target.source, fmt="free", demos=[splits.demos[0].source]).text)["input_ids"])
    digits = list(tok(f" {target.source.meta['answer']}", add_special_tokens=False)["input_ids"])
    seq = (prompt + digits, list(range(len(prompt) - 1, len(prompt) + len(digits) - 1)), digits)
    train_rows(lm, [seq], Recipe(1e-2, (0.9, 0.999), 0.0, 1, 40, 0, "t"))
    assert free_exact_match(lm, [target], splits.demos, batch_size=2, need_end=False) == [True]
    assert free_exact_match(lm, [target], splits.demos, batch_size=2) == [False]


def test_the_estimate_reads_each_line_with_its_context():
    """``train_context K``: the training part of the estimate is (1 + K) times the lines-alone one;
    the check and the validation passes do not change."""
    from whitebox_eval.finetune.config import FinetuneConfig
    from whitebox_eval.finetune.record import work

    def units(k: int, steps: int) -> float:
        cfg = FinetuneConfig(task="arithmetic-text:add2,sub2", limit=3000, test=0.04, validation=0.05, max_steps=steps,
                             train_batch_size=8, eval_every=1000, train_context=k)  # one evaluation
        return work(cfg, "study")[1]

    alone, ctx = units(0, 200) - units(0, 100), units(5, 200) - units(5, 100)  # the training part of 100 steps
    assert ctx == pytest.approx(6 * alone) and alone > 0
    assert units(5, 100) - ctx == pytest.approx(units(0, 100) - alone)


def test_the_estimate_counts_a_mixed_line_s_extra_words():
    """``line_style mixed``: the training part of the estimate grows by the styles' mean extra pieces over a
    plain line's ~13 tokens, counted by hand: "75 + 22 = 97" is 8 pieces (six digits, two signs); "equals"
    and "is" 8, "Result:" on its own line 10, "Work out ... .\\nSolution:" 13, "Calculate ...:" 9, so
    4/3 more on average; the check and the validation passes do not change."""
    from whitebox_eval.finetune.arithmetic_text import extra_pieces
    from whitebox_eval.finetune.config import FinetuneConfig
    from whitebox_eval.finetune.record import work

    assert extra_pieces("plain") == 0 and extra_pieces("mixed") == pytest.approx((8 + 8 + 8 + 10 + 13 + 9) / 6 - 8)

    def units(style: str, steps: int) -> float:
        cfg = FinetuneConfig(task="arithmetic-text:add2,sub2", limit=3000, test=0.04, validation=0.05, max_steps=steps,
                             train_batch_size=8, eval_every=1000, line_style=style)  # one evaluation
        return work(cfg, "study")[1]

    plain, mixed = units("plain", 200) - units("plain", 100), units("mixed", 200) - units("mixed", 100)
    assert mixed == pytest.approx(plain * (1 + 4 / 3 / 13)) and plain > 0
    assert units("mixed", 100) - mixed == pytest.approx(units("plain", 100) - plain)


def test_mixed_lines_are_the_same_problems_in_neutral_styles():
    """``line_style mixed``: the same problems, answers, canonical forms and so the same splits as
    plain lines; every style of MIXED_STYLES drawn; none with a question template's words; each
    line's style fixed by its problem (the same at another limit)."""
    from whitebox_eval.finetune.arithmetic_text import MIXED_STYLES
    from whitebox_eval.finetune.splits import make_splits

    source = parse_source("arithmetic-text:add2,sub2")
    plain, _ = load_items(source, 400, seed=0)
    mixed, _ = load_items(source, 400, seed=0, line_style="mixed")
    assert [(it.id, it.form, it.answer) for it in plain] == [(it.id, it.form, it.answer) for it in mixed]
    record = [make_splits(x, validation=0.1, test=0.1, shots=5, seed=0).record(0) for x in (plain, mixed)]
    assert record[0] == record[1]
    shapes = [it.prompt.replace(it.source.meta["expression"], "{e}") for it in mixed]
    assert set(shapes) == set(MIXED_STYLES) and all(shapes.count(s) > 30 for s in MIXED_STYLES)
    for it in mixed:
        assert it.source.meta["expression"] in it.prompt
        assert not any(w in it.prompt for w in ("Question", "What is the value", "Answer", "?"))
    again, _ = load_items(source, 40, seed=0, line_style="mixed")
    assert [it.prompt for it in again] == [it.prompt for it in mixed[:40]]
    assert all(it.prompt.endswith(" =") for it in plain)


def test_line_style_is_checked_and_omitted_from_the_config_when_plain():
    from whitebox_eval.finetune.arithmetic_text import line_of
    from whitebox_eval.finetune.config import FinetuneConfig

    assert "line_style" not in FinetuneConfig(task="arithmetic-text:add2").to_dict()
    cfg = FinetuneConfig(task="arithmetic-text:add2", line_style="mixed")
    cfg.check()
    assert cfg.to_dict()["line_style"] == "mixed"
    with pytest.raises(WhiteboxError, match="line_style applies to arithmetic-text"):
        FinetuneConfig(task="arithmetic-gen", line_style="mixed").check()
    with pytest.raises(WhiteboxError, match="line_style is one of"):
        FinetuneConfig(task="arithmetic-text:add2", line_style="fancy").check()
    with pytest.raises(WhiteboxError, match="line_style is one of"):
        line_of("1 + 2", 3, "fancy")
