"""tasks.spec: the one reading of --task (TaskSpec) and the MCQ items behind it."""

from __future__ import annotations

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.gsm8k import load_gsm8k
from whitebox_eval.tasks.spec import MCQ_TASKS, TaskSpec, load_mcq


@pytest.mark.parametrize("text, name, path, cats", [
    ("ssd", "ssd", None, ()),
    (" SSD ", "ssd", None, ()),
    ("arithmetic", "arithmetic", None, ()),
    ("arithmetic:add1,mul2", "arithmetic", None, ("add1", "mul2")),
    ("arithmetic-gen:add1", "arithmetic-gen", None, ("add1",)),
    ("mmlu=data/mmlu/test", "mmlu", "data/mmlu/test", ()),
    ("ARC=hf:allenai/ai2_arc:ARC-Challenge@test", "arc", "hf:allenai/ai2_arc:ARC-Challenge@test", ()),
    ("gsm8k=a=b.jsonl", "gsm8k", "a=b.jsonl", ()),
])
def test_parse_and_round_trip(text, name, path, cats):
    spec = TaskSpec.parse(text)
    assert (spec.name, spec.path, spec.categories) == (name, path, cats)
    assert TaskSpec.parse(str(spec)) == spec
    assert spec.to_config() == {"name": name, "path": path, "categories": list(cats)}


@pytest.mark.parametrize("text, accepted, message", [
    ("nosuch", None, "unknown task 'nosuch'"),
    ("arithmetic:", None, "names no category"),
    ("arithmetic:add9", None, "unknown arithmetic category add9"),
    ("ssd:add1", None, "unknown task"),
    ("mmlu=", None, "unknown task"),
    ("hellaswag", None, "--task hellaswag needs its data: write --task hellaswag=PATH"),
    ("arc_challenge=x.jsonl", None, "'arc_challenge' is lm-eval's task name; write --task arc=x.jsonl"),
    ("gsm8k=x.jsonl", MCQ_TASKS, "task 'gsm8k' is not one this study runs"),
])
def test_bad_specs_are_one_line(text, accepted, message):
    with pytest.raises(WhiteboxError, match=message.replace("[", r"\[").replace("(", r"\(")) as exc:
        TaskSpec.parse(text, accepted)
    assert "\n" not in str(exc.value)


def test_ssd_items_are_a_stable_prefix():
    spec = TaskSpec.parse("ssd")
    assert [it.id for it in load_mcq(spec, 10)] == [it.id for it in load_mcq(spec, 30)][:10]


def test_gsm8k_rows(tmp_path):
    f = tmp_path / "g.jsonl"
    f.write_text('{"question": "Q1?", "answer": "2 + 2 = <<2+2=4>>4\\n#### 4"}\n'
                 '{"question": "Q2?", "answer": "so 1,200\\n#### 1,200"}\n')
    rows = load_gsm8k(f)
    assert [(r.id, r.gold, r.solution) for r in rows] == [("gsm8k-1", "4", "2 + 2 = 4"), ("gsm8k-2", "1200", "so 1,200")]
    f.write_text('{"question": "Q?", "answer": "no marker"}\n')
    with pytest.raises(WhiteboxError, match=r"g.jsonl:1: a GSM8K row needs"):
        load_gsm8k(f)
