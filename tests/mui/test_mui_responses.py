"""Tasks, prompt formats, response cutting, generation and correctness checks of the MUI suite."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import CharTokenizer, tiny_lm  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.mui import responses as rsp  # noqa: E402
from whitebox_eval.tasks.answer_checks import choice_from_response, final_number, is_correct  # noqa: E402
from whitebox_eval.tasks.generation import load_generation  # noqa: E402
from whitebox_eval.tasks.spec import GENERATION_TASKS, TaskSpec  # noqa: E402


def _task(text: str, **kw):
    return load_generation(TaskSpec.parse(text, GENERATION_TASKS), **kw)


def test_parse_task():
    assert TaskSpec.parse("ssd", GENERATION_TASKS).name == "ssd"
    assert TaskSpec.parse("arithmetic-gen:add1,mul2", GENERATION_TASKS).categories == ("add1", "mul2")
    with pytest.raises(WhiteboxError, match="unknown task"):
        TaskSpec.parse("trivia", GENERATION_TASKS)
    with pytest.raises(WhiteboxError, match="is not one this study runs"):
        TaskSpec.parse("arithmetic", GENERATION_TASKS)  # the MCQ form; arithmetic-gen is the free one
    with pytest.raises(WhiteboxError, match="cannot read"):
        _task("gsm8k=/nonexistent/file.jsonl")


def test_arithmetic_items_interleave_categories_and_check_numbers():
    items = _task("arithmetic-gen:add1,mul1", limit=4).items
    assert [it.group for it in items] == ["add1", "mul1", "add1", "mul1"]
    it = items[0]
    assert it.question.startswith("Question: What is the value of ")
    assert is_correct(it, f" {it.gold}")
    assert is_correct(it, f"{it.meta['expression']} = {it.gold}")  # restated expression
    assert not is_correct(it, f" {int(it.gold) + 1}")
    assert not is_correct(it, " I don't know")


@pytest.mark.parametrize("text,want", [
    ("B", "B"), ("B. turtle", "B"), ("(C) because", "C"), ("The correct answer is D.", "D"),
    ("Answer: A", "A"), ("turtle", "B"), ("I think it is C.", "C"), ("no idea", None),
])
def test_choice_from_response(text, want):
    assert choice_from_response(text, ["A", "B", "C", "D"], ["dog", "turtle", "cat", "fish"]) == want


@pytest.mark.parametrize("text,want", [
    ("She pays 3 + 4 = 7 dollars. #### 1,234", 1234.0), ("so the answer is $18.", 18.0),
    ("First 5, then 12 and 9", 9.0), ("nothing", None), ("The answer is -3", -3.0),
])
def test_final_number(text, want):
    assert final_number(text) == want


def test_ssd_items_and_prompt_formats():
    task = _task("ssd", limit=3)
    style = task.spec.record.generation
    it = task.items[0]
    assert it.labels == ["A", "B", "C", "D"] and it.check == "choice"
    assert is_correct(it, f"{it.gold}. {it.options[it.labels.index(it.gold)]}")
    base = rsp.PromptFormat.resolve(CharTokenizer())
    assert base == rsp.PromptFormat(shots=1, chat=False)  # base model: one-shot (App. A.6)
    text = rsp.build_prompt(it, style, base)
    assert text.startswith(style.demonstration[0]) and text.endswith(it.question + "\nAnswer:")
    inst = rsp.PromptFormat.resolve(CharTokenizer(chat=True))
    assert inst == rsp.PromptFormat(shots=0, chat=True)  # instruction-tuned: zero-shot, chat template
    text = rsp.build_prompt(it, style, inst, CharTokenizer(chat=True))
    assert text == f"U: {it.question}\n{style.instruction}\nA:"
    with pytest.raises(WhiteboxError, match="chat template"):
        rsp.PromptFormat.resolve(CharTokenizer(), shots=0, chat="on")
    with pytest.raises(WhiteboxError, match="shots"):
        rsp.PromptFormat.resolve(CharTokenizer(), shots=3)


def test_a_task_that_fixes_its_prompt_is_given_as_it_is():
    from whitebox_eval.tasks.generation import GenItem

    it = GenItem(id="x", question="Q", check="exact", gold="a", gold_response=" a", prompt="Context...\nQ: x\nA:")
    style = TaskSpec.parse("gen=x.jsonl").record.generation
    for fmt in (rsp.PromptFormat(1, False), rsp.PromptFormat(0, False)):
        assert rsp.build_prompt(it, style, fmt) == it.prompt
    free = GenItem(id="y", question="Question: x", check="exact", gold="a", gold_response=" a")
    with pytest.raises(WhiteboxError, match="needs a demonstration"):
        rsp.build_prompt(free, style, rsp.PromptFormat(1, False))
    assert rsp.build_prompt(free, style, rsp.PromptFormat(1, False), demonstration=("Question: y", "b")) == \
        "Question: y\nAnswer: b\n\nQuestion: x\nAnswer:"


def test_gsm8k_loader(tmp_path, shared_datasets):
    items = _task(f"gsm8k={shared_datasets / 'gsm8k' / 'test_sample.jsonl'}", limit=5).items
    assert len(items) == 5
    assert items[0].gold == "18"
    assert is_correct(items[0], items[0].gold_response)
    assert "<<" not in items[0].gold_response


def test_gsm8k_loader_rejects_rows_without_final_answer(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    with pytest.raises(WhiteboxError, match="####"):
        _task(f"gsm8k={p}")


def test_mmlu_loader(shared_datasets):
    items = _task(f"mmlu={shared_datasets / 'mmlu' / 'dev'}", limit=6).items
    assert len(items) == 6
    assert len({it.group for it in items}) > 1  # round-robin over subjects
    assert all(is_correct(it, it.gold_response) for it in items)


def test_cut_response_at_eos_and_stop_strings():
    tok = CharTokenizer()
    ids = tok.encode("42\nQuestion")
    r = rsp.cut_response(tok, ids, ("\n",), {2})
    assert r.text == "42" and r.ids == tok.encode("42") and r.stopped_by == "\n"
    r = rsp.cut_response(tok, [*tok.encode("7"), 2, *tok.encode("9")], (), {2})
    assert r.text == "7" and r.stopped_by == "eos"
    r = rsp.cut_response(tok, tok.encode("12"), ("\n\n",), {2})
    assert r.text == "12" and r.stopped_by is None
    r = rsp.cut_response(tok, tok.encode("5 Question: 6"), ("Question:",), {2})  # a stop string over several tokens
    assert r.text == "5 " and r.ids == tok.encode("5 ") and r.stopped_by == "Question:"


def test_responses_equal_hf_generate_greedy_with_left_padding():
    """Rows stop at a generation-config EOS id, a stop string, or run out (seen in this model's output)."""
    import torch

    from whitebox_eval.internals import batch_from_ids

    lm = tiny_lm("llama")
    tok = lm.tokenizer
    prompts = [tok.encode("Question: 12+3?\nAnswer:"), tok.encode("Q: 7*8?\nA:"), tok.encode("5-1=")]
    lm.model.generation_config.eos_token_id = [2, tok.encode("D")[0]]  # e.g. an end-of-turn id beside the EOS
    stops = ("Q)",)
    got = rsp.generate_responses(lm, prompts, max_new_tokens=8, stops=stops)
    assert [r.stopped_by for r in got] == ["eos", "Q)", None]
    batch = batch_from_ids(prompts, pad_id=lm.pad_id)
    with torch.no_grad():
        hf = lm.model.generate(input_ids=batch.input_ids, attention_mask=batch.attention_mask, do_sample=False,
                               max_new_tokens=8, pad_token_id=lm.pad_id)[:, batch.seq_len:]
    want = [rsp.cut_response(tok, row.tolist(), stops, set(lm.stop_ids)) for row in hf]
    assert [(r.ids, r.text, r.stopped_by) for r in got] == [(r.ids, r.text, r.stopped_by) for r in want]
    assert [r.ids for r in rsp.generate_responses(lm, prompts, max_new_tokens=8, stops=stops, edits=[])] == [r.ids for r in got]
    single = rsp.generate_responses(lm, prompts[1:2], max_new_tokens=8, stops=stops)
    assert single[0].ids == got[1].ids


def test_responses_file(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"id": "x", "response": " 5"}) + "\n")
    assert rsp.load_responses_file(p) == {"x": " 5"}
    p.write_text(json.dumps({"id": "x"}) + "\n")
    with pytest.raises(WhiteboxError, match="response"):
        rsp.load_responses_file(p)
