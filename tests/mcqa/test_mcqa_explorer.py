"""What an MCQA run keeps for the report's per-item views (mcqa/explorer.py), on a tiny llama."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.mcqa.explorer import EXPLORER_HEADS  # noqa: E402
from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa  # noqa: E402
from whitebox_eval.tasks.prompts import render_prompt  # noqa: E402
from whitebox_eval.tasks.ssd import make_ssd  # noqa: E402
from tiny_models import tiny_llama_with_bpe  # noqa: E402


@pytest.fixture(scope="module")
def tiny_mcqa_model():
    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    return tiny_llama_with_bpe(texts, 400)


@pytest.mark.parametrize("shots", [0, 2])
def test_rows_are_the_heads_attention_over_the_items_own_tokens(tiny_mcqa_model, tmp_path, shots):
    cfg = MCQAConfig(model="tiny", limit=12, min_val_items=4, batch_size=4, shots=shots,
                     methods=("baseline", "qk", "attention", "lens"))
    run = run_mcqa(cfg, tmp_path, run_id="x", loaded=tiny_mcqa_model, show_progress=False)
    heads = [tuple(h) for h in run.load_results()["explorer"]["heads"]]
    samples = list(run.read_samples())
    best = tuple(samples[0]["attention_head"]["head"])
    assert heads[0] == best and len(heads) == min(EXPLORER_HEADS, 12) and len(set(heads)) == len(heads)
    rows, offsets = run.load_array("attention_rows"), run.load_array("attention_rows_offsets")
    before = run.load_array("attention_rows_before")
    attention = run.load_array("attention")  # [items, layers, heads, options]: the main pass's scores
    assert rows.dtype == np.float32 and rows.shape == (offsets[-1], len(heads)) and len(offsets) == 13
    for i, s in enumerate(samples):
        start, tokens = s["prompt_tokens_from"], s["prompt_tokens"]
        assert (start > 0) == (shots > 0)
        text = "".join(t for t in tokens if t != "<s>")
        assert s["prompt"].endswith(text) and len(text) > 20  # the own tokens end the prompt
        mine = rows[offsets[i]:offsets[i + 1]].T  # [heads, own tokens]
        assert mine.shape[1] == len(tokens) and not np.isnan(mine).any()
        # each row and what came before it is the whole softmax
        np.testing.assert_allclose(mine.astype(np.float64).sum(-1) + before[i], 1.0, atol=1e-5)
        at = [p - start for p in s["option_token_positions"]]
        for k, (layer, head) in enumerate(heads):
            np.testing.assert_allclose(mine[k, at], attention[i, layer, head, :len(at)],
                                       rtol=1e-5, atol=1e-7)
        # the page's check: the chosen head's row peaks, among option tokens, on the option it picked
        chosen = mine[0, at]
        assert int(np.argmax(chosen)) == s["attention_head"]["pred"] or s["attention_head"]["tied"]


def test_rows_resume_from_their_parts(tiny_mcqa_model, tmp_path):
    cfg = MCQAConfig(model="tiny", limit=12, min_val_items=4, batch_size=4, methods=("baseline", "qk", "attention"))
    run = run_mcqa(cfg, tmp_path, run_id="x", loaded=tiny_mcqa_model, show_progress=False)
    rows, offsets = run.load_array("attention_rows"), run.load_array("attention_rows_offsets")
    parts = sorted((run.path / "arrays" / "parts" / "rows").glob("*.npz"))
    assert len(parts) == 3
    parts[1].unlink()
    (run.path / "results.json").unlink()
    again = run_mcqa(cfg, tmp_path, run_id="x", resume=True, loaded=tiny_mcqa_model, show_progress=False)
    np.testing.assert_array_equal(again.load_array("attention_rows"), rows)
    np.testing.assert_array_equal(again.load_array("attention_rows_offsets"), offsets)


def test_no_item_views_skips_the_rows_pass_and_changes_no_number(tiny_mcqa_model, tmp_path):
    kw = dict(model="tiny", limit=12, min_val_items=4, batch_size=4, methods=("baseline", "qk", "attention"))
    on = run_mcqa(MCQAConfig(**kw), tmp_path, run_id="on", loaded=tiny_mcqa_model, show_progress=False)
    off = run_mcqa(MCQAConfig(**kw, item_views=False), tmp_path, run_id="off", loaded=tiny_mcqa_model,
                   show_progress=False)
    assert not (off.path / "arrays" / "parts" / "rows").exists() and "explorer" not in off.load_results()
    assert not (off.path / "arrays" / "attention_rows.npy").exists()
    assert on.load_results()["headline"] == off.load_results()["headline"]
    keep = ("attention_head", "qk_head", "baseline")
    for a, b in zip(on.read_samples(), off.read_samples()):
        assert "prompt_tokens" in a and "prompt_tokens" not in b
        assert {k: a.get(k) for k in keep} == {k: b.get(k) for k in keep}
    assert "item_views" not in on.config and off.config["item_views"] is False
