"""``mui --edit``: the responses and every scoring pass under the edits (an SAE feature clamp
here), recorded in config.yaml; a bad edit is one line before the run folder."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import save_tiny_sae, tiny_lm  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.mui.finished import load_key_sets  # noqa: E402
from whitebox_eval.mui.study import MUIConfig, run_mui  # noqa: E402


def _cfg(**kw) -> MUIConfig:
    return MUIConfig(**{**dict(model="tiny", task="arithmetic-gen:add1", limit=3, batch_size=3, max_new_tokens=3,
                               threshold="topk", threshold_value=2), **kw})


def test_an_sae_clamped_mui_study_records_its_edit_and_moves_the_key_neurons(tmp_path):
    lm = tiny_lm("llama")
    save_tiny_sae(lm, tmp_path / "sae")
    spec = f"sae:3,9=40:{tmp_path / 'sae'}"
    plain = run_mui(_cfg(), tmp_path, run_id="plain", loaded=lm, show_progress=False)
    edited = run_mui(_cfg(edits=(spec,)), tmp_path, run_id="clamped", loaded=lm, show_progress=False)
    assert yaml.safe_load((edited.path / "config.yaml").read_text())["edits"] == [spec]
    assert "edits" not in yaml.safe_load((plain.path / "config.yaml").read_text())
    a, b = load_key_sets(plain), load_key_sets(edited)
    assert any(not np.array_equal(a.mask(i), b.mask(i)) for i in range(len(a)))


def test_bad_edits_are_refused_before_the_run_folder(tmp_path):
    lm = tiny_lm("llama")
    with pytest.raises(WhiteboxError, match="neuron 999 is outside"):
        run_mui(_cfg(edits=("neurons:0:999",)), tmp_path, run_id="x", loaded=lm, show_progress=False)
    with pytest.raises(WhiteboxError, match="leave out @last"):
        run_mui(_cfg(edits=("ablate:0.0@last",)), tmp_path, run_id="x", loaded=lm, show_progress=False)
    with pytest.raises(WhiteboxError, match="steer needs POINT:LAYER:FILE"):
        _cfg(edits=("steer:resid",))
    assert not (tmp_path / "x").exists()


def test_an_attention_edit_is_counted_on_the_prompts_and_their_budget(tmp_path):
    """Coverage: a position past every prompt and its 3-token budget writes nothing; one
    that only the longest sequences reach is recorded in config.yaml."""
    from whitebox_eval.mui.responses import prepare_task
    from whitebox_eval.mui.study import reach

    lm = tiny_lm("llama")
    task = prepare_task(_cfg(), lm.tokenizer)
    lengths = reach(lm.tokenizer, task)
    assert lengths == [len(task.prompt(it, lm.tokenizer)) + 3 for it in task.items]
    with pytest.raises(WhiteboxError, match="fall in none of the 3 prompts .*each response may generate"):
        run_mui(_cfg(edits=(f"attn:0.0:{max(lengths)}>first:force",)), tmp_path, run_id="x", loaded=lm,
                show_progress=False)
    assert not (tmp_path / "x").exists()
    spec = f"attn:0.0:{max(lengths) - 1}>first:force"
    folder = run_mui(_cfg(edits=(spec,)), tmp_path, run_id="some", loaded=lm, show_progress=False)
    got = yaml.safe_load((folder.path / "config.yaml").read_text()).get("edit_coverage")
    assert got == ({spec: {"covered": lengths.count(max(lengths)), "items": 3}} if min(lengths) < max(lengths) else None)
