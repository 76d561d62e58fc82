"""``--save-activations ...:options`` keeps each option's label token (``A``,
``B``...), not the representative token the head scores read (the line's end by default), and
``resid:L`` is transformers' ``hidden_states[L + 1]``; the last block's is the residual before
the final norm (transformers' last entry has the norm applied)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.mcqa.study import MCQAConfig, load_items, run_mcqa  # noqa: E402
from whitebox_eval.tasks.prompt_tokens import tokenize_prompt  # noqa: E402
from whitebox_eval.tasks.prompts import render_prompt  # noqa: E402
from whitebox_eval.tasks.ssd import make_ssd  # noqa: E402
from tiny_models import tiny_llama_with_bpe  # noqa: E402


@pytest.fixture(scope="module")
def lm():
    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    return tiny_llama_with_bpe(texts, 400)


@pytest.mark.parametrize("representative", ["eol", "content_end"])
def test_options_are_the_label_tokens_whatever_the_representative(lm, tmp_path, representative):
    from safetensors.numpy import load_file

    cfg = MCQAConfig(model="tiny", limit=6, min_val_items=2, batch_size=3, methods=("baseline",), item_views=False,
                     representative=representative, save_activations=("resid:all:options",))
    folder = run_mcqa(cfg, tmp_path, run_id=representative, loaded=lm, show_progress=False)
    saved = load_file(str(folder.path / "activations" / "resid-options.safetensors"))
    items = load_items(cfg)[:cfg.limit]
    for it in items:
        t = tokenize_prompt(lm.tokenizer, render_prompt(it, labels=cfg.labels, uncertainty=cfg.uncertainty),
                            representative)
        # the label tokens are the labels' text, and not the representative's
        assert [lm.tokenizer.decode([t.input_ids[p]]).strip() for p in t.label_positions] == list("ABCDEFGH")[:len(t.label_positions)]
        assert t.label_positions != t.option_positions
        ids = torch.tensor([t.input_ids])
        with torch.no_grad():
            out = lm.model(input_ids=ids, output_hidden_states=True)
        hidden = out.hidden_states
        n_layers = len(hidden) - 1
        want = np.stack([hidden[layer + 1][0, t.label_positions].numpy() for layer in range(n_layers - 1)])
        got = saved[str(it.id)]
        assert got.shape == (n_layers, len(t.label_positions), hidden[0].shape[-1])
        # resid:L is hidden_states[L + 1] (an unbatched forward against the study's padded batches:
        # float32 sums in another order, hence a tolerance, not equality)
        np.testing.assert_allclose(got[:-1], want, atol=1e-5, rtol=1e-5)
        # the last block's resid is before the final norm: norm(resid) is transformers' last entry
        normed = lm.model.model.norm(torch.from_numpy(got[-1])).detach().numpy()
        np.testing.assert_allclose(normed, hidden[-1][0, t.label_positions].numpy(), atol=1e-5, rtol=1e-5)
        assert not np.allclose(got[-1], hidden[-1][0, t.label_positions].numpy(), atol=1e-3)


def test_resid_pre_is_the_hidden_state_a_block_receives(lm):
    from whitebox_eval.internals import Capture, Engine, batch_from_ids

    it = make_ssd(1, 4, seed=5)[0]
    ids = tokenize_prompt(lm.tokenizer, render_prompt(it)).input_ids
    with torch.no_grad():
        hidden = lm.model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
        tr = Engine(lm).run(batch_from_ids([ids], pad_id=lm.pad_id), [Capture("resid_pre", "all")])
    pre = tr["resid_pre"][0]  # [layers, positions, width]
    for layer in range(pre.shape[0]):
        np.testing.assert_allclose(pre[layer].numpy(), hidden[layer][0].numpy(), atol=1e-5, rtol=1e-5)
