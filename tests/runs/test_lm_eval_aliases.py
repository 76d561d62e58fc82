"""lm-eval's flag spellings: each alias sets the same config as our spelling, ``--help`` shows
both, and an lm-eval task name gets a one-line fix."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from whitebox_eval.span.command import command as span
from whitebox_eval.cli import main
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.command import command as gar
from whitebox_eval.formats.command import formats
from whitebox_eval.mcqa.command import mcqa
from whitebox_eval.mui.command import command as mui, masking
from whitebox_eval.tasks import lm_eval_name_hint


class Called(Exception):
    """Raised by the stand-in study runner: carries what the command built."""


def _capture(monkeypatch, module: str, name: str):
    import importlib

    def fake(cfg, output, **kw):
        raise Called(cfg, str(output))

    monkeypatch.setattr(importlib.import_module(module), name, fake)


def _run(command, args) -> tuple:
    result = CliRunner().invoke(command, args)
    assert isinstance(result.exception, Called), result.output
    return result.exception.args


# (command, the module and function it runs, our spelling, lm-eval's spelling)
CASES = [
    (mcqa, "whitebox_eval.mcqa.study", "run_mcqa",
     ["--task", "arc=x.jsonl", "--shots", "3", "--batch-size", "5", "--output", "o", "--seed", "7", "--limit", "9"],
     ["--tasks", "arc=x.jsonl", "--num_fewshot", "3", "--batch_size", "5", "--output_path", "o", "--seed", "7", "--limit", "9"]),
    (mcqa, "whitebox_eval.mcqa.study", "run_mcqa", ["--apply-chat-template"], ["--apply_chat_template"]),
    (formats, "whitebox_eval.formats.study", "run_formats",
     ["--task", "triviaqa=t.jsonl", "--shots", "2", "--batch-size", "3", "--output", "o"],
     ["--tasks", "triviaqa=t.jsonl", "--num_fewshot", "2", "--batch_size", "3", "--output_path", "o"]),
    (mui, "whitebox_eval.mui.study", "run_mui",
     ["--task", "ssd", "--shots", "1", "--batch-size", "3", "--output", "o"],
     ["--tasks", "ssd", "--num_fewshot", "1", "--batch_size", "3", "--output_path", "o"]),
    (masking, "whitebox_eval.mui.masking", "run_masking",
     ["--shots", "0", "--batch-size", "3", "--output", "o"], ["--num_fewshot", "0", "--batch_size", "3", "--output_path", "o"]),
    (span, "whitebox_eval.span.study", "run_span",
     ["--shots", "2", "--batch-size", "3", "--output", "o"], ["--num_fewshot", "2", "--batch_size", "3", "--output_path", "o"]),
    (gar, "whitebox_eval.gar.evaluate_study", "run_gar", ["--batch-size", "3", "--output", "o"], ["--batch_size", "3", "--output_path", "o"]),
]


@pytest.mark.parametrize("command,module,name,ours,theirs", CASES, ids=[f"{c[0].name}-{i}" for i, c in enumerate(CASES)])
def test_each_lm_eval_spelling_sets_the_same_config_as_ours(monkeypatch, command, module, name, ours, theirs):
    _capture(monkeypatch, module, name)
    cfg_ours, out_ours = _run(command, ours)
    cfg_theirs, out_theirs = _run(command, theirs)
    assert cfg_ours == cfg_theirs and out_ours == out_theirs
    default_cfg, default_out = _run(command, [a for a in ours[:2]] if ours[0] == "--task" else [])
    assert cfg_ours != default_cfg or out_ours != default_out  # the options did change something


def test_mcqa_aliases_reach_the_config(monkeypatch):
    _capture(monkeypatch, "whitebox_eval.mcqa.study", "run_mcqa")
    cfg, out = _run(mcqa, ["--tasks", "hellaswag=h.jsonl", "--num_fewshot", "4", "--batch_size", "2", "--output_path", "here",
                           "--apply_chat_template", "--demos-from", "train.jsonl"])
    assert (cfg.task, cfg.shots, cfg.batch_size, cfg.apply_chat_template, cfg.demos_from, out) == \
           ("hellaswag=h.jsonl", 4, 2, True, "train.jsonl", "here")


@pytest.mark.parametrize("command", [mcqa, formats, mui, masking, span, gar])
def test_help_shows_both_spellings(command):
    text = CliRunner().invoke(command, ["--help"], terminal_width=200).output
    pairs = [("--batch-size", "--batch_size"), ("--output", "--output_path")]
    if command in (mcqa, formats, mui, masking, span):
        pairs.append(("--shots", "--num_fewshot"))
    if command in (mcqa, formats, mui):
        pairs.append(("--task", "--tasks"))
    if command is mcqa:
        pairs.append(("--apply-chat-template", "--apply_chat_template"))
    for ours, theirs in pairs:
        assert f"{ours}, {theirs}" in text


@pytest.mark.parametrize("spec,fix", [
    ("hellaswag", "--task hellaswag needs its data: write --task hellaswag=PATH with the local file, or "
                  "hellaswag=hf:Rowan/hellaswag@validation when online"),
    ("mmlu", "--task mmlu needs its data: write --task mmlu=PATH with the local file, or mmlu=hf:cais/mmlu:all@test when online"),
    ("mmlu_anatomy", "--task mmlu_anatomy needs its data: write --task mmlu=PATH with the local file, or "
                     "mmlu=hf:cais/mmlu:anatomy@test when online"),
    ("arc_challenge", "--task arc_challenge needs its data: write --task arc=PATH with the local file, or "
                      "arc=hf:allenai/ai2_arc:ARC-Challenge@test when online"),
    ("arc_easy=data/e.jsonl", "'arc_easy' is lm-eval's task name; write --task arc=data/e.jsonl"),
    ("mmlu,hellaswag", "--task 'mmlu,hellaswag' lists several tasks: one run evaluates one task; run the command once "
                       "per task, each with NAME=PATH"),
])
def test_lm_eval_task_names_get_a_one_line_fix(spec, fix, capsys):
    assert lm_eval_name_hint(spec) == fix
    with pytest.raises(SystemExit) as e:
        main(["mcqa", "--tasks", spec, "--limit", "2"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(fix) and len([line for line in err if "Traceback" in line]) == 0


def test_our_specs_are_not_mistaken_for_lm_eval_names():
    for spec in ("ssd", "arithmetic:add1,mul2", "arc=x.jsonl", "mmlu=data/test", "hellaswag=hf:Rowan/hellaswag@validation"):
        assert lm_eval_name_hint(spec) is None
    with pytest.raises(WhiteboxError, match="write --task arc=x.jsonl"):
        from whitebox_eval.tasks import load_mcq_dataset

        load_mcq_dataset("arc_challenge", "x.jsonl")
