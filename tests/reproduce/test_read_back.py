"""Per-item evidence read back from a child's arrays (mcqa/read_back.py, mui/read_back.py, named by
the suites' records and reached through reproduce/vocabulary.py), and its independent
recomputation (benchmarks/recompute_claims.py): the head ablation of a real tiny mcqa run, the
rarefied correct-vs-incorrect MUI of key sets, a Pearson r's percentile bootstrap interval."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import recompute_claims as rc  # noqa: E402
from whitebox_eval import stats  # noqa: E402
from whitebox_eval.mui.statistics import correct_vs_incorrect  # noqa: E402
from whitebox_eval.mui.study import KEY_SETS_FILE  # noqa: E402
from whitebox_eval.mui.utilization import KeySets  # noqa: E402
from whitebox_eval.reproduce import vocabulary  # noqa: E402
from whitebox_eval.reproduce.values import Missing  # noqa: E402

PAIRED = {"paired": "ablation_key_vs_random"}


def _through(name: str, suite: str):
    """The statistic as a claim reaches it: by name, through its suite's record."""
    return lambda study, spec: vocabulary.compute({"derived": name, **spec}, study, suite)


read_back = SimpleNamespace(ablation_items=_through("ablation_items", "mcqa"),
                            rarefied_relative=_through("rarefied_relative", "mui"),
                            contamination_items=_through("contamination_items", "contamination"))


@pytest.fixture(scope="module")
def ablation_run(tmp_path_factory):
    from tiny_models import tiny_llama_with_bpe
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa
    from whitebox_eval.runs.finished import read
    from whitebox_eval.tasks.prompts import render_prompt
    from whitebox_eval.tasks.ssd import make_ssd

    lm = tiny_llama_with_bpe([render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)], 400)
    cfg = MCQAConfig(model="tiny", limit=24, min_val_items=8, batch_size=4, methods=("baseline", "qk", "ablation"),
                     ablation_k=2, ablation_draws=3)
    folder = run_mcqa(cfg, tmp_path_factory.mktemp("mcqa"), run_id="r", loaded=lm, show_progress=False)
    return read(folder.path)


def test_the_ablation_read_back_is_the_childs_test_item_by_item(ablation_run):
    head = ablation_run.headline
    out = read_back.ablation_items(ablation_run, PAIRED)
    a, b = out["arms"]["a"], out["arms"]["b"]
    test_ids = [str(s["id"]) for s in ablation_run.samples if s.get("split") == "test"]
    assert sorted(a["items"]) == sorted(b["items"]) == sorted(test_ids) and len(test_ids) == 16
    assert np.mean(list(a["items"].values())) == pytest.approx(head["acc,ablation_key_heads"])
    assert np.mean(list(b["items"].values())) == pytest.approx(head["acc,ablation_random_heads"])
    assert set(b["items"].values()) <= {0.0, 1 / 3, 2 / 3, 1.0}  # a share of 3 draws
    written = ablation_run.results["paired_tests"]["ablation_key_vs_random"]
    assert out["value"] == pytest.approx(written["diff"]) and out["p_value"] == written["p_value"]
    assert out["scheme"]["resamples"] == stats.BOOTSTRAP_RESAMPLES
    # the independent script recomputes the paired bootstrap from the two arms
    ck = rc.Check()
    rc.check_statistic("ablation", {"statistic": {**out, "test": "paired_bootstrap"}}, out["arms"], ck,
                       np.random.default_rng(1))
    assert not ck.bad and ck.done["paired bootstrap p (Monte Carlo)"] == 1


def test_an_ablation_that_does_not_read_back_the_same_is_refused(ablation_run):
    tampered = SimpleNamespace(**{**ablation_run.__dict__, "results": {
        **ablation_run.results, "paired_tests": {"ablation_key_vs_random": {
            **ablation_run.results["paired_tests"]["ablation_key_vs_random"], "diff": 0.5}}}})
    with pytest.raises(Missing, match="read back"):
        read_back.ablation_items(tampered, PAIRED)
    # no folder to read (a synthetic child): the child's own test, saying it has no per-item values
    bare = SimpleNamespace(folder=None, results=ablation_run.results, samples=ablation_run.samples, config={})
    out = read_back.ablation_items(bare, PAIRED)
    assert "arms" not in out and "no per-item values" in out["evidence"]


