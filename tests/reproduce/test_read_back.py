"""Per-item evidence read back from a child's arrays (reproduce/read_back.py), and its independent
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
from whitebox_eval.reproduce import read_back  # noqa: E402
from whitebox_eval.reproduce.values import Missing  # noqa: E402

PAIRED = {"paired": "ablation_key_vs_random"}


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
