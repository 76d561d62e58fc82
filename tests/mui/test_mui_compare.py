"""Checkpoint comparison (Corollary 1), the Utility Law over runs, SAE training, and the CLI group."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.mui.command import command  # noqa: E402
from whitebox_eval.mui.over_runs import compare_checkpoints, comparison_table, fit_runs, save_comparison  # noqa: E402
from whitebox_eval.sae.files import load_sae  # noqa: E402
from whitebox_eval.sae.training import train_sae_for_model  # noqa: E402
from whitebox_eval.mui.study import MUIConfig  # noqa: E402
from whitebox_eval.mui.utility_law import Direction, classify_direction  # noqa: E402
from whitebox_eval.runs import RunFolder  # noqa: E402


def _fake_run(root: Path, name: str, acc: float, mui: float) -> Path:
    f = RunFolder.create(root, {"suite": "mui", "model": name, "task": "t"}, run_id=name)
    f.save_results({"accuracy": acc / 100, "mui": mui / 100, "headline": {"accuracy": acc / 100}})
    return f.path


def test_fit_runs_recovers_the_law_and_skips_zero_accuracy(tmp_path):
    a, b = -2.0, 12.0
    runs = [_fake_run(tmp_path, f"m{p}", p, a * math.log(p) + b) for p in (10.0, 30.0, 60.0, 90.0)]
    runs.append(_fake_run(tmp_path, "zero", 0.0, 5.0))
    res = fit_runs(runs, tmp_path / "law.png")
    assert res.fit.a == pytest.approx(a) and res.fit.b == pytest.approx(b) and res.fit.r2 == pytest.approx(1.0)
    assert len(res.skipped) == 1 and (tmp_path / "law.png").is_file()
    with pytest.raises(WhiteboxError, match="at least two"):
        fit_runs(runs[:1])


def test_compare_checkpoints_classifies_each_task(tmp_path):
    before, after = tiny_lm("llama", seed=0), tiny_lm("llama", seed=1)
    base = MUIConfig(model="x", task="ssd", limit=4, batch_size=4, max_new_tokens=3, threshold="topk", threshold_value=2)
    rows = compare_checkpoints("tiny-a", "tiny-b", ["ssd", "arithmetic-gen:add1"], base, tmp_path,
                               loaded_before=before, loaded_after=after)
    assert [r.task for r in rows] == ["ssd", "arithmetic-gen:add1"]
    for r in rows:
        assert r.direction == classify_direction(r.before, r.after)
        assert isinstance(r.direction, Direction)
        assert r.before[1] != r.after[1]  # different weights, different key neurons
    assert "direction" in comparison_table(rows)
    folder = save_comparison(rows, tmp_path, before="tiny-a", after="tiny-b", run_id="cmp")
    assert set(folder.load_results()["tasks"]) == {"ssd", "arithmetic-gen:add1"}
    # repeating the comparison reuses the finished runs
    again = compare_checkpoints("tiny-a", "tiny-b", ["ssd"], base, tmp_path, loaded_before=before, loaded_after=after)
    assert again[0].before == rows[0].before


def test_train_sae_for_a_tiny_model(tmp_path):
    lm = tiny_lm("llama")
    rep = train_sae_for_model(lm, 1, tmp_path / "sae", n_tokens=300, d_sae=16, k=4, steps=60, batch_size=64)
    assert rep.final_mse < rep.initial_mse
    sae = load_sae(tmp_path / "sae")
    assert sae.activation == "topk" and sae.k == 4 and sae.d_in == lm.arch.d_model
    assert sae.metadata["hook_layer"] == 1 and sae.metadata["hook_name"] == "blocks.1.hook_resid_post"


def test_cli_help_and_errors():
    runner = CliRunner()
    r = runner.invoke(command, ["--help"])
    assert r.exit_code == 0 and "top-per-mille" in r.output and "masking" in r.output
    for sub in ("compare", "law", "masking", "train-sae", "subset"):
        assert runner.invoke(command, [sub, "--help"]).exit_code == 0
    r = runner.invoke(command, [])
    assert isinstance(r.exception, WhiteboxError) and "--task" in str(r.exception)
    r = runner.invoke(command, ["masking", "--ks", "a,b"])
    assert isinstance(r.exception, WhiteboxError)


def _run_with(root: Path, name: str, acc: float, mui: float, n: int = 24, **settings) -> Path:
    cfg = {"suite": "mui", "model": name, "task": "t", **MUIConfig().to_dict(), **settings}
    cfg["model"] = name
    f = RunFolder.create(root, cfg, run_id=name)
    f.save_results({"accuracy": acc / 100, "mui": mui / 100, "n_items": n})
    return f.path


def test_law_refuses_mixed_settings_in_one_line(tmp_path):
    """Regression: runs at thresholds 1 and 0.1 per mille, other units or other n were fitted together."""
    a = _run_with(tmp_path, "a", 20.0, 3.0)
    b = _run_with(tmp_path, "b", 40.0, 2.5, threshold="top-fraction", threshold_value=0.01)
    c = _run_with(tmp_path, "c", 60.0, 2.0, unit="neuron", n=100)
    with pytest.raises(WhiteboxError) as e:
        fit_runs([a, b, c])
    msg = str(e.value)
    assert "\n" not in msg and "--allow-mixed" in msg
    assert "threshold (top-per-mille vs top-fraction)" in msg and "threshold_value (None vs 0.01)" in msg
    assert "unit (pair vs neuron)" in msg and "n (24 vs 100)" in msg
    res = fit_runs([a, b, c], allow_mixed=True)
    assert res.fit.n_points == 3 and len(res.mixed) == 4
    r = CliRunner().invoke(command, ["law", str(a), str(b)])
    assert isinstance(r.exception, WhiteboxError) and "threshold" in str(r.exception)


def test_reproduce_fits_the_largest_comparable_group_and_names_the_runs_left_out(tmp_path):
    """reproduce's Utility Law: a task run with more items and a longer budget than the rest (BIG-Bench
    at the cpu scale) is left out of the fit with the settings that differ, not mixed in, and the
    fit over the rest equals fit_runs over those runs alone (an exact law: A = -2)."""
    from whitebox_eval.mui.over_runs import comparable_groups
    from whitebox_eval.mui.read_back import utility_law as law
    from whitebox_eval.reproduce.vocabulary import kit

    def utility_law(folders, labels):
        return law(folders, labels, kit())

    same = [_run_with(tmp_path, f"m{p}", p, -2.0 * math.log(p) + 12.0, n=48, max_new_tokens=32) for p in (10.0, 30.0, 60.0)]
    other = _run_with(tmp_path, "bbh", 20.0, 9.0, n=200, max_new_tokens=8)
    runs = [same[0], other, same[1], same[2]]
    assert comparable_groups(runs) == [[0, 2, 3], [1]]
    t = utility_law([str(r) for r in runs], ["a", "bbh", "b", "c"])
    assert t["n"] == 3 and t["value"] == pytest.approx(-2.0) and [p["label"] for p in t["points"]] == ["a", "b", "c"]
    assert t["skipped"] == ["bbh (settings differ from the fit's runs: max_new_tokens (32 vs 8); n (48 vs 200))"]
    assert t["value"] == pytest.approx(fit_runs(same).fit.a)
    assert comparable_groups([other, same[0]]) == [[0], [1]]  # a tie: the group whose first run comes first


def test_reproduce_law_reads_no_folder_again(tmp_path):
    """A reproduction reads each finished child once, at assembly: the Utility Law over runs takes the
    runs as read (``StudyResult``) and gives the same fit with their folders' results.json gone."""
    from whitebox_eval.mui.read_back import utility_law as law
    from whitebox_eval.reproduce.vocabulary import kit
    from whitebox_eval.runs.finished import read

    runs = [_run_with(tmp_path, f"m{p}", p, -2.0 * math.log(p) + 12.0, n=48) for p in (10.0, 30.0, 60.0)]
    by_folder = law([str(r) for r in runs], ["a", "b", "c"], kit())
    studies = [read(r) for r in runs]
    for r in runs:
        (r / "results.json").unlink()
    assert law(studies, ["a", "b", "c"], kit()) == by_folder
    assert by_folder["value"] == pytest.approx(-2.0)


