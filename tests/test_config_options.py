"""One way from options to a config: every study command builds its config
through its suite's record from the options it declares (``config_file.study_config``); the
defaults are the config dataclass's, and an option's shown default can never disagree with it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import click
import pytest

from whitebox_eval.lazy import resolve
from whitebox_eval.runs.settings import checked_value, field_types

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "whitebox_eval"

#: options that set how a command runs, not what its study computes (no config field)
NOT_SETTINGS = {"output", "run_id", "resume", "models_root", "model_args", "adapter", "adapter_mode",
                "trust_remote_code", "allow_pickle", "device", "device_map", "help", "log_samples"}
#: (command path, record module:attribute, the modes it builds, options -> fields, options resolved by the command)
COMMANDS = [
    (["mcqa"], "whitebox_eval.mcqa.record:SUITE", None, {}, {"dtype", "batch_size"}),
    (["formats"], "whitebox_eval.formats.record:SUITE", None, {}, {"dtype", "batch_size"}),
    (["gar"], "whitebox_eval.gar.record:SUITE", "all", {}, {"dtype", "batch_size", "mode", "edits", "edit_at"}),
    (["span"], "whitebox_eval.span.record:SUITE", None, "whitebox_eval.span.command:FINETUNE_OPTIONS",
     {"dtype", "batch_size", "id_params", "ood_params"}),
    (["mui"], "whitebox_eval.mui.record:MUI", None, {}, {"dtype", "batch_size", "model", "task", "fields", "answer"}),
    (["mui", "masking"], "whitebox_eval.mui.record:MASKING", None, {}, {"dtype", "batch_size"}),
]


def _command(path):
    from whitebox_eval.cli import cli

    cmd = cli
    for name in path:
        cmd = cmd.get_command(click.Context(cmd), name)
    return cmd


def _classes(record, modes):
    names = list(record.modes) if modes == "all" else [None]
    return [resolve(record.mode(m).config) for m in names]


@pytest.mark.parametrize("path, record, modes, renames, resolved", COMMANDS, ids=lambda v: str(v))
def test_every_option_is_a_setting_with_the_dataclass_default(path, record, modes, renames, resolved):
    """Each option of a study command is a field of its config (by name, or a declared rename),
    or how it runs; an option's default, when it states one, is the field's own."""
    renames = resolve(renames) if isinstance(renames, str) else renames
    classes = _classes(resolve(record), modes)
    checked = 0
    for p in _command(path).params:
        if not isinstance(p, click.Option) or not p.expose_value or p.name in NOT_SETTINGS:
            continue
        targets = renames.get(p.name, p.name)
        targets = (targets,) if isinstance(targets, str) else targets
        owners = []
        for target in targets:
            top, _, inner = target.partition(".")
            for cls in classes:
                types_ = field_types(cls)
                if top not in types_:
                    continue
                owner = types_[top] if inner else cls
                name = inner or top
                owners.append((owner, name))
        assert owners or p.name in resolved, f"{' '.join(path)} --{p.name}: no config field takes it"
        if p.name in resolved or p.default in (None, ()) or callable(p.default) or "UNSET" in repr(p.default):
            continue
        for owner, name in owners:
            field = {f.name: f for f in dataclasses.fields(owner)}[name]
            want = field.default if field.default is not dataclasses.MISSING else field.default_factory()
            shown = p.default
            if isinstance(shown, str) and isinstance(want, tuple):  # a comma list's text
                shown = checked_value(field_types(owner)[name], shown, name)
            assert shown == want, f"{' '.join(path)} --{p.name} shows {p.default!r}, {owner.__name__}.{name} is {want!r}"
            checked += 1
    assert checked >= 3


@pytest.mark.parametrize("module", sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.glob("*/command.py")))
def test_no_command_builds_a_config_by_hand(module):
    """No command calls a config class itself: each goes through study_config (the record)."""
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    calls = [node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
             for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, (ast.Attribute, ast.Name))]
    by_hand = sorted({c for c in calls if c.endswith("Config") and c[0].isupper()})
    assert not by_hand, f"{module} builds {by_hand} itself"


def test_gar_modes_take_their_own_defaults(tmp_path):
    """gar's tasks and pattern defaults differ by mode and are the dataclasses' (no if/elif in the command)."""
    from whitebox_eval.gar.record import SUITE

    assert SUITE.config("evaluate", {}).tasks == "all"
    assert SUITE.config("truth-heads", {}).pattern == "Q->A"
    assert SUITE.config("intervene", {"heads": "1.0"}).pattern == "V->E"


def test_mcqa_defaults_follow_the_task_in_the_dataclass():
    """--methods and --uncertainty's rules live in MCQAConfig, so Python and the command agree."""
    from whitebox_eval.mcqa.record import SUITE

    assert SUITE.config(None, {}).methods == ("baseline", "qk", "attention", "lens", "pride", "pa")
    lm = SUITE.config(None, {"prompt": "lm-eval", "task": "hellaswag=x.jsonl"})
    assert lm.methods == ("cloze",) and lm.uncertainty is False
    assert SUITE.config(None, {"methods": "baseline, qk"}).methods == ("baseline", "qk")


def test_masking_eval_tasks_default_to_the_source_task():
    from whitebox_eval.mui.record import MASKING

    assert MASKING.config(None, {"source_task": "gsm8k=x.jsonl"}).eval_tasks == ("gsm8k=x.jsonl", "ssd")
    assert MASKING.config(None, {"source_task": "ssd"}).eval_tasks == ("ssd",)
    assert MASKING.config(None, {"ks": "1,4"}).ks == (1, 4)
