"""Paper 001's protocol: the paper's key-set rule by default, truncation counts, intervals, the
effective threshold fraction, and the correct-vs-incorrect test at equal subset size."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import save_tiny_sae, tiny_lm  # noqa: E402
from whitebox_eval import stats  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Engine  # noqa: E402
from whitebox_eval.mui.command import _print_study, command  # noqa: E402
from whitebox_eval.mui.statistics import correct_vs_incorrect, jackknife_mui, threshold_summary  # noqa: E402
from whitebox_eval.mui.keyneurons import KeyNeuronConfig, ScoredSequence, token_scores  # noqa: E402
from whitebox_eval.mui.responses import prepare_task  # noqa: E402
from whitebox_eval.mui.finished import load_key_sets  # noqa: E402
from whitebox_eval.mui.study import MUIConfig, run_mui  # noqa: E402
from whitebox_eval.mui.thresholds import layer_topk_mask  # noqa: E402
from whitebox_eval.mui.utilization import KeySets  # noqa: E402


def _cfg(**kw) -> MUIConfig:
    base = dict(model="tiny", task="arithmetic-gen:add1,mul1", limit=6, batch_size=3, max_new_tokens=6)
    base.update(kw)
    return MUIConfig(**base)


# ---------------------------------------------------------------- 1. the paper's rule by default
def test_study_default_is_eq10_pooled_pairs(tmp_path):
    """Regression: the study's default key set is eq. 8/10 (pooled token-neuron pairs), recomputed here
    from the token scores with layer_topk_mask(unit="pair"); config.yaml says it is the paper's rule."""
    cfg = _cfg(threshold="topk", threshold_value=12, responses="gold", task="arithmetic-gen:add2,mul2")
    assert cfg.unit == "pair" and cfg.score_token == "next"
    lm = tiny_lm("llama")
    folder = run_mui(cfg, tmp_path, run_id="r", loaded=lm)
    assert "the paper's" in folder.config["key_set_rule"] and "not the paper" not in folder.config["key_set_rule"]
    ks = load_key_sets(folder)
    task = prepare_task(cfg, lm.tokenizer)
    samples = {s["id"]: s for s in folder.read_samples()}
    engine = Engine(lm)
    n_checked = n_differ = 0
    for i, it in enumerate(task.items):
        prompt = task.prompt(it, lm.tokenizer)
        resp = lm.tokenizer(samples[it.id]["response"])["input_ids"]
        s = token_scores(engine, [ScoredSequence(prompt, resp)], KeyNeuronConfig(score="contribution"))[0]
        want = layer_topk_mask(s, 12, unit="pair").numpy()
        assert np.array_equal(ks.mask(i), want)
        n_differ += not np.array_equal(want, layer_topk_mask(s, 12, unit="neuron").numpy())
        n_checked += 1
    assert n_checked == 6
    assert n_differ > 0  # the two rules really differ on these samples, so the check can fail
    res = folder.load_results()
    assert res["threshold"]["paper_rule"] is True and res["threshold"]["unit"] == "pair"


def test_reference_code_compat_sets_the_authors_settings_and_refuses_contradictions():
    cfg = MUIConfig(reference_code_compat=True)
    assert (cfg.activation, cfg.score_token, cfg.unit, cfg.final_norm) == ("mlp_gate_act", "at", "pair", "none")
    assert "authors' code" in cfg.to_dict()["key_set_rule"]
    with pytest.raises(WhiteboxError, match="reference-code-compat"):
        MUIConfig(reference_code_compat=True, unit="neuron")
    with pytest.raises(WhiteboxError, match="contribution or activation"):
        MUIConfig(reference_code_compat=True, score="ig")
    r = CliRunner().invoke(command, ["--task", "arithmetic-gen", "--reference-code-compat", "--unit", "neuron"])
    assert isinstance(r.exception, WhiteboxError)
    assert "drop --unit neuron" in str(r.exception) and "\n" not in str(r.exception)


def test_help_names_the_papers_rule():
    out = CliRunner().invoke(command, ["--help"]).output
    assert "pair (the paper's eq. 8/10)" in " ".join(out.split())
    assert "--reference-code-compat" in out


