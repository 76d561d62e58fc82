"""App. C rule, grouped accuracies, compositionality gap and the fig. 2 plot."""

from __future__ import annotations

import math

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.evaluation import (
    accuracy,
    accuracy_by_difficulty,
    accuracy_by_form,
    accuracy_by_syntactic_variation,
    appc_correct,
    argmax_correct,
    compositionality_gap,
    example_correct,
    plot_gar_summary,
)
from whitebox_eval.gar.generator import generate_task_examples
from whitebox_eval.gar.tasks import kr_tasks


def test_appc_rule_worked_example():
    # generation, three candidates: fruit (target), animal, vehicle
    assert appc_correct(0.40, [0.40, 0.35, 0.05])            # 0.40 > 1/3
    assert not appc_correct(0.30, [0.30, 0.10, 0.05])        # 0.30 < 1/3 ...
    assert appc_correct(0.30, [0.30, 0.10, 0.05], rule="mean")  # ... but > mean 0.15
    assert not appc_correct(0.30, [0.30, 0.65, 0.05], rule="mean")  # < mean 0.333...
    # classification: Yes/No, threshold 1/2
    assert appc_correct(0.55, [0.55, 0.40]) and not appc_correct(0.45, [0.45, 0.50])
    with pytest.raises(WhiteboxError):
        appc_correct(0.5, [0.5], rule="median")
    with pytest.raises(WhiteboxError):
        appc_correct(0.5, [])


def test_example_level_rules():
    ex = generate_task_examples("GendersOfPersons/isA,KindsOfThings/kindOf×3", seed=1)[0]
    others = [a for a in ex.alternatives if a != ex.target]
    probs = {ex.target: 0.30, others[0]: 0.50, others[1]: 0.01}
    assert not example_correct(ex, probs)          # 0.30 < 1/3
    assert example_correct(ex, probs, rule="mean")  # 0.30 > 0.27
    assert not argmax_correct(ex, probs)
    assert argmax_correct(ex, {ex.target: 0.6, others[0]: 0.3, others[1]: 0.1})
    with pytest.raises(WhiteboxError, match="missing"):
        example_correct(ex, {ex.target: 0.9})


def test_grouped_accuracies_and_gap(gar_examples):
    exs = list(gar_examples)
    # correct on every n_r = 0 and KR example, on half of the n_r = 2 examples
    kr = [e for t in kr_tasks() for e in generate_task_examples(t)]
    correct = [e.task.n_r == 0 or (e.task.n_r == 2 and e.index % 2 == 0) for e in exs]
    by_diff = accuracy_by_difficulty(exs, correct)
    assert by_diff[(0, False)] == by_diff[(0, True)] == 1.0
    assert by_diff[(1, False)] == 0.0 and by_diff[(2, True)] == 0.5
    assert compositionality_gap(exs, correct) == pytest.approx(2.0)
    assert compositionality_gap(exs + kr, correct + [True] * len(kr)) == pytest.approx(2.0)
    assert compositionality_gap(exs + kr, correct + [False] * len(kr)) < 2.0

    syn = accuracy_by_syntactic_variation(exs, [e.task.swap_qa for e in exs])
    assert syn == {"none": 0.0, "swapQA": 1.0, "swapKV": 0.0, "swapQA,swapKV": 1.0}
    form = accuracy_by_form(exs, [e.is_classification for e in exs])
    assert form == {"generation": 0.0, "classification": 1.0}
    assert math.isnan(accuracy([]))
    with pytest.raises(WhiteboxError, match="one per example"):
        accuracy_by_form(exs, correct[:-1])
    zero = [e.task.n_r == 0 for e in exs]
    assert compositionality_gap(exs, zero) == math.inf


def test_plot_writes_png(gar_examples, tmp_path):
    exs = list(gar_examples)
    runs = {"model-a": (exs, [e.task.n_r < 2 for e in exs]),
            "model-b": (exs, [e.index % 3 == 0 for e in exs])}
    out = plot_gar_summary(runs, tmp_path / "fig" / "gar.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(WhiteboxError):
        plot_gar_summary({}, tmp_path / "x.png")
