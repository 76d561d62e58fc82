"""``mcqa --edit SPEC``: the spec language, its one-line refusals, and a study run under an
edit checked against the model with the edit written into its weights."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals.edit_specs import build_edits, parse_edit  # noqa: E402
from whitebox_eval.internals.requests import MaskNeurons, ScaleHeads  # noqa: E402
from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa  # noqa: E402
from whitebox_eval.tasks.prompt_tokens import tokenize_prompt  # noqa: E402
from whitebox_eval.tasks.prompts import render_prompt  # noqa: E402
from whitebox_eval.tasks.ssd import make_ssd  # noqa: E402
from tiny_models import tiny_llama_with_bpe  # noqa: E402


@pytest.fixture(scope="module")
def tiny_mcqa_model():
    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    return tiny_llama_with_bpe(texts, 400)


def test_specs_read_into_engine_edits():
    assert build_edits(["ablate:1.0,L2H3,2.1"], 3, 4, 48) == [ScaleHeads(1, (0,), 0.0, None),
                                                             ScaleHeads(2, (3, 1), 0.0, None)]
    assert build_edits(["scale:l0h2=0.5@last"], 3, 4, 48) == [ScaleHeads(0, (2,), 0.5, "last")]
    assert build_edits(["neurons:2:5,7=1.5", "neurons:0:1"], 3, 4, 48) == [MaskNeurons(2, (5, 7), 1.5, None),
                                                                          MaskNeurons(0, (1,), 0.0, None)]


@pytest.mark.parametrize("spec, says", [
    ("zero:1.0", "unknown edit 'zero'"),
    ("ablate", "unknown edit"),
    ("ablate:1.0=2", "ablate takes no value"),
    ("scale:1.0", "scale needs =FACTOR"),
    ("scale:1.0=x", "'x' is not a number"),
    ("ablate:14", "cannot read head '14'"),
    ("neurons:5", "neurons needs LAYER:I,J"),
    ("neurons:5:a,b", "whole numbers"),
])
def test_malformed_specs_are_one_line(spec, says):
    with pytest.raises(WhiteboxError, match=says):
        parse_edit(spec)


@pytest.mark.parametrize("spec, says", [
    ("ablate:3.0", r"head 3\.0 is outside this model \(3 layers x 4 heads"),
    ("ablate:L0H4", "head 0.4 is outside"),
    ("neurons:3:1", "layer 3 is outside"),
    ("neurons:1:48", "neuron 48 is outside layer 1's 48 MLP neurons"),
])
def test_out_of_range_is_one_line(spec, says):
    with pytest.raises(WhiteboxError, match=says):
        build_edits([spec], 3, 4, 48)


def test_an_ablated_study_equals_the_model_with_those_heads_zeroed_in_its_weights(tiny_mcqa_model, tmp_path):
    lm = tiny_mcqa_model
    cfg = MCQAConfig(model="tiny", limit=12, min_val_items=4, batch_size=4, shots=2, methods=("baseline", "qk"),
                     item_views=False, edits=("ablate:1.0,L2H3",))
    folder = run_mcqa(cfg, tmp_path, run_id="edited", loaded=lm, show_progress=False)
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["edits"] == ["ablate:1.0,L2H3"]
    # reference: a copy of the model whose o_proj columns of heads 1.0 and 2.3 are zero
    ref = copy.deepcopy(lm.model)
    d = 12  # head_dim of the tiny llama
    with torch.no_grad():
        ref.model.layers[1].self_attn.o_proj.weight[:, 0:d] = 0
        ref.model.layers[2].self_attn.o_proj.weight[:, 3 * d:4 * d] = 0
    from whitebox_eval.mcqa.study import load_items
    from whitebox_eval.tasks.demos import plan_demonstrations

    samples = {s["id"]: s for s in folder.read_samples()}
    items = load_items(cfg)
    demos, items = plan_demonstrations(cfg.spec, cfg.shots, items, cfg.seed, cfg.on_bad_row, cfg.demos_from)
    checked = 0
    for it in items[:cfg.limit]:
        t = tokenize_prompt(lm.tokenizer, render_prompt(it, demos=demos.for_item(it), labels=cfg.labels,
                                                        uncertainty=cfg.uncertainty))
        with torch.no_grad():
            last = ref(input_ids=torch.tensor([t.input_ids])).logits[0, -1]
        want = last[t.answer_ids].numpy()
        got = np.array(samples[it.id]["letter_logits"])
        np.testing.assert_allclose(got, want, atol=2e-5)  # samples hold 5 decimals
        checked += 1
    assert checked == 12
    plain = run_mcqa(MCQAConfig(model="tiny", limit=12, min_val_items=4, batch_size=4, shots=2,
                                methods=("baseline", "qk"), item_views=False), tmp_path, run_id="plain", loaded=lm,
                     show_progress=False)
    assert "edits" not in yaml.safe_load((plain.path / "config.yaml").read_text())
    before = [json.loads(x)["letter_logits"] for x in (plain.path / "samples.jsonl").read_text().splitlines()]
    after = [s["letter_logits"] for s in folder.read_samples()]
    assert before != after  # the edit changed the letters


def test_cli_refuses_bad_edits_before_writing_anything(tmp_path, cli):
    out = tmp_path / "runs"
    code, _, err = cli(["mcqa", "--edit", "ablate:99.0", "--limit", "5", "--output", str(out)])
    assert code == 2 and "head 99.0 is outside this model (30 layers x 9 heads, from 0)" in err, err
    code, _, err = cli(["mcqa", "--edit", "attn:99.0:last>first:force", "--limit", "5", "--output", str(out)])
    assert code == 2 and "head 99.0 is outside this model" in err, err
    code, _, err = cli(["span", "--edit", "attn:0.0:last>first:add=1", "--output", str(out)])
    assert code == 2 and "name positions that stay" in err, err
    code, _, err = cli(["mcqa", "--edit", "zap:1", "--output", str(out)])
    assert code == 2 and "unknown edit 'zap'" in err
    code, _, err = cli(["mcqa", "--edit", "ablate:1.0@last", "--methods", "baseline,cloze", "--output", str(out)])
    assert code == 2 and "one packed row" in err, err
    assert not out.exists() or not any(out.iterdir())


def test_a_study_under_an_attention_rule_equals_its_cells_written_out(tiny_mcqa_model, tmp_path):
    """``--edit attn:1.0,2.3:last>first:force``: every letter logit equals a pass of one prompt under
    the same edit with its one cell (last query, first key) written out by hand."""
    from whitebox_eval.internals import Engine, batch_from_ids
    from whitebox_eval.internals.requests import EditAttention, cells_from_pairs
    from whitebox_eval.mcqa.study import load_items
    from whitebox_eval.tasks.demos import plan_demonstrations

    lm = tiny_mcqa_model
    spec = "attn:1.0,2.3:last>first:force"
    cfg = MCQAConfig(model="tiny", limit=8, min_val_items=4, batch_size=3, shots=1, methods=("baseline",),
                     item_views=False, edits=(spec,))
    folder = run_mcqa(cfg, tmp_path, run_id="attn", loaded=lm, show_progress=False)
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["edits"] == [spec]
    samples = {s["id"]: s for s in folder.read_samples()}
    items = load_items(cfg)
    demos, items = plan_demonstrations(cfg.spec, cfg.shots, items, cfg.seed, cfg.on_bad_row, cfg.demos_from)
    engine, moved = Engine(lm), 0
    for it in items[:cfg.limit]:
        t = tokenize_prompt(lm.tokenizer, render_prompt(it, demos=demos.for_item(it), labels=cfg.labels,
                                                        uncertainty=cfg.uncertainty))
        n = len(t.input_ids)
        cells = cells_from_pairs(1, n, [[(n - 1, 0)]])
        edits = [EditAttention(1, (0,), cells, "force"), EditAttention(2, (3,), cells, "force")]
        with torch.no_grad():
            want = engine.run(batch_from_ids([t.input_ids]), edits=edits).logits[0, t.answer_ids].numpy()
            plain = engine.run(batch_from_ids([t.input_ids])).logits[0, t.answer_ids].numpy()
        np.testing.assert_allclose(samples[it.id]["letter_logits"], want, atol=2e-5)  # samples hold 5 decimals
        moved += not np.allclose(want, plain, atol=1e-4)
    assert moved > 0  # the rule changed some letters


def test_cloze_under_an_edit_equals_the_model_with_the_edit_in_its_weights(tiny_mcqa_model, tmp_path):
    """``--methods cloze --edit ablate:...``: every choice's log-likelihood (packed rows, no cached
    prefix) equals the unedited cloze run of a copy whose o_proj columns of those heads are zero;
    position-bound edits are refused in one line."""
    lm = tiny_mcqa_model
    base = dict(model="tiny", limit=10, batch_size=4, shots=2, methods=("cloze",), item_views=False)
    edited = run_mcqa(MCQAConfig(**base, edits=("ablate:1.0,L2H3",)), tmp_path, run_id="e", loaded=lm,
                      show_progress=False)
    ref = copy.deepcopy(lm.model)
    d = 12  # head_dim of the tiny llama
    with torch.no_grad():
        ref.model.layers[1].self_attn.o_proj.weight[:, 0:d] = 0
        ref.model.layers[2].self_attn.o_proj.weight[:, 3 * d:4 * d] = 0
    from dataclasses import replace

    from whitebox_eval.models.architectures import Architecture

    zeroed = replace(lm, model=ref, arch=Architecture.of(ref))  # the engine reads the copy's own modules
    plain = run_mcqa(MCQAConfig(**base), tmp_path, run_id="w", loaded=zeroed, show_progress=False)
    unedited = run_mcqa(MCQAConfig(**base), tmp_path, run_id="u", loaded=lm, show_progress=False)
    got = [s["cloze_loglik"] for s in edited.read_samples()]
    want = [s["cloze_loglik"] for s in plain.read_samples()]
    assert len(got) == 10
    # sums of a few float32 log-probabilities from passes of other shapes (packed vs prefix-cached)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-4)
    assert got != [s["cloze_loglik"] for s in unedited.read_samples()]  # the edit changed them
    for bad in ("ablate:1.0@last", "attn:1.0:all>first:force"):
        with pytest.raises(WhiteboxError, match="one packed row"):
            run_mcqa(MCQAConfig(**base, edits=(bad,)), tmp_path, run_id="bad", loaded=lm, show_progress=False)
    assert not (tmp_path / "bad").exists()