# ---------------------------------------------------------------- 2. truncated responses
def test_default_budget_is_the_papers_1024():
    """Regression: the default budget was 24 tokens (cut 11 of 24 arithmetic answers)."""
    from whitebox_eval.tasks.registry import RECORDS

    assert all(r.generation.max_new_tokens == 1024 for r in RECORDS.values()
               if r.generation is not None and r.name != "lm-eval")  # lm-eval's tasks: their own max_gen_toks


def test_truncated_responses_are_counted_and_warned(tmp_path, capsys):
    lm = tiny_lm("llama")
    folder = run_mui(_cfg(max_new_tokens=2), tmp_path, run_id="t", loaded=lm)
    res = folder.load_results()
    samples = list(folder.read_samples())
    cut = [s["id"] for s in samples if s["stopped_by"] is None]
    assert cut, "a 2-token budget must cut some random-model answers"
    assert res["n_truncated_responses"] == len(cut) and res["truncated_ids"] == cut
    assert res["max_new_tokens"] == 2
    _print_study(folder)
    out = capsys.readouterr().out
    assert f"WARNING: {len(cut)} of 6 responses hit the 2-token budget" in out
    assert f"responses truncated by the 2-token budget: {len(cut)} of 6" in out


def test_given_responses_are_never_truncated(tmp_path):
    folder = run_mui(_cfg(responses="gold"), tmp_path, run_id="g", loaded=tiny_lm("llama"))
    assert folder.load_results()["n_truncated_responses"] == 0


# ---------------------------------------------------------------- 8. effective fraction, 9. intervals
def test_effective_fraction_is_reported():
    """k = floor(0.001 * 1536) = 1 on SmolLM2: 0.065%, not 0.1%."""
    th = threshold_summary("top_fraction", 1e-3, 1536, 30, "pair")
    assert th["k_per_layer"] == 1 and th["effective_fraction"] == pytest.approx(1 / 1536)
    assert th["nominal_fraction"] == 1e-3
    th = threshold_summary("global_topk", 6, 40, 3, "pair")
    assert th["effective_fraction"] == pytest.approx(6 / 120)


def test_results_carry_intervals_and_effective_fraction(tmp_path):
    lm = tiny_lm("llama")
    folder = run_mui(_cfg(responses="gold", limit=8, task="arithmetic-gen"), tmp_path, run_id="i", loaded=lm)
    res = folder.load_results()
    assert res["threshold"]["k_per_layer"] == 1  # d_ff = 40
    assert res["threshold"]["effective_fraction"] == pytest.approx(1 / 40)
    k = int(round(res["accuracy"] * res["n_items"]))
    assert res["accuracy_ci"] == pytest.approx(list(stats.wilson(k, res["n_items"])))
    assert res["accuracy_n"] == 8 and res["mui_n"] == 8 and res["mui_ci_method"] == "jackknife"
    lo, hi = res["mui_ci"]
    assert lo <= res["mui"] <= hi
    assert res["headline"]["mui_ci"] == [lo, hi] and res["headline"]["accuracy_ci"] == res["accuracy_ci"]


def _keysets(sets: list[set[int]], width: int = 10) -> KeySets:
    ks = KeySets(1, width, "neuron")
    for s in sets:
        m = np.zeros((1, width), dtype=bool)
        m[0, sorted(s)] = True
        ks.add(m)
    return ks


def test_jackknife_mui_by_hand():
    # units: 0 in all three, 1 only in sample 0, 2 only in sample 1 -> union 3 of 10
    ks = _keysets([{0, 1}, {0, 2}, {0}])
    est = jackknife_mui(ks)
    loo = np.array([2, 2, 3]) / 10  # union without sample i
    se = math.sqrt(2 / 3 * ((loo - loo.mean()) ** 2).sum())
    assert est.value == pytest.approx(0.3)
    assert est.stderr == pytest.approx(se)
    assert est.lo == pytest.approx(0.3 - 1.959963985 * se) and est.hi == pytest.approx(0.3 + 1.959963985 * se)


# ---------------------------------------------------------------- 3. correct vs incorrect
def test_correct_vs_incorrect_refuses_small_groups_and_identical_sets():
    ks = _keysets([{i % 10} for i in range(12)])
    res = correct_vs_incorrect(ks, np.array([1, 1, 1] + [0] * 9, dtype=bool))
    assert "groups too small" in res["refused"] and "3 correct vs 9 incorrect" in res["refused"]
    same = _keysets([{1, 2}] * 12)
    res = correct_vs_incorrect(same, np.array([1] * 6 + [0] * 6, dtype=bool))
    assert "same key set" in res["refused"]


