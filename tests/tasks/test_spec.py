"""tasks.spec: the one reading of --task (TaskSpec) and the MCQ items behind it."""

from __future__ import annotations

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.gsm8k import load_gsm8k
from whitebox_eval.tasks.loading import load_mcq
from whitebox_eval.tasks.spec import MCQ_TASKS, TaskSpec


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


@pytest.mark.parametrize("task", ["ssd", "arithmetic", "arithmetic:add1,mul2,multiops3", "arithmetic-gen"])
@pytest.mark.parametrize("n", [1, 7, 10, 33])
def test_generated_items_are_a_stable_prefix(task, n):
    spec = TaskSpec.parse(task)
    short, long = load_mcq(spec, n, seed=3), load_mcq(spec, 70, seed=3)
    assert len(short) == n
    assert [(it.id, it.question, it.options, it.gold) for it in short] == \
        [(it.id, it.question, it.options, it.gold) for it in long[:n]]


def test_arithmetic_deals_categories_in_turn_and_balances_golds():
    from collections import Counter

    from whitebox_eval.tasks.arithmetic import ARITHMETIC_CATEGORIES

    items = load_mcq(TaskSpec.parse("arithmetic"), 16 * 8, seed=1)
    assert [it.subject for it in items[:16]] == list(ARITHMETIC_CATEGORIES)
    for c in ARITHMETIC_CATEGORIES:
        golds = [it.gold for it in items if it.subject == c]
        assert all(sorted(golds[b:b + 4]) == [0, 1, 2, 3] for b in range(0, 8, 4))  # every block of 4
        assert Counter(golds) == {0: 2, 1: 2, 2: 2, 3: 2}


def test_gsm8k_rows(tmp_path):
    f = tmp_path / "g.jsonl"
    f.write_text('{"question": "Q1?", "answer": "2 + 2 = <<2+2=4>>4\\n#### 4"}\n'
                 '{"question": "Q2?", "answer": "so 1,200\\n#### 1,200"}\n')
    rows = load_gsm8k(f)
    assert [(r.id, r.gold, r.solution) for r in rows] == [("gsm8k-1", "4", "2 + 2 = 4"), ("gsm8k-2", "1200", "so 1,200")]
    f.write_text('{"question": "Q?", "answer": "no marker"}\n')
    with pytest.raises(WhiteboxError, match=r"g.jsonl:1: a GSM8K row needs"):
        load_gsm8k(f)


def test_kind_hub_path_short_and_slug_are_read_once_from_the_spec():
    from whitebox_eval.tasks.hub import HubPath

    hub = TaskSpec.parse("hellaswag=hf:Rowan/hellaswag@validation")
    assert hub.hub == HubPath("Rowan/hellaswag", "", "validation") and str(hub.hub) == "hf:Rowan/hellaswag@validation"
    assert hub.short == "hellaswag=hellaswag@validation" and hub.slug == "hellaswag-hellaswag-validation"
    assert HubPath.parse("hf:cais/mmlu:all").with_split("dev").spec == "cais/mmlu:all@dev"
    local = TaskSpec.parse("arc=data/ARC-Challenge-Test.jsonl")
    assert local.hub is None and not local.is_hub and not local.is_lm_eval
    assert local.short == "arc=ARC-Challenge-Test.jsonl" and local.slug == "arc-ARC-Challenge-Test"
    lm = TaskSpec.parse("lm-eval:gsm8k")
    assert lm.is_lm_eval and lm.short == "lm-eval:gsm8k" and lm.slug == "lm-eval-gsm8k"
    assert TaskSpec.parse("arithmetic-gen").slug == "arithmetic-gen" and HubPath.parse(None) is None


def test_help_lists_every_file_dataset_of_the_registry():
    from whitebox_eval.tasks import registry
    from whitebox_eval.tasks.spec import FORMATS_USAGE, GENERATION_USAGE, MCQ_USAGE

    for name in registry.names(mcq=True, source=registry.FILE):
        assert name in MCQ_USAGE, name
    for name in registry.names(generation=True, source=registry.FILE):
        assert name in GENERATION_USAGE, name
    assert "triviaqa=PATH" in FORMATS_USAGE and "gsm8k" not in FORMATS_USAGE