def test_law_needs_three_runs_for_r2_and_reports_intervals(tmp_path):
    """R^2 with two points is always 1: not reported. From 3 points, A and B get OLS t-intervals,
    checked against scipy.stats.linregress's standard errors."""
    from scipy import stats as sps

    two = [_run_with(tmp_path, f"m{p}", p, m) for p, m in ((20.0, 3.0), (40.0, 2.2))]
    res = fit_runs(two)
    assert res.fit.r2 is None and res.fit.a_ci is None
    out = CliRunner().invoke(command, ["law", *map(str, two)]).output
    assert "R^2 and intervals need >= 3 runs" in out and "R^2 =" not in out
    pts = ((10.0, 3.1), (20.0, 2.9), (45.0, 2.1), (80.0, 1.8))
    runs = [_run_with(tmp_path, f"n{p}", p, m) for p, m in pts]
    res = fit_runs(runs)
    x = [math.log(p) for p, _ in pts]
    y = [m for _, m in pts]
    ref = sps.linregress(x, y)
    t = sps.t.ppf(0.975, len(pts) - 2)
    assert res.fit.a == pytest.approx(ref.slope) and res.fit.r2 == pytest.approx(ref.rvalue ** 2)
    assert res.fit.a_ci == pytest.approx((ref.slope - t * ref.stderr, ref.slope + t * ref.stderr))
    assert res.fit.b_ci == pytest.approx((ref.intercept - t * ref.intercept_stderr, ref.intercept + t * ref.intercept_stderr))


