"""``span --edit``: every evaluation pass (teacher-forced, generation, reinforcement)
under the edits, recorded in config.yaml; a bad edit writes nothing."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.span.study import SpanConfig, run_span


def _cfg(**kw) -> SpanConfig:
    base = dict(model="tiny", task="string_reversal", split="ood", limit=3, ood_params={"length": (4, 5)},
                instruction="R:", generation=True, rollout=False, heatmaps=0, reinforce=True, key_samples=2,
                heads=(1,), values=(0.5,), random_draws=2, select_limit=2, reinforce_generation=True, batch_size=3)
    return SpanConfig(**{**base, **kw})


def _content(folder):
    return [{k: v for k, v in s.items() if k not in ("id",)} for s in folder.read_samples()]


def test_a_steered_span_study_records_its_edit_and_changes_every_stage(make_span_lm, tmp_path):
    lm = make_span_lm(seed=3)
    np.save(tmp_path / "v.npy", np.linspace(-3, 3, lm.arch.d_model).astype(np.float32))
    spec = f"steer:resid:0:{tmp_path / 'v.npy'}*2"
    plain = run_span(_cfg(), tmp_path, run_id="plain", loaded=lm, show_progress=False)
    edited = run_span(_cfg(edits=(spec,)), tmp_path, run_id="steered", loaded=lm, show_progress=False)
    assert yaml.safe_load((edited.path / "config.yaml").read_text())["edits"] == [spec]
    assert "edits" not in yaml.safe_load((plain.path / "config.yaml").read_text())
    a, b = _content(plain), _content(edited)
    assert len(a) == len(b)
    stages = {s["stage"] for s in a}
    assert len(stages) > 2  # base, selection, reinforcement and its controls
    changed = {x["stage"] for x, y in zip(a, b) if x != y}
    assert changed == stages


def test_bad_edits_write_nothing(make_span_lm, tmp_path):
    lm = make_span_lm()
    with pytest.raises(WhiteboxError, match="layer 40 is outside"):
        run_span(_cfg(edits=("neurons:40:1",)), tmp_path, run_id="x", loaded=lm, show_progress=False)
    with pytest.raises(WhiteboxError, match="leave out @last"):
        run_span(_cfg(edits=("neurons:0:1@last",)), tmp_path, run_id="x", loaded=lm, show_progress=False)
    assert not (tmp_path / "x").exists()


def test_an_attention_edit_past_every_sequence_is_refused_and_a_partial_one_recorded(make_span_lm, tmp_path):
    """Coverage: counted on every split's sequences before the run folder."""
    from whitebox_eval.span.study import make_examples, tokenize_all

    lm = make_span_lm(seed=3)
    cfg = _cfg(reinforce=False, reinforce_generation=False)
    lengths = [len(t.input_ids) for s in cfg.splits
               for t in tokenize_all(cfg, lm.tokenizer, make_examples(cfg, s, cfg.n_per_split))]
    with pytest.raises(WhiteboxError, match=f"fall in none of the {len(lengths)} prompts"):
        run_span(_cfg(reinforce=False, reinforce_generation=False, edits=(f"attn:0.0:{max(lengths)}>first:add=0.5",)), tmp_path, run_id="none",
                 loaded=lm, show_progress=False)
    assert not (tmp_path / "none").exists()
    spec = f"attn:0.0:{min(lengths)}>first:add=0.5"  # past the shortest sequences only
    folder = run_span(_cfg(reinforce=False, reinforce_generation=False, edits=(spec,)), tmp_path, run_id="some", loaded=lm, show_progress=False)
    got = yaml.safe_load((folder.path / "config.yaml").read_text()).get("edit_coverage")
    assert got == {spec: {"covered": sum(n > min(lengths) for n in lengths), "items": len(lengths)}}
    assert min(lengths) < max(lengths)  # the lengths 4 and 5 make the split
