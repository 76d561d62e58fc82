"""``--config FILE`` on every study command: options from YAML/JSON, the command line
winning, a run's config.yaml re-run byte for byte, unknown keys refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from whitebox_eval.config_file import config_file_option, options_from_file  # noqa: E402

STUDY_COMMANDS = ("mcqa", "formats", "mui", "gar", "span")


@click.command("toy")
@click.option("--limit", type=int, default=5)
@click.option("--methods", default="baseline")
@click.option("--flag/--no-flag", default=False)
@click.option("--task", "tasks", multiple=True)
@click.option("--run-id", default=None)
@config_file_option()
def toy(**kw):
    click.echo(json.dumps(kw, sort_keys=True))


def _invoke(*args):
    out = CliRunner().invoke(toy, list(args))
    return out.exit_code, out.output


def test_file_values_apply_and_the_command_line_wins(tmp_path):
    f = tmp_path / "opts.yaml"
    f.write_text("limit: 7\nmethods: [baseline, qk]\nflag: true\ntask: [a, b]\nrun-id: mine\n")
    code, out = _invoke("--config", str(f))
    assert code == 0, out
    assert json.loads(out) == {"limit": 7, "methods": "baseline,qk", "flag": True, "tasks": ["a", "b"],
                               "run_id": "mine"}
    code, out = _invoke("--limit", "3", "--config", str(f), "--no-flag", "--run-id", "other")
    assert json.loads(out)["limit"] == 3 and json.loads(out)["flag"] is False and json.loads(out)["run_id"] == "other"
    j = tmp_path / "opts.json"
    j.write_text(json.dumps({"limit": 9}))
    assert json.loads(_invoke("--config", str(j))[1])["limit"] == 9


@pytest.mark.parametrize("text, says", [
    ("limit: 7\nlimt: 8\n", "unknown key limt"),
    ("- 1\n- 2\n", "must hold a mapping"),
    ("limit: [\n", "is not valid YAML"),
    ("limit: seven\n", "seven"),
    ("suite: gar\nlimit: 2\n", "config of the gar suite"),
])
def test_bad_files_are_one_line_with_exit_2(tmp_path, text, says):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    code, out = _invoke("--config", str(f))
    assert code == 2 and says in out, out


def test_a_runs_records_are_not_options(tmp_path):
    f = tmp_path / "config.yaml"
    f.write_text("suite: toy\nrun_id: old\nwhitebox_eval_version: 0.1.0\ncreated: x\nplacement: {device: cpu}\n"
                 "task_spec: {name: ssd}\n_volatile: [limit]\nlimit: 4\n")
    assert options_from_file(toy, str(f)) == {"limit": 4}


def test_every_study_command_takes_config(tmp_path):
    from whitebox_eval.cli import cli

    for name in STUDY_COMMANDS:
        out = CliRunner().invoke(cli, [name, "--help"])
        assert out.exit_code == 0 and "--config FILE" in out.output, (name, out.output[-500:])
    f = tmp_path / "bad.yaml"
    f.write_text("nonsense_option: 1\n")
    for name in STUDY_COMMANDS:
        out = CliRunner().invoke(cli, [name, "--config", str(f)])
        assert out.exit_code == 2 and "unknown key nonsense_option" in out.output, (name, out.output[-500:])


def test_rerunning_a_runs_config_gives_the_same_samples(tmp_path, cli):
    from tiny_models import tiny_llama_with_bpe
    from whitebox_eval.tasks.prompts import render_prompt
    from whitebox_eval.tasks.ssd import make_ssd

    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    lm = tiny_llama_with_bpe(texts, 400)
    model_dir = tmp_path / "tiny"
    lm.model.save_pretrained(model_dir)
    lm.tokenizer.save_pretrained(model_dir)
    code, out, err = cli(["mcqa", "--model", str(model_dir), "--task", "ssd", "--limit", "20", "--min-val-items", "6",
                          "--methods", "baseline,qk,attention", "--no-item-views", "--batch-size", "3",
                          "--output", str(tmp_path / "runs"), "--run-id", "first"])
    assert code == 0, err
    first = tmp_path / "runs" / "first"
    code, out, err = cli(["mcqa", "--config", str(first / "config.yaml"), "--output", str(tmp_path / "runs"),
                          "--run-id", "again"])
    assert code == 0, err
    again = tmp_path / "runs" / "again"
    assert (first / "samples.jsonl").read_bytes() == (again / "samples.jsonl").read_bytes()