def test_checkpoint_run_ids_differ_for_same_folder_names(tmp_path):
    """Regression: /ckpts/base/model and /ckpts/tuned/model both gave run id mui-model-..."""
    from whitebox_eval.mui.over_runs import checkpoint_run_id

    (tmp_path / "base" / "model").mkdir(parents=True)
    (tmp_path / "tuned" / "model").mkdir(parents=True)
    a = checkpoint_run_id(str(tmp_path / "base" / "model"), "ssd", 10)
    b = checkpoint_run_id(str(tmp_path / "tuned" / "model"), "ssd", 10)
    assert a != b and a.startswith("mui-model-") and b.startswith("mui-model-")
    assert checkpoint_run_id(str(tmp_path / "base" / "model"), "ssd", 10) == a  # stable, so runs are reused


def test_compare_reports_paired_tests_of_both_moves(tmp_path):
    """Each task's accuracy move gets an exact McNemar and its MUI move a paired jackknife over the items,
    recomputed here from the two run folders."""
    from whitebox_eval import stats
    from whitebox_eval.mui.statistics import jackknife_mui_difference
    from whitebox_eval.mui.finished import load_key_sets

    before, after = tiny_lm("llama", seed=0), tiny_lm("llama", seed=1)
    base = MUIConfig(model="x", task="ssd", limit=6, batch_size=6, max_new_tokens=3)
    rows = compare_checkpoints("tiny-a", "tiny-b", ["ssd"], base, tmp_path, loaded_before=before, loaded_after=after)
    r = rows[0]
    a, b = RunFolder.open(r.before_run), RunFolder.open(r.after_run)
    ca = [s["correct"] for s in a.read_samples()]
    cb = [s["correct"] for s in b.read_samples()]
    assert r.accuracy_test["p_value"] == pytest.approx(stats.mcnemar(cb, ca).p_value)
    want = jackknife_mui_difference(load_key_sets(a), load_key_sets(b))
    assert r.mui_test["diff"] == pytest.approx(r.after[1] / 100 - r.before[1] / 100)
    assert r.mui_test["lo"] == pytest.approx(want.lo)
    assert len(r.verdicts()) == 2


