"""HumanEval through MUI: pass@1 from running each completion against its problem's tests (with
--allow-code-execution only), a Wilson interval, and the key sets every generation task gets."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tasks"))

from mui_testing import tiny_lm  # noqa: E402
from test_humaneval import ADD, write_problems  # noqa: E402
from whitebox_eval import stats  # noqa: E402
from whitebox_eval.mui.study import MUIConfig, run_mui  # noqa: E402
from whitebox_eval.tasks import humaneval  # noqa: E402

RIGHT, WRONG, LOOP = "    return x + y\n", "    return x - y\n", "    while True:\n        pass\n"


def _problems(tmp_path: Path) -> Path:
    """Three copies of HumanEval/53 under their own ids, one per hand-written completion."""
    rows = [{**ADD, "task_id": f"HumanEval/53-{name}"} for name in ("right", "wrong", "loop")]
    return write_problems(tmp_path / "HumanEval.jsonl", rows)


def test_hand_written_completions_give_pass_at_1_with_its_wilson_interval(tmp_path, monkeypatch):
    monkeypatch.setattr(humaneval, "TIMEOUT_S", 1.0)
    given = tmp_path / "responses.jsonl"
    given.write_text("".join(json.dumps({"id": f"HumanEval/53-{n}", "response": r}) + "\n"
                             for n, r in (("right", RIGHT), ("wrong", WRONG), ("loop", LOOP))))
    cfg = MUIConfig(model="tiny", task=f"humaneval={_problems(tmp_path)}", allow_code_execution=True,
                    responses=str(given), batch_size=3)
    folder = run_mui(cfg, tmp_path, run_id="h", loaded=tiny_lm("llama"), show_progress=False)
    samples = {s["id"]: s for s in folder.read_samples()}
    assert [samples[f"HumanEval/53-{n}"]["correct"] for n in ("right", "wrong", "loop")] == [True, False, False]
    assert samples["HumanEval/53-loop"]["execution"]["result"] == "timed out"
    assert samples["HumanEval/53-wrong"]["execution"]["result"] == "failed: AssertionError"
    res = folder.load_results()
    est = stats.proportion(np.array([True, False, False]))
    lo, hi = stats.wilson(1, 3)
    assert res["pass@1"] == res["accuracy"] == pytest.approx(1 / 3) == pytest.approx(est.value)
    assert res["pass@1_ci"] == pytest.approx([lo, hi]) and res["headline"]["pass@1"] == pytest.approx(1 / 3)
    assert res["mui"] > 0 and all(s["n_key_units"] > 0 for s in samples.values())  # key sets as for any task
    assert folder.config["allow_code_execution"] is True and "code_execution" in folder.config


def test_without_the_flag_the_task_is_refused_in_one_line_naming_it(tmp_path, cli, monkeypatch):
    import whitebox_eval.models as models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: tiny_lm("llama"))
    code, out, err = cli(["mui", "--task", f"humaneval={_problems(tmp_path)}", "--output", str(tmp_path / "runs"),
                          "--limit", "2"])
    assert code == 2 and err.strip().count("\n") == 0 and "--allow-code-execution" in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_flag_belongs_to_tasks_that_run_code(tmp_path, cli):
    code, _, err = cli(["mui", "--task", "arithmetic-gen", "--allow-code-execution"])
    assert code == 2 and "--allow-code-execution applies to --task lm-eval:TASK and humaneval=PATH only" in err