def _brute_rarefied(sets: list[set[int]], r: int) -> float:
    """Mean union size over every r-subset (itertools), the definition rarefaction computes exactly."""
    from itertools import combinations

    sizes = [len(set().union(*c)) for c in combinations(sets, r)]
    return sum(sizes) / len(sizes)


def test_rarefied_union_equals_the_mean_over_all_subsets():
    from whitebox_eval.mui.statistics import rarefied_union

    rng = np.random.default_rng(0)
    sets = [set(rng.choice(12, rng.integers(1, 5), replace=False).tolist()) for _ in range(7)]
    flats = [np.array(sorted(s)) for s in sets]
    for r in (1, 3, 6, 7):
        assert rarefied_union(flats, r) == pytest.approx(_brute_rarefied(sets, r))


def test_correct_vs_incorrect_compares_groups_at_the_same_size():
    """Correct samples each use a new unit, incorrect ones all share unit 0. Rarefied to r = 6 - 1 = 5:
    correct 6 * 5/6 = 5 units, incorrect 1 unit. Only the true labeling reaches that difference, so the
    permutation p is (1 + 0) / (1 + 500). The interval is the delete-one jackknife, recomputed here by
    brute force over subsets. Exchangeable labels give a large p."""
    width = 40
    sets = [{i + 1} for i in range(6)] + [{0}] * 10
    ks = _keysets(sets, width)
    correct = np.array([1] * 6 + [0] * 10, dtype=bool)
    res = correct_vs_incorrect(ks, correct, permutations=500)
    assert res["subset_size"] == 5
    assert res["mui_correct_at_r"] == pytest.approx(5 / width) and res["mui_incorrect_at_r"] == pytest.approx(1 / width)
    assert res["diff"] == pytest.approx(4 / width)
    assert res["p_value"] == pytest.approx(1 / 501) and res["significant"]
    ok, bad = sets[:6], sets[6:]
    a, b = _brute_rarefied(ok, 5), _brute_rarefied(bad, 5)
    loo = [(_brute_rarefied(ok[:j] + ok[j + 1:], 5) - b) / width for j in range(6)]
    loo += [(a - _brute_rarefied(bad[:j] + bad[j + 1:], 5)) / width for j in range(10)]
    loo = np.array(loo)
    se = math.sqrt((len(loo) - 1) / len(loo) * ((loo - loo.mean()) ** 2).sum())
    assert res["diff_stderr"] == pytest.approx(se) and res["diff_ci_method"] == "jackknife"
    assert res["diff_ci"] == pytest.approx([4 / width - 1.959963985 * se, 4 / width + 1.959963985 * se])
    rng = np.random.default_rng(1)
    mixed = _keysets([set(rng.choice(width, 3, replace=False).tolist()) for _ in range(20)], width)
    res = correct_vs_incorrect(mixed, np.array([1, 0] * 10, dtype=bool), permutations=300)
    assert res["p_value"] > 0.05 and not res["significant"]
    assert res["diff_ci"][0] <= res["diff"] <= res["diff_ci"][1]


def test_study_reports_the_permutation_test_not_mann_whitney(tmp_path):
    """Regression: the Mann-Whitney over re-drawn subsets (pseudo-replication) is gone."""
    folder = run_mui(_cfg(), tmp_path, run_id="c", loaded=tiny_lm("llama"))
    res = folder.load_results()
    assert "mann_whitney_correct_vs_incorrect" not in res
    assert "refused" in res["correct_vs_incorrect"] or res["correct_vs_incorrect"]["test"] == "permutation of group labels"


