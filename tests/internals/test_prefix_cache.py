"""A cached shared prefix gives the same logits and captures as the full prompt."""

from __future__ import annotations

import pytest
import torch
import transformers as tf

import tiny_models
from tiny_models import FAMILY_NAMES, tiny_loaded
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, Engine, ScaleHeads, batch_from_ids
from whitebox_eval.models.architectures import Architecture
from whitebox_eval.models.loading import LoadedModel

PREFIX = [5, 9, 17, 33, 2, 41]
SUFFIXES = [[7, 12, 3], [8, 21, 30, 11, 6]]
CAPS = [Capture("q", [[7], [8]]), Capture("k_rot", [[6, 7], [6, 10]]), Capture("attn", "last"),
        Capture("head_out", [[8], [9]]), Capture("resid", [[6, 8], [7, 10]])]


def _wide_window(family: str) -> LoadedModel:
    cfg = tiny_models._config(family, tiny_models.default_attention(family))
    cfg.sliding_window = 64
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(cfg).eval()
    return LoadedModel(model, tiny_models._Tok(), Architecture.of(model), family, "random")


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_prefix_cache_matches_the_full_prompt(family):
    lm = _wide_window(family) if family in ("gemma2", "gemma3") else tiny_loaded(family)
    engine = Engine(lm)
    # edits act on the tokens a pass computes: the prefix stays as cached, so edit suffix tokens only
    edit = [ScaleHeads(1, [2], 0.0, positions=[[7, 8], [9, 10]])]
    full = engine.run(batch_from_ids([PREFIX + s for s in SUFFIXES]), CAPS, edit)
    cached = engine.run(batch_from_ids(SUFFIXES), CAPS, edit, prefix=engine.prefix(PREFIX))
    torch.testing.assert_close(cached.logits, full.logits, atol=1e-5, rtol=1e-5)
    for key in full.captures:  # attention rows come back in example coordinates, prefix keys first
        torch.testing.assert_close(cached[key], full[key], atol=1e-5, rtol=1e-5, msg=key)


def test_prefix_cache_refuses_positions_inside_the_prefix_and_binding_windows():
    engine = Engine(tiny_loaded("llama"))
    with pytest.raises(WhiteboxError, match="inside the cached prefix"):
        engine.run(batch_from_ids(SUFFIXES), [Capture("q", [[2], [2]])], prefix=engine.prefix(PREFIX))
    gemma = Engine(tiny_loaded("gemma3"))  # its tiny sliding window (4) binds
    with pytest.raises(WhiteboxError, match="sliding window"):
        gemma.run(batch_from_ids(SUFFIXES), prefix=gemma.prefix(PREFIX))
