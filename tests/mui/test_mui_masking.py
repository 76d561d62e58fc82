"""Masking validation (paper 001 sec. 3.8) on a tiny model, and its set arithmetic by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Engine, batch_from_ids  # noqa: E402
from whitebox_eval.mui.masking import MaskingConfig, key_mask_for_k, mask_edits, run_masking  # noqa: E402


def test_key_mask_for_k_is_the_union_of_per_sample_top_k():
    # 2 samples, 2 layers, rankings of depth 3 over width 6
    r = np.array([[[5, 1, 2], [0, 3, 4]],
                  [[1, 4, 0], [0, 2, 5]]])
    m1 = key_mask_for_k(r, 1, 6)
    assert m1[0].nonzero()[0].tolist() == [1, 5] and m1[1].nonzero()[0].tolist() == [0]
    m2 = key_mask_for_k(r, 2, 6)
    assert m2[0].nonzero()[0].tolist() == [1, 4, 5] and m2[1].nonzero()[0].tolist() == [0, 2, 3]
    with pytest.raises(WhiteboxError):
        key_mask_for_k(r, 4, 6)


def test_mask_edits_zero_exactly_the_chosen_neurons():
    lm = tiny_lm("llama")
    mask = np.zeros((lm.arch.n_layers, lm.arch.d_ff), dtype=bool)
    mask[1, [3, 7]] = True
    edits = mask_edits(mask)
    assert len(edits) == 1 and edits[0].layer == 1 and list(edits[0].neurons) == [3, 7]
    # reference: zero the same down-projection input columns in the weights
    batch = batch_from_ids([[5, 9, 17, 33]])
    got = Engine(lm).run(batch, edits=edits).logits
    with torch.no_grad():
        w = lm.model.model.layers[1].mlp.down_proj.weight
        saved = w[:, [3, 7]].clone()
        w[:, [3, 7]] = 0
        want = lm.model(input_ids=batch.input_ids).logits[:, -1]
        w[:, [3, 7]] = saved
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_masking_runs_on_a_tiny_model_and_resumes(tmp_path):
    lm = tiny_lm("llama")
    cfg = MaskingConfig(model="tiny", source_task="arithmetic-gen:add1", eval_tasks=("arithmetic-gen:add1", "ssd"),
                        ks=(1, 4), limit=3, batch_size=3, max_new_tokens=3, random_draws=2)
    folder = run_masking(cfg, tmp_path, run_id="m", loaded=lm)
    res = folder.load_results()
    assert set(res["curves"]) == {"arithmetic-gen:add1", "ssd"}
    rows = list(folder.read_samples())
    assert len(rows) == 2 * (1 + 2 * (1 + 2))
    for t, c in res["curves"].items():
        assert [p["k"] for p in c["key"]] == [1, 4]
        n_key = [p["n_masked"] for p in c["key"]]
        assert n_key == [p["n_masked"] for p in c["random"]]  # matched counts
        assert n_key[0] <= n_key[1] and 1 <= n_key[0]
        for m in ("accuracy", "answer_logprob"):
            assert np.isfinite(c["baseline"][m])
            for r in c["random"]:
                assert len(r[f"{m},draws"]["draws"]) == 2  # every draw is reported
    # the key set for k=4 masks a different logprob than no masking
    c = res["curves"]["ssd"]
    assert c["key"][1]["answer_logprob"] != c["baseline"]["answer_logprob"]
    rankings = folder.load_array("source_rankings")
    assert rankings.shape == (3, lm.arch.n_layers, 4)
    assert folder.plot_path("masking_accuracy").is_file() and folder.plot_path("masking_answer_logprob").is_file()
    again = run_masking(cfg, tmp_path, run_id="m", resume=True, loaded=lm)  # everything done: only finalises
    assert again.load_results() == res


def test_key_neurons_are_selected_on_items_disjoint_from_the_evaluation(tmp_path):
    """Regression: selection and evaluation used the same items when the task was the same."""
    lm = tiny_lm("llama")
    cfg = MaskingConfig(model="tiny", source_task="arithmetic-gen:add2", eval_tasks=("arithmetic-gen:add2",),
                        ks=(1,), limit=4, batch_size=4, max_new_tokens=3, random_draws=2, generate=False)
    folder = run_masking(cfg, tmp_path, run_id="d", loaded=lm)
    res = folder.load_results()
    sel = res["split_ids"]["selection"]["arithmetic-gen:add2"]
    ev = res["split_ids"]["evaluation"]["arithmetic-gen:add2"]
    assert len(sel) == 4 and len(ev) == 4 and not set(sel) & set(ev) and res["splits_disjoint"]
    rows = list(folder.read_samples())
    assert all(len(r["item_answer_logprob"]) == 4 for r in rows)  # every condition on the 4 evaluation items
    src = res["source_answers"]  # a 3-token budget cuts random-model answers: counted, not silent
    assert src["n_scored"] + src["n_empty"] == 4 and 0 <= src["n_truncated"] <= 4


def test_default_random_draws_and_paired_test_against_a_hand_computation(tmp_path):
    """>= 5 random draws by default; the key-vs-random test pairs items: per item, key minus the mean of
    the draws, then stats.paired_bootstrap (recomputed here from the stored per-item values)."""
    from whitebox_eval import stats

    assert MaskingConfig().random_draws >= 5
    lm = tiny_lm("llama")
    cfg = MaskingConfig(model="tiny", source_task="arithmetic-gen:add1", eval_tasks=("ssd",), ks=(2,), limit=4,
                        batch_size=4, max_new_tokens=3, generate=False)
    folder = run_masking(cfg, tmp_path, run_id="p", loaded=lm)
    res = folder.load_results()
    rows = list(folder.read_samples())
    key = next(r for r in rows if r["masking"] == "key")
    rnd = [r for r in rows if r["masking"] == "random"]
    assert len(rnd) == 5
    want = stats.paired_bootstrap(np.array(key["item_answer_logprob"]),
                                  np.mean([r["item_answer_logprob"] for r in rnd], axis=0))
    got = res["paired_tests"]["key_vs_random,answer_logprob,ssd,k=2"]
    assert got["diff"] == pytest.approx(want.diff) and got["lo"] == pytest.approx(want.lo)
    assert got["n"] == 4
    draws = res["curves"]["ssd"]["random"][0]["answer_logprob,draws"]
    assert draws["draws"] == pytest.approx([r["answer_logprob"] for r in rnd])


def test_own_answer_target_is_the_unmasked_greedy_answer(tmp_path):
    """target="own" scores the model's own unmasked answer (its format); "gold" the data's answer."""
    from whitebox_eval.mui.masking import answer_targets, prepare_split
    from whitebox_eval.mui.responses import respond

    lm = tiny_lm("llama")
    cfg = MaskingConfig(model="tiny", source_task="ssd", eval_tasks=("ssd",), ks=(1,), limit=3, max_new_tokens=4)
    task = prepare_split(lm, cfg, "ssd", "evaluation")
    own = answer_targets(lm, cfg, task)
    _, responses = respond(lm, task, task.items)
    assert own["targets"] == [r.text if r.text.strip() else it.gold_response for r, it in zip(responses, task.items)]
    gold = answer_targets(lm, MaskingConfig(target="gold"), task)
    assert gold["targets"] == [it.gold_response for it in task.items]


def test_masking_config_is_checked():
    with pytest.raises(WhiteboxError, match="ks"):
        MaskingConfig(ks=(0,)).validate()
    with pytest.raises(WhiteboxError):
        MaskingConfig(score="ig").validate()
    with pytest.raises(WhiteboxError, match="target"):
        MaskingConfig(target="bare").validate()
