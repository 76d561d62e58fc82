"""MUI along a training (mui/trajectory.py, mui/trend.py; paper 001 sec. 3.3): the trend statistics
on known inputs, and a micro trajectory on a tiny random model fine-tuned with checkpoints kept
(every checkpoint's MUI study, the per-item evidence, the exclusion rule, the read-back)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))

from tiny_models import tiny_folder  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.mui.trend import (kendall_tau, mean_trend, mui_trend, order_p, trend,  # noqa: E402
                                     union_left_out)

WORDS = ["red", "blue", "green", "cat", "dog", "sun", "moon", "tree", "rain", "stone"]


def test_kendall_tau_is_scipys_tau_b():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(3)
    steps = [0, 3, 7, 10, 20, 31]
    for _ in range(20):
        y = rng.integers(0, 4, size=6).astype(float)  # ties in y
        ours = float(kendall_tau(steps, y))
        ref = kendalltau(steps, y).statistic
        assert ours == pytest.approx(0.0 if np.isnan(ref) else ref, abs=1e-12)


def test_order_p_is_exact_over_every_order():
    assert order_p([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == pytest.approx(2 / 120)  # only the two monotone orders
    assert order_p([1, 2, 3], [5, 5, 5]) == 1.0


def test_union_left_out_drops_only_an_items_own_units():
    share, loo = union_left_out([[1, 2], [2, 3], [4]], total=10)
    assert share == 0.4 and loo.tolist() == [0.3, 0.3, 0.3]  # 1, 3 and 4 are each one item's own


def test_a_steady_rise_over_items_is_a_significant_trend():
    steps = [0, 10, 20, 30, 40, 50]
    units = [[[i * 10 + u for u in range(c + 1)] for i in range(12)] for c in range(6)]  # every item uses more
    t = mui_trend(steps, units, total=200)
    assert t.value == 1.0 and t.order_p == pytest.approx(2 / 720) and t.item_p == 0.0 and t.se == 0.0
    assert t.p_value == t.order_p and t.lo == t.hi == 1.0
    flat = mean_trend(steps, [[1.0, 0.0, 1.0, 0.0]] * 6)
    assert flat.value == 0.0 and flat.p_value == 1.0


def test_a_trend_one_item_makes_is_not_significant_on_the_items():
    steps = [0, 1, 2, 3, 4]
    # one item carries the rise (its units grow), the others are the same at every checkpoint
    units = [[[100 + u for u in range(c)], *[[i] for i in range(9)]] for c in range(5)]
    t = mui_trend(steps, units, total=1000)
    assert t.value == 1.0 and t.se > 0 and t.item_p > 0.05 and t.p_value == t.item_p


def test_a_trend_needs_three_checkpoints():
    with pytest.raises(WhiteboxError, match="at least 3 checkpoints"):
        trend([0, 1], [0.1, 0.2], np.zeros((2, 4)))


# ------------------------------------------------------------------ a micro trajectory


@pytest.fixture(scope="module")
def trajectory(tmp_path_factory):
    """A tiny llama fine-tuned to answer "yes" (6 checkpoints kept: before and 5 along), then the
    trajectory on 8 held-out questions (none trained on) with the same answer."""
    import torch

    from whitebox_eval import suites
    from whitebox_eval.finetune.config import FinetuneConfig
    from whitebox_eval.finetune.study import run_finetune

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("traj")
    model = tiny_folder("llama", out / "tiny")
    train, held = out / "train.jsonl", out / "held.jsonl"
    train.write_text("".join(json.dumps({"id": f"t{i}", "question": f"Is {WORDS[i % 10]} number {i} here?",
                                         "answer": ["yes"]}) + "\n" for i in range(60)))
    held.write_text("".join(json.dumps({"id": f"h{i}", "question": f"Is {WORDS[i * 3 % 10]} item {i + 100} there?",
                                        "answer": ["yes"]}) + "\n" for i in range(8)))
    try:
        ft = run_finetune(FinetuneConfig(model=str(model), task=f"gen={train}", limit=60, learning_rate=3e-3,
                                         train_batch_size=4, epochs=2, save_every=0, batch_size=8, max_new_tokens=3,
                                         keep_checkpoints=5), out, run_id="ft", show_progress=False)
        study = suites.run("mui", "trajectory", out, run_id="traj", model=str(ft.path), task=f"gen={held}", limit=8,
                           max_new_tokens=3, batch_size=4, mui={"shots": "0"}, show_progress=False)
    finally:
        torch.set_num_threads(n)
    return ft.path, study


def test_every_checkpoint_answers_the_same_held_out_items(trajectory):
    from whitebox_eval.models.checkpoints import list_checkpoints

    ft, study = trajectory
    r = study.results
    kept = list_checkpoints(ft)
    assert r["order"] == [Path(c["path"]).name for c in kept] and len(kept) == 6
    for c in kept:  # each checkpoint's MUI run records the checkpoint's fingerprint
        conf = yaml.safe_load((study.folder / "runs" / Path(c["path"]).name / "config.yaml").read_text())
        assert conf["model_weights"] == {"producer": "ft", "sha256": c["sha256"], "step": c["step"]}
    assert len(study.samples) == 6 * 8 and {s["item"] for s in study.samples} == {f"gen/h{i}" for i in range(8)}
    for name, p in r["checkpoints"].items():
        rows = [s for s in study.samples if s["checkpoint"] == name]
        assert p["accuracy"] == pytest.approx(np.mean([s["correct"] for s in rows]))
        assert p["response_length"] == pytest.approx(np.mean([s["n_response_tokens"] for s in rows]))
        assert p["included"] == (p["accuracy"] > 0)  # the exclusion rule
        assert r["headline"][f"mui,{name}"] == p["mui"]
    assert r["checkpoints"]["step-000000"]["accuracy"] == 0.0 and "step-000000" in r["left_out"]
    assert r["checkpoints"][r["order"][-1]]["accuracy"] == 1.0  # the training took


def test_the_trend_is_over_the_included_checkpoints_and_reads_back(trajectory):
    from whitebox_eval.reproduce import vocabulary

    _, study = trajectory
    r = study.results
    t = r["trend"]["mui"]
    assert t["n"] == len(r["included"]) >= 3 and t["n_items"] == 8
    assert t["p_value"] == max(t["order_p"], t["item_p"]) and -1 <= t["lo"] <= t["value"] <= t["hi"] <= 1
    assert {"accuracy", "response_length"} <= set(r["trend"])
    moves = [p for p in r["checkpoints"].values() if "direction" in p]
    assert len(moves) == len(r["included"]) - 1 and sum(r["directions"].values()) == len(moves)
    back = vocabulary.compute({"derived": "mui_trend"}, study, "mui")
    assert back["value"] == t["value"] and back["p_value"] == t["p_value"]
    obs = back["observations"]
    assert obs["checkpoints"] == r["included"] and len(obs["units"]) == t["n"] and len(obs["units"][0]) == 8
    again = mui_trend(obs["steps"], obs["units"], obs["total_units"])  # the evidence recomputes the statistic
    assert again.value == back["value"] and again.p_value == back["p_value"]


def test_too_few_checkpoints_with_any_right_answer_is_a_floor(trajectory, tmp_path):
    from whitebox_eval import suites
    from whitebox_eval.reproduce import values, vocabulary

    ft, _ = trajectory
    study = suites.run("mui", "trajectory", tmp_path, run_id="t", model=str(ft), task="arithmetic-gen", limit=4,
                       max_new_tokens=2, batch_size=4, show_progress=False)
    if len(study.results["included"]) >= 3:
        pytest.skip("the tiny model answered arithmetic at 3 checkpoints")
    assert "refused" in study.results["trend"]
    with pytest.raises(values.TooFew):
        vocabulary.compute({"derived": "mui_trend"}, study, "mui")


def test_a_model_without_checkpoints_is_one_line_before_any_folder(tmp_path):
    from whitebox_eval import suites

    model = tiny_folder("llama", tmp_path / "plain")
    with pytest.raises(WhiteboxError, match="keep-checkpoints"):
        suites.run("mui", "trajectory", tmp_path, run_id="t", model=str(model), limit=4, show_progress=False)
    assert not (tmp_path / "t").exists()


def test_benchmarks_recompute_the_trend_from_its_evidence_alone(trajectory):
    """benchmarks/recompute_claims.py (scipy, nothing of whitebox_eval) recomputes tau, its jackknife
    SE and p from the items' key units at each checkpoint; a changed tau disagrees."""
    from whitebox_eval.reproduce import vocabulary

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import recompute_claims

    _, study = trajectory
    back = vocabulary.compute({"derived": "mui_trend"}, study, "mui")
    ck = recompute_claims.Check()
    recompute_claims.check_statistic("t", {"statistic": back}, {}, ck, np.random.default_rng(0), back["observations"])
    assert not ck.bad and not ck.unrecomputed
    wrong = recompute_claims.Check()
    recompute_claims.check_mui_trend("t", {**back, "value": back["value"] + 0.1}, back["observations"], wrong)
    assert wrong.bad
