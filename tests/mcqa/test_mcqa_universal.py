"""`whitebox-eval universal` on run folders with known head tables."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from whitebox_eval.mcqa.command import universal
from whitebox_eval.runs import RunFolder


def _run(root, name, table, shots=0, model="m"):
    folder = RunFolder.create(root, {"suite": "mcqa", "model": model, "task": name, "shots": shots}, run_id=name)
    folder.save_array("qk_head_accuracy", table)
    return str(folder.path)


def test_universal_heads_over_runs(tmp_path):
    base = np.linspace(0.2, 0.3, 40).reshape(4, 10)  # 40 heads; top 5% = 2 heads per run
    a, b, c = base.copy(), base.copy(), base.copy()
    a[2, 3], a[1, 1] = 0.9, 0.8  # run A's top two
    b[2, 3], b[0, 5] = 0.9, 0.85  # run B shares L2H3
    c[2, 3], c[1, 1] = 0.95, 0.9  # 5-shot run
    dirs = [_run(tmp_path, "A", a), _run(tmp_path, "B", b), _run(tmp_path, "C", c, shots=5)]
    res = CliRunner().invoke(universal, [*dirs, "--fraction", "0.05", "--top", "1"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[1].endswith("L2H3")  # the only head in the top of every run
    # union over 0-shot {L2H3, L1H1, L0H5} intersected with 5-shot {L2H3, L1H1}
    assert lines[2].endswith("L1H1, L2H3")
    assert "L2H3  min percentile 1.00" in res.output


def test_universal_refuses_runs_of_different_models(tmp_path):
    t = np.zeros((2, 2))
    dirs = [_run(tmp_path, "A", t, model="x"), _run(tmp_path, "B", t, model="y")]
    res = CliRunner().invoke(universal, dirs)
    assert res.exit_code != 0 and "different models" in str(res.exception)


def test_degenerate_heads_are_never_universal(tmp_path):
    """A head whose scores tie on most items (marked by the study) is ranked last, whatever its accuracy."""
    base = np.linspace(0.2, 0.3, 40).reshape(4, 10)
    dirs = []
    for name in ("A", "B"):
        t = base.copy()
        t[0, 0], t[2, 3] = 0.95, 0.9  # L0H0 looks best, but it is degenerate
        path = _run(tmp_path, name, t)
        marks = np.zeros((4, 10), bool)
        marks[0, 0] = True
        RunFolder.open(path).save_array("qk_degenerate_heads", marks)
        dirs.append(path)
    res = CliRunner().invoke(universal, [*dirs, "--fraction", "0.025", "--top", "1"])
    assert res.exit_code == 0, res.output
    assert "ranked last: " in res.output and "L0H0" not in res.output
    assert res.output.splitlines()[2].endswith("L2H3")