# ---------------------------------------------------------------- 7. SAE reconstruction quality
def test_sae_run_reports_reconstruction_quality_and_warns_when_poor(tmp_path, capsys):
    """A random (untrained) SAE reconstructs the residual stream badly: the run reports its explained
    variance (recomputed here from hooked residuals at the scored positions) and dead features, and warns
    once, from the fidelity figures."""
    lm = tiny_lm("llama")
    sae = save_tiny_sae(lm, tmp_path / "sae")
    cfg = _cfg(score="sae", sae=(str(tmp_path / "sae"),), responses="gold", threshold="topk", threshold_value=3)
    folder = run_mui(cfg, tmp_path, run_id="s", loaded=lm)
    res = folder.load_results()
    q = res["sae_quality"]["1"]
    # independent: residual leaving block 1 at every predicting position, by a plain hook
    task = prepare_task(cfg, lm.tokenizer)
    xs = []
    for it in task.items:
        prompt = task.prompt(it, lm.tokenizer)
        ids = prompt + lm.tokenizer(it.gold_response)["input_ids"]
        got = {}
        h = lm.arch.blocks[1].register_forward_hook(lambda m, a, o: got.__setitem__("h", (o[0] if isinstance(o, tuple) else o)[0]))
        with torch.no_grad():
            lm.model(input_ids=torch.tensor([ids]))
        h.remove()
        xs.append(got["h"][len(prompt) - 1:len(ids) - 1].float())
    x = torch.cat(xs)
    with torch.no_grad():
        fx = sae.encode(x)
        ev = 1 - float(((sae.decode(fx) - x) ** 2).sum() / ((x - x.mean(0)) ** 2).sum())
    assert q["n_tokens"] == x.shape[0]
    assert q["explained_variance"] == pytest.approx(ev, rel=1e-4, abs=1e-4)
    assert q["n_dead"] == int(((fx > 0).sum(0) == 0).sum())
    # judged once, on the fidelity figures of the task's tokens (not again on the pooled variance above)
    assert "warning" not in q
    assert [w for w in res["warnings"] if "poor SAE" in w] == [
        f"layer 1, fidelity on this task's tokens: {res['sae_fidelity']['1']['warning']}"]
    assert "per-token explained variance" in res["sae_fidelity"]["1"]["warning"]
    _print_study(folder)
    assert "WARNING: layer 1, fidelity on this task's tokens: poor SAE" in capsys.readouterr().out


def test_identical_key_sets_are_warned(tmp_path, monkeypatch):
    """Regression: an SAE that gave every sample the same features raised no warning."""
    from whitebox_eval.mui import study

    lm = tiny_lm("llama")
    def same(scores, cfg):
        m = torch.zeros(lm.arch.n_layers, lm.arch.d_ff, dtype=torch.bool)
        m[:, 0] = True
        return m

    monkeypatch.setattr(study, "sample_key_mask", same)
    folder = run_mui(_cfg(responses="gold"), tmp_path, run_id="same", loaded=lm)
    assert any("same key set" in w for w in folder.load_results()["warnings"])


def test_subset_command_prints_the_interval(tmp_path):
    folder = run_mui(_cfg(responses="gold"), tmp_path, run_id="sub", loaded=tiny_lm("llama"))
    out = CliRunner().invoke(command, ["subset", str(folder.path), "--group", "add1"]).output
    ks = load_key_sets(folder)
    idx = [i for i, s in enumerate(folder.read_samples()) if s["group"] == "add1"]
    est = jackknife_mui(ks, idx)
    assert out.startswith(f"{len(idx)} samples  MUI {est.value:.3%} [{est.lo:.3%}, {est.hi:.3%}]")


def test_mui_records_and_checks_the_data_files_it_read(tmp_path):
    """config.yaml lists every data file with its sha256; --resume refuses changed data."""
    import hashlib

    import yaml

    data = tmp_path / "mmlu" / "astronomy_test.csv"
    data.parent.mkdir()
    data.write_text("".join(f"What is {i}?,a{i},b{i},c{i},d{i},B\n" for i in range(4)))
    cfg = _cfg(task=f"mmlu={data}", responses="gold", limit=4)
    folder = run_mui(cfg, tmp_path / "runs", run_id="d", loaded=tiny_lm("llama"))
    rec = yaml.safe_load((folder.path / "config.yaml").read_text())["data_files"]
    assert rec == [{"path": str(data), "sha256": hashlib.sha256(data.read_bytes()).hexdigest(), "bytes": data.stat().st_size}]
    data.write_text(data.read_text().replace("What is 0?", "What is zero?"))
    with pytest.raises(WhiteboxError, match="changed since the run started"):
        run_mui(cfg, tmp_path / "runs", run_id="d", resume=True, loaded=tiny_lm("llama"))
