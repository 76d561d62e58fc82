"""MUI on every generation task: several --task in one call, your own generation file, lm-eval's
generate_until tasks scored by their own filters and metrics (tiny random models)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval import stats  # noqa: E402
from whitebox_eval.mui.command import command  # noqa: E402
from whitebox_eval.mui.study import MUIConfig, run_mui  # noqa: E402
from whitebox_eval.runs import RunFolder  # noqa: E402

FIXTURE = Path(__file__).parents[1] / "fixtures" / "lm_eval_generation"


@pytest.fixture()
def tiny_everywhere(monkeypatch):
    lm = tiny_lm("llama")
    import whitebox_eval.models as models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: lm)
    return lm


def _files(tmp_path: Path) -> tuple[Path, Path]:
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i} + 1?", "answer": [str(i + 1)]}) + "\n"
                          for i in range(8)))
    mc = tmp_path / "mc.jsonl"
    mc.write_text("".join(json.dumps({"question": f"Pick {i}?", "choices": ["a", "b", "c"], "answer": i % 3}) + "\n"
                          for i in range(8)))
    return qa, mc


def test_several_tasks_in_one_call_give_a_table_and_the_law(tiny_everywhere, tmp_path):
    qa, mc = _files(tmp_path)
    args = ["--model", "tiny", "--task", "arithmetic-gen", "--task", f"gen={qa}", "--task", f"mcq={mc}",
            "--answer", "numeric", "--limit", "6", "--max-new-tokens", "4", "--shots", "0", "--output", str(tmp_path),
            "--run-id", "t"]
    r = CliRunner().invoke(command, args)
    assert r.exit_code == 0, r.output
    ids = ["t-arithmetic-gen", "t-gen-qa", "t-mcq-mc"]
    folders = [RunFolder.open(tmp_path / i) for i in ids]
    assert [f.config["task_spec"]["name"] for f in folders] == ["arithmetic-gen", "gen", "mcq"]
    assert folders[1].config["task_spec"]["answer"] == "numeric" and "answer" not in folders[0].config["task_spec"]
    assert "per task (95% intervals):" in r.output and "whitebox-eval mui law " + " ".join(
        str(f.path) for f in folders) in r.output
    for f in folders:  # each run's accuracy interval is the Wilson interval of its own samples
        res, samples = f.load_results(), list(f.read_samples())
        est = stats.proportion(np.array([s["correct"] for s in samples]))
        assert res["n_items"] == 6 and res["accuracy"] == pytest.approx(est.value)
        assert [res["accuracy_ci"][0], res["accuracy_ci"][1]] == pytest.approx([est.lo, est.hi])
    assert ("MUI = " in r.output) or ("not fitted: " in r.output)  # the law, or why it cannot be fitted
    again = CliRunner().invoke(command, args + ["--resume"])  # every run finished: resumed as it is
    assert again.exit_code == 0 and again.output.count("per task") == 1


def test_options_of_one_kind_of_task_refuse_the_others(tiny_everywhere, tmp_path):
    r = CliRunner().invoke(command, ["--task", "arithmetic-gen", "--lm-eval-data", str(tmp_path)])
    assert r.exit_code != 0 and "--lm-eval-data applies to --task lm-eval:TASK only" in str(r.exception or r.output)
    r = CliRunner().invoke(command, ["--task", "arithmetic-gen", "--answer", "numeric"])
    assert "--answer applies to --task gen=PATH only" in str(r.exception or r.output)


def test_a_file_without_a_demonstration_holds_its_first_row_out(tmp_path):
    qa, _ = _files(tmp_path)
    lm = tiny_lm("llama")  # a base model (no chat template): one-shot (App. A.6)
    folder = run_mui(MUIConfig(model="tiny", task=f"gen={qa}", limit=4, max_new_tokens=3, batch_size=4), tmp_path,
                     run_id="g", loaded=lm, show_progress=False)
    assert folder.config["demonstration"]["question"] == "Question: What is 0 + 1?"
    assert [s["id"] for s in folder.read_samples()] == ["gen/q1", "gen/q2", "gen/q3", "gen/q4"]


def test_an_lm_eval_generation_task_is_scored_by_its_own_filters(tmp_path):
    pytest.importorskip("lm_eval")
    lm = tiny_lm("llama")
    cfg = MUIConfig(model="tiny", task="lm-eval:gsm8k", lm_eval_data=str(FIXTURE / "data"), limit=2,
                    max_new_tokens=6, batch_size=2)
    folder = run_mui(cfg, tmp_path, run_id="l", loaded=lm, show_progress=False)
    samples, res = list(folder.read_samples()), folder.load_results()
    assert folder.config["lm_eval_tasks"][0]["filters"] == ["strict-match", "flexible-extract"]
    assert all(set(s["lm_eval"]["filters"]) == {"strict-match", "flexible-extract"} for s in samples)
    for s in samples:  # correct = exact_match under the first filter
        assert s["correct"] == (s["lm_eval"]["filters"]["strict-match"]["exact_match"] == 1.0)
    em = [s["lm_eval"]["filters"]["flexible-extract"]["exact_match"] for s in samples]
    assert res["lm_eval_metrics"]["gsm8k"]["exact_match,flexible-extract"] == pytest.approx(np.mean(em))
    assert "exact_match_ci,flexible-extract" in res["lm_eval_metrics"]["gsm8k"]
    assert res["accuracy_rule"].startswith("correct = the task's first metric under its first filter")
    for s in samples:  # each line holds its prompt and the request as lm-eval logs it
        (request,) = s["arguments"].values()
        assert request["arg_0"] == s["prompt"] and "Question:" in s["prompt"]
        assert "Question:" in request["arg_1"]["until"] and request["arg_1"]["do_sample"] is False


def test_a_missing_file_stops_before_any_run(tiny_everywhere, tmp_path):
    r = CliRunner().invoke(command, ["--task", "arithmetic-gen", "--task", f"gen={tmp_path / 'nope.jsonl'}",
                                     "--output", str(tmp_path)])
    assert "nope.jsonl does not exist" in str(r.exception) and not any(tmp_path.iterdir())