def test_jackknife_mui_difference_by_hand():
    import numpy as np

    from whitebox_eval.mui.statistics import jackknife_mui_difference
    from whitebox_eval.mui.utilization import KeySets

    def ks(sets):
        k = KeySets(1, 10, "neuron")
        for i, s in enumerate(sets):
            m = np.zeros((1, 10), dtype=bool)
            m[0, sorted(s)] = True
            k.add(m, f"s{i}")
        return k

    a = ks([{0}, {0}, {0, 1}])        # MUI 0.2; leave-one-out 0.2, 0.2, 0.1
    b = ks([{2}, {3}, {4, 5}])        # MUI 0.4; leave-one-out 0.3, 0.3, 0.2
    t = jackknife_mui_difference(a, b)
    # the per-item differences of leave-one-out values are constant (0.1): se = 0, no item moves the difference
    assert t.diff == pytest.approx(0.2)
    assert t.lo == pytest.approx(0.2) and t.hi == pytest.approx(0.2)
    assert t.p_value < 1e-6
    c = ks([{2}, {3}, {4}])           # MUI 0.3; leave-one-out 0.2 each -> differences 0.0, 0.0, 0.1
    t = jackknife_mui_difference(a, c)
    loo = np.array([0.0, 0.0, 0.1])
    se = math.sqrt(2 / 3 * ((loo - loo.mean()) ** 2).sum())
    assert t.diff == pytest.approx(0.1) and (t.hi - t.lo) / 2 == pytest.approx(1.959963985 * se)


def _sae_run(root: Path, model: str, **recipe) -> Path:
    cfg = {"suite": "sae", "model": model, "d_sae": 4096, "k": 32, "layer": "middle", "steps": 2000,
           "text": [f"/machine/{model}/wikitext2/valid.txt"], **recipe}
    return RunFolder.create(root, cfg, run_id=f"sae-{model}-{recipe.get('k', 32)}").path


def test_sae_based_mui_of_two_models_is_comparable_when_their_saes_share_a_recipe(tmp_path):
    """Each model has its own SAE: the law compares the SAEs' training recipes, not their folders."""
    small, big = _sae_run(tmp_path, "small"), _sae_run(tmp_path, "big")
    a = _run_with(tmp_path, "a", 20.0, 3.0, score="sae", sae=[str(small)])
    b = _run_with(tmp_path, "b", 40.0, 2.5, score="sae", sae=[str(big)])
    assert fit_runs([a, b]).fit.n_points == 2  # same width, k, layer, steps, data file: comparable
    other = _sae_run(tmp_path, "big", k=64)
    c = _run_with(tmp_path, "c", 60.0, 2.0, score="sae", sae=[str(other)])
    with pytest.raises(WhiteboxError, match="k=32.* vs .*k=64"):
        fit_runs([a, c])
    released = _run_with(tmp_path, "d", 50.0, 2.0, score="sae", sae=["gemma-scope-2b-pt-res/layer_9"])
    with pytest.raises(WhiteboxError, match="gemma-scope"):
        fit_runs([a, released])


def test_sae_runs_named_relative_to_a_reproduction_folder_compare_by_recipe(tmp_path, monkeypatch):
    """A reproduction's children name the SAE they read as ``runs/<sae run>`` (portable checkpoints): read from
    any working folder, two models' SAEs trained with one recipe make their MUI runs comparable, and
    SAEs of different recipes do not."""
    from whitebox_eval.mui.over_runs import comparable_groups

    runs = tmp_path / "repro" / "runs"
    recipe = {"suite": "sae", "layer": 1, "d_sae": 16, "k": 4, "steps": 60}
    for model, k in (("m1", 4), ("m2", 4), ("m3", 8)):
        RunFolder.create(runs, {**recipe, "model": model, "k": k}, run_id=f"sae-{model}")
    mui = [_run_with(runs, f"mui-{m}", 20.0 + i, 3.0, sae=[f"runs/sae-{m}"], unit="feature")
           for i, m in enumerate(("m1", "m2", "m3"))]
    monkeypatch.chdir(tmp_path)  # not the reproduction's folder: 'runs/sae-m1' does not exist from here
    assert comparable_groups(mui) == [[0, 1], [2]]
