"""The MUI study on a tiny model: run folder, MUI from stored key sets, resume after an interruption."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.mui import study  # noqa: E402
from whitebox_eval.mui.finished import load_key_sets, subset_mui  # noqa: E402
from whitebox_eval.mui.study import MUIConfig, run_mui, threshold_setting  # noqa: E402
from whitebox_eval.runs import RunFolder  # noqa: E402


def _cfg(**kw) -> MUIConfig:
    base = dict(model="tiny", task="arithmetic-gen:add1,mul1", limit=6, batch_size=2, max_new_tokens=4)
    base.update(kw)
    return MUIConfig(**base)


def test_threshold_setting():
    assert threshold_setting("top-per-mille", None) == ("top_fraction", 1e-3)
    assert threshold_setting("topk", 3) == ("topk", 3)
    with pytest.raises(WhiteboxError, match="threshold-value"):
        threshold_setting("topk", None)
    with pytest.raises(WhiteboxError, match="unknown threshold"):
        threshold_setting("best", None)


def test_study_writes_key_sets_and_mui_is_their_union(tmp_path):
    lm = tiny_lm("llama")
    folder = run_mui(_cfg(threshold="topk", threshold_value=2), tmp_path, run_id="r", loaded=lm)
    res = folder.load_results()
    samples = list(folder.read_samples())
    assert len(samples) == res["n_items"] == 6
    ks = load_key_sets(folder)
    assert ks.sample_ids == [s["id"] for s in samples]
    # MUI by hand: union of the stored per-sample masks over n_layers x d_ff
    union = np.zeros((lm.arch.n_layers, lm.arch.d_ff), dtype=bool)
    for i in range(len(ks)):
        m = ks.mask(i)
        scored = samples[i]["n_response_tokens"] > 0
        assert m.sum() == (2 * lm.arch.n_layers if scored else 0)  # topk=2 unique neurons per layer (no ties)
        union |= m
    assert res["mui"] == pytest.approx(union.sum() / union.size)
    assert res["n_activated"] == int(union.sum())
    assert res["accuracy"] == pytest.approx(np.mean([s["correct"] for s in samples]))
    assert set(res["by_group"]) == {"add1", "mul1"}
    # subset MUI from the folder alone
    m_add, n_add = subset_mui(folder.path, lambda s: s["group"] == "add1")
    idx = [i for i, s in enumerate(samples) if s["group"] == "add1"]
    assert n_add == 3 and m_add == pytest.approx(ks.mui(idx))
    assert folder.plot_path("layer_utilization").is_file()


def test_gold_responses_are_scored_and_correct(tmp_path):
    folder = run_mui(_cfg(responses="gold"), tmp_path, run_id="g", loaded=tiny_lm("llama"))
    res = folder.load_results()
    assert res["accuracy"] == 1.0
    assert all(s["n_key_units"] > 0 for s in folder.read_samples())


def test_resume_after_interruption_gives_the_same_run(tmp_path, monkeypatch):
    lm = tiny_lm("llama")
    cfg = _cfg()
    full = run_mui(cfg, tmp_path, run_id="full", loaded=lm)
    calls = {"n": 0}
    real = study.token_scores

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(study, "token_scores", failing)
    with pytest.raises(KeyboardInterrupt):
        run_mui(cfg, tmp_path, run_id="cut", loaded=lm)
    assert len(list(RunFolder.open(tmp_path / "cut").read_samples())) == 2  # one batch finished
    monkeypatch.setattr(study, "token_scores", real)
    with pytest.raises(WhiteboxError, match="resume"):
        run_mui(cfg, tmp_path, run_id="cut", loaded=lm)  # never overwrite finished work
    resumed = run_mui(cfg, tmp_path, run_id="cut", resume=True, loaded=lm)
    a, b = load_key_sets(full), load_key_sets(resumed)
    assert a.sample_ids == b.sample_ids
    assert all(np.array_equal(a.flat_indices(i), b.flat_indices(i)) for i in range(len(a)))
    assert full.load_results()["mui"] == resumed.load_results()["mui"]
    with pytest.raises(WhiteboxError, match="differs"):
        run_mui(_cfg(threshold="topk", threshold_value=3), tmp_path, run_id="cut", resume=True, loaded=lm)


def test_sae_score_needs_sae(tmp_path):
    with pytest.raises(WhiteboxError, match="--sae"):
        run_mui(_cfg(score="sae"), tmp_path, loaded=tiny_lm("llama"))