def _mui_study(tmp_path: Path, n: int = 30, seed: int = 3):
    """Key sets of ``n`` responses over 4 layers x 50 units: the correct ones draw from a narrower pool."""
    rng = np.random.default_rng(seed)
    ks = KeySets(4, 50, "neuron")
    correct = rng.random(n) < 0.4
    for i in range(n):
        pool = 120 if correct[i] else 200
        flat = np.sort(rng.choice(pool, 6, replace=False))
        ks.add_indices(flat // 50, flat % 50, f"s{i}")
    (tmp_path / "arrays").mkdir()
    ks.save(tmp_path / "arrays" / KEY_SETS_FILE)
    results = {"correct_vs_incorrect": correct_vs_incorrect(ks, correct, seed=0, permutations=300)}
    return SimpleNamespace(folder=tmp_path, results=results, samples=[], config={"seed": 0},
                           arrays={"correct": correct.astype(np.int8)})


def test_rarefied_mui_recomputes_from_the_key_sets_alone(tmp_path):
    study = _mui_study(tmp_path)
    out = read_back.rarefied_relative(study, {"at": ["correct_vs_incorrect"]})
    obs = out.pop("observations")
    assert len(obs["units"]) == out["n"] == 30 and obs["total_units"] == 200
    assert out["scheme"] == {"permutations": 300, "seed": 0, "resampled": "group labels"}
    ck = rc.Check()
    rc.check_rarefied("mui", out, obs, ck, np.random.default_rng(7))
    assert not ck.bad, ck.bad
    assert ck.done["rarefied permutation p (Monte Carlo)"] == 1 and ck.done["jackknife interval lo"] == 1
    # a wrong subset size or a response moved to the other group is caught
    for broken_stat, broken_obs in (({**out, "subset_size": out["subset_size"] - 1}, obs),
                                    (out, {**obs, "correct": [not obs["correct"][0], *obs["correct"][1:]]})):
        ck = rc.Check()
        rc.check_rarefied("mui", broken_stat, broken_obs, ck, np.random.default_rng(7))
        assert ck.bad
    # the arrays are gone: the child's numbers stay, named as not recomputable
    (tmp_path / "arrays" / KEY_SETS_FILE).unlink()
    out = read_back.rarefied_relative(study, {"at": ["correct_vs_incorrect"]})
    assert "observations" not in out and "could not be read back" in out["evidence"]


def test_a_percentile_bootstrap_interval_recomputes_within_its_monte_carlo_tolerance():
    from whitebox_eval.formats.metrics import format_correlation

    rng = np.random.default_rng(0)
    x = rng.random(40)
    y = 0.3 * x + rng.random(40)
    est, _ = stats.bootstrap_pairs(x, y, format_correlation)
    s = {"lo": est.lo, "hi": est.hi}
    ck = rc.Check()
    rc.check_percentile_interval("r", "Pearson r's bootstrap interval", x, y, format_correlation, s, ck,
                                 np.random.default_rng(5))
    assert not ck.bad and ck.done["Pearson r's bootstrap interval lo (Monte Carlo)"] == 1
    ck = rc.Check()
    rc.check_percentile_interval("r", "Pearson r's bootstrap interval", x, y, format_correlation,
                                 {"lo": est.lo - 0.15, "hi": est.hi}, ck, np.random.default_rng(5))
    assert len(ck.bad) == 1 and " lo " in ck.bad[0]


def test_a_checkpoint_carries_what_the_claims_read_back(ablation_run, tmp_path, monkeypatch):
    """benchmarks/reproduce_checkpoint.py saves the ablation passes (and key sets) with a child's files;
    restored on another machine, the read-back gives the same arms."""
    import json
    import shutil

    from reproduce_checkpoint import restore, save
    from whitebox_eval.runs.finished import read

    run_id = ablation_run.folder.name
    (tmp_path / "repro" / "runs").mkdir(parents=True)
    shutil.copytree(ablation_run.folder, tmp_path / "repro" / "runs" / run_id)
    plan = {"scale": "micro", "data": {}, "models": [], "papers": [], "children": [
        {"run_id": run_id, "suite": "mcqa", "mode": None, "model": "tiny", "settings": {}, "skip": None, "items": 24, "uses": []}]}
    (tmp_path / "repro" / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    import reproduce_checkpoint

    monkeypatch.setattr(reproduce_checkpoint, "_estimated", lambda child: 1.0)  # a made-up plan: no estimate
    assert save(tmp_path / "repro", tmp_path / "saved") == {run_id: "saved"}
    saved = sorted(p.name for p in (tmp_path / "saved" / "runs" / run_id / "arrays" / "passes").iterdir())
    assert saved == ["ablate_random0.letter_logits.npy", "ablate_random1.letter_logits.npy",
                     "ablate_random2.letter_logits.npy", "ablate_top.letter_logits.npy"]
    restore(tmp_path / "saved", tmp_path / "other")
    back = read(tmp_path / "other" / "checkpoint" / "runs" / run_id)
    assert read_back.ablation_items(back, PAIRED)["arms"] == read_back.ablation_items(ablation_run, PAIRED)["arms"]


def _checkpoint_run(root: Path, name: str, gold: list[str], correct: np.ndarray, units: list[np.ndarray]) -> Path:
    from whitebox_eval.runs.folder import RunFolder

    folder = RunFolder.create(root, {"suite": "mui", "model": name, "task": "gsm8k"}, run_id=name)
    folder.append_samples([{"id": f"gsm8k-{i}", "gold": g, "correct": bool(c)} for i, (g, c) in enumerate(zip(gold, correct))])
    ks = KeySets(2, 40, "neuron")
    for i, flat in enumerate(units):
        ks.add_indices(flat // 40, flat % 40, f"gsm8k-{i}")
    (folder.path / "arrays").mkdir(exist_ok=True)
    ks.save(folder.path / "arrays" / KEY_SETS_FILE)
    return folder.path


def _contamination_study(tmp_path: Path, n: int = 24):
    """A contamination child as the suite lays it out: step 0 and the final checkpoint, each a MUI run
    of the same items under runs/, and the child's paired tests computed by the suite's own code."""
    from whitebox_eval.mui.over_runs import paired_tests

    rng = np.random.default_rng(4)
    gold = [str(rng.integers(1, 6)) for _ in range(n)]
    before = rng.random(n) < 0.1
    after = before | (rng.random(n) < 0.5)
    pool = lambda k: [np.sort(rng.choice(k, 5, replace=False)) for _ in range(n)]  # noqa: E731
    b = _checkpoint_run(tmp_path / "runs", "step-0-gsm8k", gold, before, pool(60))
    a = _checkpoint_run(tmp_path / "runs", "step-8-gsm8k", gold, after, pool(80))
    acc, mui = paired_tests(b, a)
    results = {"checkpoints": ["step-0", "step-8"], "final": "step-8",
               "tasks": {"gsm8k": {"runs": {"step-0": b.name, "step-8": a.name}}},
               "paired_tests": {"accuracy,gsm8k": acc, "mui,gsm8k": mui}}
    return SimpleNamespace(folder=tmp_path, results=results, samples=[], config={}), gold, before, after


def test_contamination_reads_back_each_item_and_each_responses_key_units(tmp_path):
    study, gold, before, after = _contamination_study(tmp_path)
    acc = read_back.contamination_items(study, {"paired": "accuracy,gsm8k"})
    a, b = acc["arms"]["a"], acc["arms"]["b"]
    assert a["label"] == "after fine-tuning" and a["k"] == int(after.sum()) and b["k"] == int(before.sum())
    assert a["answers"]["gsm8k-3"] == [None, gold[3], None]  # free text: the gold answer, no options
    ck = rc.Check()
    rc.check_statistic("acc", {"statistic": acc}, acc["arms"], ck, np.random.default_rng(0))
    assert not ck.bad and ck.done["McNemar p"] == 1
    mui = read_back.contamination_items(study, {"paired": "mui,gsm8k"})
    obs = mui.pop("observations")
    assert len(obs["before"]) == len(obs["after"]) == 24 and obs["total_units"] == 80
    ck = rc.Check()
    rc.check_statistic("mui", {"statistic": mui}, {}, ck, np.random.default_rng(0), obs)
    assert not ck.bad and ck.done["paired jackknife p"] == 1 and ck.done["paired jackknife interval lo"] == 1
    # a response's key units changed: the independent jackknife disagrees
    obs["after"][0] = list(range(70, 80))
    ck = rc.Check()
    rc.check_statistic("mui", {"statistic": mui}, {}, ck, np.random.default_rng(0), obs)
    assert ck.bad


def test_contamination_reads_back_the_tested_half_alone(tmp_path):
    """Under a stopping rule the contaminated task's claims rest on its tested half: the read-back
    recomputes the child's tests on those items, and a stopping item in it is refused."""
    from whitebox_eval.mui.over_runs import paired_tests

    study, gold, before, after = _contamination_study(tmp_path)
    runs = study.results["tasks"]["gsm8k"]["runs"]
    ids = [f"gsm8k-{i}" for i in range(24)]
    stop, tested = ids[::2], ids[1::2]
    acc, mui = paired_tests(tmp_path / "runs" / runs["step-0"], tmp_path / "runs" / runs["step-8"], tested)
    study.results.update(task="gsm8k", split={"stop": stop, "tested": tested},
                         paired_tests={"accuracy,gsm8k": acc, "mui,gsm8k": mui})
    out = read_back.contamination_items(study, {"paired": "accuracy,gsm8k"})
    assert out["n"] == 12 and set(out["arms"]["a"]["items"]) == set(tested) and "tested half" in out["items"]
    assert out["arms"]["a"]["k"] == int(after[1::2].sum())
    out = read_back.contamination_items(study, {"paired": "mui,gsm8k"})
    assert out["observations"]["ids"] == tested and len(out["observations"]["before"]) == 12
    study.results["split"] = {"stop": stop, "tested": tested + stop[:1]}
    with pytest.raises(Missing, match="disjoint"):
        read_back.contamination_items(study, {"paired": "accuracy,gsm8k"})


def test_a_contamination_read_back_that_differs_from_the_child_is_refused(tmp_path):
    study, *_ = _contamination_study(tmp_path)
    tests = study.results["paired_tests"]
    study.results["paired_tests"] = {**tests, "accuracy,gsm8k": {**tests["accuracy,gsm8k"], "diff": 0.9}}
    with pytest.raises(Missing, match="read back"):
        read_back.contamination_items(study, {"paired": "accuracy,gsm8k"})
    # no checkpoint runs to read (a synthetic child): the child's accuracies as arms, named unrecomputable
    bare = SimpleNamespace(folder=None, results={**study.results, "headline": {
        "accuracy,gsm8k,final": 0.5, "accuracy_n,gsm8k,final": 24, "accuracy,gsm8k,base": 0.1,
        "accuracy_n,gsm8k,base": 24}}, samples=[], config={})
    out = read_back.contamination_items(bare, {"paired": "mui,gsm8k"})
    assert "observations" not in out and "no per-item values" in out["evidence"]
    out = read_back.contamination_items(bare, {"paired": "accuracy,gsm8k"})
    assert {k: (a["label"], a["value"], "items" in a) for k, a in out["arms"].items()} == {
        "a": ("after fine-tuning", 0.5, False), "b": ("before", 0.1, False)}


def test_a_checkpoint_carries_a_contamination_childs_checkpoint_runs(tmp_path):
    import json

    from reproduce_checkpoint import _restore_child, _save_child

    child = tmp_path / "repro" / "contamination-x"
    study, *_ = _contamination_study(child)
    (child / "config.yaml").write_text("suite: contamination\n", encoding="utf-8")
    (child / "results.json").write_text(json.dumps(study.results), encoding="utf-8")
    _save_child(child, tmp_path / "saved" / child.name, [])
    assert (tmp_path / "saved" / child.name / "runs" / "step-8-gsm8k" / "arrays" / KEY_SETS_FILE).is_file()
    _restore_child(tmp_path / "saved" / child.name, tmp_path / "back" / child.name)
    back = SimpleNamespace(**{**study.__dict__, "folder": tmp_path / "back" / child.name})
    for paired in ("accuracy,gsm8k", "mui,gsm8k"):
        assert read_back.contamination_items(back, {"paired": paired}) == \
            read_back.contamination_items(study, {"paired": paired})


def test_class2_share_is_read_from_each_error_and_recomputed_from_them():
    """002 App. C: each generation error's class, from the child's samples (KR and generation-to-
    classification rows and right answers left out), gives the child's share; recompute_claims
    recomputes the share, its Wilson interval and its p against 0.5 from those 0/1 values."""
    from whitebox_eval.reproduce.verdicts import interval_p

    classes = ["other_candidate"] * 13 + ["off_candidates"] * 17 + ["target"] * 9
    samples = [{"task_id": "t", "index": i, "kr": False, "g2c": False, "error_class": c} for i, c in enumerate(classes)]
    samples += [{"task_id": "kr", "index": 0, "kr": True, "g2c": False, "error_class": "other_candidate"},
                {"task_id": "c", "index": 0, "kr": False, "g2c": True, "error_class": "other_candidate"}]
    results = {"error_analysis": {"n_errors": 30, "share,class2_wrong_candidate": 13 / 30}}
    study = SimpleNamespace(samples=samples, results=results, config={}, folder=None)
    share = vocabulary.compute({"derived": "error_shares", "class": "other_candidate"}, study, "gar")
    arm = share.pop("arms")["a"]
    assert (share["n"], arm["k"], arm["answers"]) == (30, 13, {}) and share["value"] == pytest.approx(13 / 30)
    claim = {"statistic": share, "than": 0.5, "p_value": interval_p(share, 0.5)}
    ck = rc.Check()
    rc.check_statistic("c2", claim, {"a": arm}, ck, np.random.default_rng(0))
    assert not ck.bad and ck.done["interval p against the boundary"] == 1 and ck.done["share from items"] == 1
    assert not ck.from_counts
    arm["items"]["t#0"] = 0.0  # one error's class changed: the share no longer agrees
    ck = rc.Check()
    rc.check_statistic("c2", claim, {"a": arm}, ck, np.random.default_rng(0))
    assert ck.bad
    study.results["error_analysis"]["share,class2_wrong_candidate"] = 0.5  # the child wrote another share
    with pytest.raises(Missing, match="the child wrote"):
        vocabulary.compute({"derived": "error_shares", "class": "other_candidate"}, study, "gar")


def test_truth_probe_mcnemar_is_recomputed_from_each_statement():
    """The truth probes' arms (each held-out statement right or not, probe and majority label) give
    the McNemar from items, not from the child's discordant counts."""
    rng = np.random.default_rng(3)
    probe, majority = rng.random(60) < 0.6, rng.random(60) < 0.5
    t = stats.mcnemar(probe, majority).as_dict()
    from whitebox_eval.reproduce.values import record

    rec = record(t, "probes/x.csv/paired_tests/probe_vs_majority")
    arms = {"a": {"items": {str(i): float(v) for i, v in enumerate(probe)}},
            "b": {"items": {str(i): float(v) for i, v in enumerate(majority)}}}
    ck = rc.Check()
    rc.check_statistic("probe", {"statistic": rec}, arms, ck, np.random.default_rng(0))
    assert not ck.bad and ck.done["McNemar b"] == 1 and not ck.from_counts
    ck = rc.Check()
    rc.check_statistic("probe", {"statistic": rec}, {}, ck, np.random.default_rng(0))  # no statements kept
    assert not ck.bad and ck.from_counts["McNemar (b, c, n)"] == 1


def test_pa_stability_reads_each_items_accuracy_and_pa_and_recomputes_from_them():
    """000 sec. 5.4 PA stability from per-item PA: the baseline loses half its right answers to a
    permutation, the head a fifth; the relative drops' difference (+0.3) and its bootstrap come
    back from the four per-item columns alone, and an item changed in the evidence is caught."""
    rng = np.random.default_rng(5)
    n = 200
    acc_h, acc_b = rng.random(n) < 0.6, rng.random(n) < 0.5
    pa_h = acc_h & (rng.random(n) < 0.8)
    pa_b = acc_b & (rng.random(n) < 0.5)
    samples = [{"id": f"q{i}", "split": "test", "acc,qk_head": int(a), "pa,qk_head": int(p), "acc,baseline": int(b),
                "pa,baseline": int(q)} for i, (a, p, b, q) in enumerate(zip(acc_h, pa_h, acc_b, pa_b))]
    samples += [{"id": "v0", "split": "validation", "acc,baseline": 1, "pa,baseline": 1}]  # no head PA: left out
    study = SimpleNamespace(samples=samples, results={}, config={}, folder=None)
    out = vocabulary.compute({"derived": "pa_stability"}, study, "mcqa")
    want = (1 - pa_b.mean() / acc_b.mean()) - (1 - pa_h.mean() / acc_h.mean())
    assert out["n"] == n and out["value"] == pytest.approx(want) and 0.15 < want < 0.45
    assert out["lo"] < want < out["hi"] and out["p_value"] < 0.05
    obs = out.pop("observations")
    ck = rc.Check()
    rc.check_statistic("pa", {"statistic": out}, {}, ck, np.random.default_rng(0), obs)
    assert not ck.bad and ck.done["relative PA drops' bootstrap p (Monte Carlo)"] == 1
    obs["pa_head"] = [0] * n  # the head keeps no right answer under permutation: the drops' difference changes
    ck = rc.Check()
    rc.check_statistic("pa", {"statistic": out}, {}, ck, np.random.default_rng(0), obs)
    assert ck.bad
    with pytest.raises(Missing, match="no per-item PA"):
        vocabulary.compute({"derived": "pa_stability"}, SimpleNamespace(samples=samples[-1:], results={}), "mcqa")
