"""Span protocol: held-out choice of N and C, the controls and the paired tests (003 sec. 5.1)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import binomtest

from whitebox_eval.span import protocol
from whitebox_eval.span.command import command, print_summary
from whitebox_eval.span.study import SpanConfig, run_span
from whitebox_eval.errors import WhiteboxError


def _recs(exact, partial=None):
    partial = partial or [float(e) for e in exact]
    return [{"exact": bool(e), "partial": p, "generation_exact": bool(e)} for e, p in zip(exact, partial)]


def test_choose_setting_uses_accuracy_then_partial_then_fewer_heads_then_smaller_c():
    grid = protocol.selection_table([
        (5, 1.0, _recs([1, 0, 0, 0])), (10, 0.3, _recs([1, 1, 0, 0], [1, 1, 0.2, 0])),
        (5, 0.3, _recs([1, 1, 0, 0], [1, 1, 0.5, 0])), (20, 0.3, _recs([1, 1, 0, 0], [1, 1, 0.5, 0]))])
    assert protocol.choose_setting(grid)["n_heads"] == 5 and protocol.choose_setting(grid)["value"] == 0.3
    assert grid[0]["accuracy_n"] == 4 and grid[0]["accuracy_ci_method"] == "wilson"
    with pytest.raises(WhiteboxError):
        protocol.choose_setting([])


def test_evaluation_report_paired_tests_against_hand_counts():
    rng = np.random.default_rng(0)
    n = 40
    base = rng.random(n) < 0.3
    key = base | (rng.random(n) < 0.5)
    shifted = rng.random(n) < 0.35
    draws = [rng.random(n) < 0.3 for _ in range(5)]
    results: dict = {}
    rep = protocol.evaluation_report(_recs(base), _recs(key), _recs(shifted),
                                     [(d, ((0, d),), _recs(x)) for d, x in enumerate(draws)], results)
    tests = results["paired_tests"]
    for name, (x, y) in {protocol.VS_NONE: (key, base), protocol.VS_SHIFTED: (key, shifted),
                         protocol.SHIFTED_VS_NONE: (shifted, base)}.items():
        b, c = int(np.sum(x & ~y)), int(np.sum(~x & y))
        assert (tests[name]["b"], tests[name]["c"]) == (b, c)
        assert tests[name]["p_value"] == pytest.approx(binomtest(b, b + c, 0.5).pvalue)
        assert tests[name]["diff"] == pytest.approx(x.mean() - y.mean())
    # vs random heads: reinforced 0/1 against the per-item share of draws that were right
    share = np.mean(draws, axis=0)
    assert tests[protocol.VS_RANDOM]["test"] == "paired_bootstrap"
    assert tests[protocol.VS_RANDOM]["diff"] == pytest.approx(key.mean() - share.mean())
    rh = rep["random_heads"]
    accs = [d.mean() for d in draws]
    assert rh["accuracy"]["draws"] == pytest.approx(accs)
    assert rh["accuracy"]["mean"] == pytest.approx(np.mean(accs))
    assert rh["accuracy"]["sd"] == pytest.approx(np.std(accs, ddof=1))
    assert all(len(d["accuracy_ci"]) == 2 and d["accuracy_n"] == n for d in rh["draws"])
    assert rh["draws"][2]["heads"] == [[0, 2]]
    assert rep["reinforced"]["accuracy"] == pytest.approx(key.mean())
    lo, hi = rep["reinforced"]["accuracy_ci"]
    assert lo < key.mean() < hi
    with pytest.raises(WhiteboxError, match="different numbers"):
        protocol.evaluation_report(_recs(base), _recs(key[:-1]), _recs(shifted), [], {})


def _cfg(**kw) -> SpanConfig:
    base = dict(model="tiny", task="string_reversal", split="ood", limit=6,
                id_params={"length": (2, 4)}, ood_params={"length": (5, 7)}, instruction="R:",
                reinforce=True, key_samples=3, heads=(1, 2), values=(0.5, 3.0), random_draws=5,
                select_limit=5, heatmaps=0, batch_size=3, rollout=False)
    base.update(kw)
    return SpanConfig(**base)


def test_study_chooses_n_and_c_on_the_selection_split_and_reports_on_a_disjoint_one(make_span_lm, tmp_path):
    folder = run_span(_cfg(reinforce_generation=True), tmp_path, run_id="p",
                      loaded=make_span_lm(seed=5), show_progress=False)
    res = folder.load_results()
    recs: dict[str, list[dict]] = {}
    for r in folder.read_samples():
        recs.setdefault(r["stage"], []).append(r)
    for v in recs.values():
        v.sort(key=lambda r: r["index"])
    splits = json.loads((folder.path / "splits.json").read_text())
    # the three example sets are disjoint and the run folder names them
    assert set(splits["overlap"].values()) == {0}
    assert splits["selection"]["inputs"] == [r["input"] for r in recs["select/none"]]
    assert splits["evaluation"]["inputs"] == [r["input"] for r in recs["base/ood"]]
    assert not set(splits["selection"]["inputs"]) & set(splits["evaluation"]["inputs"])
    assert (splits["selection"]["n"], splits["evaluation"]["n"], splits["key_heads"]["n"]) == (5, 6, 3)
    rein = res["reinforcement"]
    assert rein["protocol"]["selection"]["n"] == 5 and rein["protocol"]["evaluation"]["n"] == 6
    # the chosen point is the best one on the selection records (recomputed here)
    grid = {(n, c): recs[f"select/key-top{n}-C{c:g}-standard"] for n in (1, 2) for c in (0.5, 3.0)}
    best = max(grid, key=lambda k: (np.mean([r["exact"] for r in grid[k]]),
                                    np.mean([r["partial"] for r in grid[k]]), -k[0], -k[1]))
    ch = rein["selection"]["chosen"]
    assert (ch["n_heads"], ch["value"]) == best
    # and it is reported on the evaluation items only
    key = recs[f"reinforce/key-top{best[0]}-C{best[1]:g}-standard"]
    assert [r["input"] for r in key] == splits["evaluation"]["inputs"]
    ev = rein["evaluation"]
    assert ev["reinforced"]["accuracy"] == pytest.approx(np.mean([r["exact"] for r in key]))
    assert ev["n"] == 6 and ev["reinforced"]["accuracy_n"] == 6
    # random heads: 5 draws of N non-key heads from the band
    top = [(h["layer"], h["head"]) for h in rein["key_heads"]]
    assert len(top) == best[0]
    lo, hi = ev["random_heads"]["band"]
    assert len(ev["random_heads"]["draws"]) == 5
    for d in ev["random_heads"]["draws"]:
        heads = [tuple(h) for h in d["heads"]]
        assert len(heads) == best[0] and not set(heads) & set(top)
        assert all(lo <= l <= hi for l, _ in heads)
    control = ev["random_heads"]["control"]
    assert control["rule"] == "widened-band" and control["band"] == [lo, hi]
    assert control["draws"] == [d["heads"] for d in ev["random_heads"]["draws"]]
    assert set(res["paired_tests"]) >= {protocol.VS_NONE, protocol.VS_RANDOM, protocol.VS_SHIFTED,
                                        protocol.SHIFTED_VS_NONE}
    # generation under reinforcement, whole-string accuracy on the same items
    gen = rein["generation"]
    g = recs[f"generate/key-top{best[0]}-C{best[1]:g}-standard"]
    assert gen["reinforced"]["generation_accuracy"] == pytest.approx(
        np.mean([r["generated"].strip() == r["target"] for r in g]))
    assert "generated: reinforced vs none" in res["paired_tests"]
    out = CliRunner().invoke(command, ["--help"])
    assert "--select-limit" in out.output and "--reinforce-generation" in out.output


def test_print_summary_names_the_controls_and_verdicts(make_span_lm, tmp_path, capsys):
    folder = run_span(_cfg(), tmp_path, run_id="s", loaded=make_span_lm(seed=5), show_progress=False)
    print_summary(folder)
    out = capsys.readouterr().out
    for words in ("chosen on 5 OOD selection examples", "6 disjoint OOD evaluation examples",
                  "REINFORCED key heads", "CONTROL shifted ref.", "CONTROL random heads",
                  "sd over 5 draws", "reinforced vs none", "reinforced vs shifted reference",
                  "reinforced vs random heads", "n=6"):
        assert words in out, words
    assert "significant" in out
