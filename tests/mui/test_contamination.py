"""Paper 001 sec. 3.4 on a tiny model: training on the contaminated task's items, MUI per
checkpoint, paired changes checked against stats computed here, directions, the cache."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval import stats  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.models import training  # noqa: E402
from whitebox_eval.models.training import weights_fingerprint  # noqa: E402
from whitebox_eval.mui.contamination import (  # noqa: E402
    ContaminationConfig,
    describe,
    direction_at_alpha,
    run_contamination,
    training_sequences,
)
from whitebox_eval.mui.utility_law import classify_direction  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))


def _cfg(**kw) -> ContaminationConfig:
    base = dict(model="tiny", task="arithmetic-gen", ood_tasks=("ssd",), limit=6, epochs=2, train_batch_size=3,
                learning_rate=3e-3, checkpoints=(2,), max_new_tokens=4, batch_size=3)
    base.update(kw)
    return ContaminationConfig(**base)


def test_training_sequences_score_only_the_answer():
    lm = tiny_lm()
    seqs = training_sequences(_cfg(), lm)
    assert len(seqs) == 6
    for ids, rows, answer in seqs:
        assert answer[-1] == 2  # the end-of-turn (eos) token closes every answer
        assert [ids[r + 1] for r in rows] == answer  # each row predicts the next answer token


def test_study_reports_paired_changes_directions_and_reuses_the_training(tmp_path):
    lm = tiny_lm(seed=1)
    fp = weights_fingerprint(lm.model)
    before = len(training.TRAINED)
    folder = run_contamination(_cfg(), tmp_path / "runs", run_id="a", loaded=lm, show_progress=False)
    assert len(training.TRAINED) == before + 1
    assert weights_fingerprint(lm.model) == fp  # the shared model is as it was
    res = folder.load_results()
    assert res["checkpoints"] == ["step-0", "step-2", "step-4"] and res["final"] == "step-4"
    samples = list(folder.read_samples())
    for label in ("arithmetic-gen", "ssd"):
        for name in ("step-2", "step-4"):
            base = {s["item"]: s["correct"] for s in samples if s["stage"] == f"step-0/{label}"}
            after = {s["item"]: s["correct"] for s in samples if s["stage"] == f"{name}/{label}"}
            ids = sorted(base)
            ref = stats.mcnemar([after[i] for i in ids], [base[i] for i in ids]).as_dict()
            got = res["paired_tests"][f"accuracy,{label},{name}"]
            assert (got["diff"], got["b"], got["c"]) == (ref["diff"], ref["b"], ref["c"])
            row = res["tasks"][label]["checkpoints"][name]
            b0 = res["tasks"][label]["checkpoints"]["step-0"]
            assert row["direction"] == classify_direction((100 * b0["accuracy"], 100 * b0["mui"]),
                                                          (100 * row["accuracy"], 100 * row["mui"])).value
            assert row["mui"] - b0["mui"] == pytest.approx(res["paired_tests"][f"mui,{label},{name}"]["diff"])
        assert res["paired_tests"][f"accuracy,{label}"] == res["paired_tests"][f"accuracy,{label},step-4"]
        head = res["headline"]
        assert {f"accuracy,{label},base", f"accuracy_ci,{label},base", f"mui,{label},final",
                f"mui_change,{label}", f"mui_change_ci,{label}", f"direction,{label}"} <= set(head)
    assert res["tasks"]["arithmetic-gen"]["role"] == "contaminated" and res["tasks"]["ssd"]["role"] == "out of domain"
    assert "step-4" in describe(res)
    # training lowers the loss on the items it saw
    assert res["finetune"]["loss_last"] < res["finetune"]["loss_first"]
    # a second study with the same training (another run, a fresh copy of the model): no training
    again = run_contamination(_cfg(), tmp_path / "runs", run_id="b", loaded=tiny_lm(seed=1), show_progress=False)
    assert len(training.TRAINED) == before + 1
    assert "reused" in (again.path / "run.log").read_text()
    assert again.load_results()["paired_tests"] == res["paired_tests"]
    # resuming a finished study reruns nothing and writes the same results
    resumed = run_contamination(_cfg(), tmp_path / "runs", run_id="a", resume=True, loaded=tiny_lm(seed=1),
                                show_progress=False)
    assert resumed.load_results() == res
    assert len([s for s in resumed.read_samples()]) == len(samples)


def test_direction_needs_both_changes_significant():
    up = {"diff": 0.2, "p_value": 0.01}
    down = {"diff": -0.1, "p_value": 0.001}
    flat = {"diff": 0.3, "p_value": 0.2}
    assert direction_at_alpha(up, up) == "accumulating"
    assert direction_at_alpha(up, down) == "evolving"
    assert direction_at_alpha(down, up) == "coarsening"
    assert direction_at_alpha(down, down) == "collapsing"
    assert direction_at_alpha(up, flat) == "undetermined"
    assert direction_at_alpha({"diff": 0.1, "p_value": None}, up) == "undetermined"


def test_config_errors_are_one_line():
    for bad, words in ((dict(limit=1), "limit"), (dict(epochs=0), "epochs"), (dict(learning_rate=0), "learning rate"),
                       (dict(checkpoints=(0,)), "step 0"), (dict(ood_tasks=()), "out-of-domain"),
                       (dict(mui={"limit": 3}), "not in mui"),
                       (dict(until_significant=True, limit=3), "limit >= 4")):
        with pytest.raises(WhiteboxError, match=words):
            _cfg(**bad).check()
    assert np.isfinite(_cfg().limit)


def _scripted(monkeypatch, answers: list[list[bool]]) -> list[list[str]]:
    """trained_item_accuracy answers from a script (before training, then after each epoch); returns
    the item ids each call asked about."""
    from whitebox_eval.mui import contamination

    calls: list[list[str]] = []

    def fake(lm, cfg, ids):
        calls.append(list(ids))
        out = answers[min(len(calls) - 1, len(answers) - 1)]
        assert len(out) == len(ids)
        return out

    monkeypatch.setattr(contamination, "trained_item_accuracy", fake)
    return calls


def test_training_stops_at_the_first_epoch_whose_gain_is_significant(tmp_path, monkeypatch):
    # 12 items: the stopping rule reads 6 of them
    none, some, all_ = [False] * 6, [True, True] + [False] * 4, [True] * 6
    calls = _scripted(monkeypatch, [none, some, all_, all_])
    folder = run_contamination(_cfg(until_significant=True, max_epochs=5, checkpoints=(), limit=12, train_batch_size=6),
                               tmp_path / "runs", run_id="u", loaded=tiny_lm(seed=2), show_progress=False)
    info = folder.load_results()["finetune"]["until_significant"]
    assert info["reached"] and info["epochs"] == 2 and len(calls) == 3  # before, epoch 1, epoch 2
    e1, e2 = info["per_epoch"]
    assert (e1["b"], e1["c"], e1["significant"]) == (2, 0, False)  # 2 of 6 gained: p = 0.5
    from scipy.stats import binomtest

    assert (e2["b"], e2["c"]) == (6, 0) and e2["p_value"] == pytest.approx(binomtest(6, 6, 0.5).pvalue)
    assert folder.load_results()["checkpoints"] == ["step-0", "step-4"]  # 2 steps per epoch, stopped at step 4


def test_the_stopping_rule_reads_only_its_half_and_the_claims_only_the_other(tmp_path, monkeypatch):
    """A stopping rule on a disjoint subset: every look of the rule asks about the stopping half
    alone; the trained examples are every item; the contaminated task's paired tests and points are
    recomputed here on the tested half and nothing else, while the out-of-domain task keeps all."""
    from whitebox_eval.mui import contamination
    from whitebox_eval.mui.finished import load_key_sets
    from whitebox_eval.mui.statistics import jackknife_mui_difference
    from whitebox_eval.runs import RunFolder

    trained_on: list[int] = []
    real_train = contamination.train_rows

    def spy(lm, examples, recipe, **kw):
        trained_on.append(len(examples))
        return real_train(lm, examples, recipe, **kw)

    monkeypatch.setattr(contamination, "train_rows", spy)
    calls = _scripted(monkeypatch, [[False] * 5, [True] * 5])
    cfg = _cfg(until_significant=True, max_epochs=2, checkpoints=(), limit=11, train_batch_size=11, seed=4)
    folder = run_contamination(cfg, tmp_path / "runs", run_id="s", loaded=tiny_lm(seed=5), show_progress=False)
    res = folder.load_results()
    split = res["split"]
    stop, tested = split["stop"], split["tested"]
    assert (len(stop), len(tested)) == (5, 6) and not set(stop) & set(tested)  # the odd item goes to the tested half
    assert all(c == stop for c in calls) and len(calls) == 3  # before, epochs 1 and 2 (5 of 5 gained: p = 0.0625)
    assert trained_on == [11]  # trained on every item
    assert res["finetune"]["until_significant"]["stop_items"] == stop
    label = "arithmetic-gen"
    runs = {k: RunFolder.open(folder.path / "runs" / v) for k, v in res["tasks"][label]["runs"].items()}
    before, after = runs["step-0"], runs[res["final"]]
    assert sorted(stop + tested) == sorted(load_key_sets(before).sample_ids)
    cb = {str(s["id"]): s["correct"] for s in before.read_samples()}
    ca = {str(s["id"]): s["correct"] for s in after.read_samples()}
    ref = stats.mcnemar([ca[i] for i in tested], [cb[i] for i in tested]).as_dict()
    got = res["paired_tests"][f"accuracy,{label}"]
    assert (got["n"], got["b"], got["c"], got["p_value"]) == (6, ref["b"], ref["c"], ref["p_value"])
    kb, ka = load_key_sets(before), load_key_sets(after)
    mui = jackknife_mui_difference(kb.subset(kb.positions(tested)), ka.subset(ka.positions(tested)))
    assert res["paired_tests"][f"mui,{label}"]["diff"] == pytest.approx(mui.diff, abs=1e-15)
    assert res["headline"][f"accuracy_n,{label},final"] == 6
    assert res["headline"][f"accuracy,{label},base"] == sum(cb[i] for i in tested) / 6
    assert res["paired_tests"]["accuracy,ssd"]["n"] == 11 and res["tasks"]["ssd"]["items"] == "all"
    halves = {s["item"]: s["half"] for s in folder.read_samples() if s["task"] == label}
    assert {i for i, h in halves.items() if h == "stop"} == set(stop)
    assert {s.get("half") for s in folder.read_samples() if s["task"] == "ssd"} == {None}


def test_the_split_is_seeded_disjoint_and_covers_every_item():
    from whitebox_eval.mui.contamination import stopping_split

    ids = [f"q{i}" for i in range(97)]
    stop, tested = stopping_split(ids, 0)
    assert (len(stop), len(tested)) == (48, 49) and set(stop) | set(tested) == set(ids) and not set(stop) & set(tested)
    assert stopping_split(ids, 0) == (stop, tested) and stopping_split(list(reversed(ids)), 0)[0] == stop[::-1]
    assert stopping_split(ids, 1)[0] != stop


def test_past_the_cap_the_contamination_is_reported_as_not_taken(tmp_path, monkeypatch):
    _scripted(monkeypatch, [[False] * 3, [True] + [False] * 2])
    folder = run_contamination(_cfg(until_significant=True, max_epochs=3, checkpoints=()), tmp_path / "runs",
                               run_id="cap", loaded=tiny_lm(seed=3), show_progress=False)
    info = folder.load_results()["finetune"]["until_significant"]
    assert not info["reached"] and info["epochs"] == 3 and "did not take" in info["text"]
    assert folder.load_results()["checkpoints"] == ["step-0", "step-6"]


def test_the_plan_prices_until_significant_at_its_cap():
    """An until_significant run is priced by ``max_epochs`` (its ``epochs`` is ignored) plus one
    answer of the stopping half before training and after each epoch, by hand."""
    from whitebox_eval.mui.record import contamination_work

    fixed = _cfg(epochs=2)
    capped = _cfg(epochs=2, until_significant=True, max_epochs=5)
    n, gen, tasks, points = 6, 4, len(fixed.tasks), 2 + 1
    runs = n * (4 + gen) * tasks * points
    assert contamination_work(fixed, "study") == (n * tasks, runs + 3 * n * 2 * 16)
    assert contamination_work(capped, "study") == (n * tasks, runs + 3 * n * 5 * 16 + (5 + 1) * (n // 2) * gen)
    assert contamination_work(_cfg(epochs=9, until_significant=True, max_epochs=5), "study") == \
        contamination_work(capped, "study")  # epochs does not count once until_significant is on
