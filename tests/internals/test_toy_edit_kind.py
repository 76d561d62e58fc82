"""A new edit kind is one file: this one declares a toy kind (the MLP's output of a layer times a
factor, ``--edit mlpscale:LAYER=FACTOR``), registers it through the plug-in entry
(:func:`whitebox_eval.internals.edit_registry.register`) and uses it from a study's ``--edit`` with
no other file naming it; its effect is checked against the model with that factor written into the
layer's down projection, and its op-count case is held to the engine's budget."""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import edit_registry  # noqa: E402
from whitebox_eval.internals.edit_kind import EditKind, EditSpec, ModelSizes, check_layer, every_layer, number  # noqa: E402
from whitebox_eval.internals.edit_specs import parse_edit  # noqa: E402
from whitebox_eval.tasks.prompt_tokens import tokenize_prompt  # noqa: E402
from whitebox_eval.tasks.prompts import render_prompt  # noqa: E402
from whitebox_eval.tasks.ssd import make_ssd  # noqa: E402
from tiny_models import tiny_llama_with_bpe  # noqa: E402


# ---- the kind, declared once ------------------------------------------------------------------

@dataclass(frozen=True)
class ScaleMlpOut:
    """What the MLP adds to the residual in ``layer``, times ``factor``."""

    layer: int
    factor: float


def _plan(plan, e: ScaleMlpOut, layer: int) -> None:
    factor = float(e.factor)
    plan.site("mlp_out", layer).writes.append(lambda v: v.mul_(factor))


def _parse(text: str, rest: str, last_only: bool) -> EditSpec:
    layer_text, eq, factor = rest.partition("=")
    if not eq or not layer_text.isdecimal():
        raise WhiteboxError(f"--edit {text}: mlpscale needs LAYER=FACTOR (mlpscale:1=0.5)")
    return EditSpec(text, "mlpscale", layer=int(layer_text), value=number(factor, text), last_only=last_only)


def _build(spec: EditSpec, sizes: ModelSizes) -> list:
    return [ScaleMlpOut(check_layer(spec, spec.layer, sizes), spec.value)]


KIND = EditKind(ScaleMlpOut, _plan, {"mlpscale": _parse}, _build, "mlpscale:LAYER=FACTOR",
                lambda: {"": every_layer(lambda lm, eng, batch, opts, layer: ScaleMlpOut(layer, 0.5))})


# ---- its test ------------------------------------------------------------------------------------

@pytest.fixture
def toy_kind(monkeypatch):
    monkeypatch.setattr(edit_registry, "KINDS", dict(edit_registry.KINDS))
    return edit_registry.register(KIND)


@pytest.fixture(scope="module")
def tiny_mcqa_model():
    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    return tiny_llama_with_bpe(texts, 400)


def test_the_spec_is_unknown_until_registered_then_read_and_checked(monkeypatch):
    monkeypatch.setattr(edit_registry, "KINDS", dict(edit_registry.KINDS))
    with pytest.raises(WhiteboxError, match="unknown edit 'mlpscale'"):
        parse_edit("mlpscale:1=0.5")
    edit_registry.register(KIND)
    assert parse_edit("mlpscale:1=0.5").value == 0.5
    with pytest.raises(WhiteboxError, match="mlpscale:LAYER=FACTOR"):  # the usage line names it
        parse_edit("zap:1")
    with pytest.raises(WhiteboxError, match="not a finite number"):
        parse_edit("mlpscale:1=inf")
    with pytest.raises(WhiteboxError, match="registered already"):
        edit_registry.register(KIND)
    from whitebox_eval.internals.edit_specs import build_edits

    with pytest.raises(WhiteboxError, match="layer 3 is outside this model"):
        build_edits(["mlpscale:3=2"], 3, 4, 48)


def test_a_study_under_the_toy_edit_equals_the_factor_in_the_weights(toy_kind, tiny_mcqa_model, tmp_path):
    from whitebox_eval.mcqa.study import MCQAConfig, load_items, run_mcqa
    from whitebox_eval.tasks.demos import plan_demonstrations

    lm = tiny_mcqa_model
    cfg = MCQAConfig(model="tiny", limit=8, min_val_items=4, batch_size=3, shots=1, methods=("baseline",),
                     item_views=False, edits=("mlpscale:1=0.25",))
    folder = run_mcqa(cfg, tmp_path, run_id="toy", loaded=lm, show_progress=False)
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["edits"] == ["mlpscale:1=0.25"]
    ref = copy.deepcopy(lm.model)  # by hand: layer 1's down projection times 0.25 (llama's MLP has no bias)
    with torch.no_grad():
        ref.model.layers[1].mlp.down_proj.weight.mul_(0.25)
    samples = {s["id"]: s for s in folder.read_samples()}
    items = load_items(cfg)
    demos, items = plan_demonstrations(cfg.spec, cfg.shots, items, cfg.seed, cfg.on_bad_row, cfg.demos_from)
    moved = 0
    for it in items[:cfg.limit]:
        t = tokenize_prompt(lm.tokenizer, render_prompt(it, demos=demos.for_item(it), labels=cfg.labels,
                                                        uncertainty=cfg.uncertainty))
        with torch.no_grad():
            want = ref(input_ids=torch.tensor([t.input_ids])).logits[0, -1][t.answer_ids].numpy()
            plain = lm.model(input_ids=torch.tensor([t.input_ids])).logits[0, -1][t.answer_ids].numpy()
        got = np.array(samples[it.id]["letter_logits"])
        np.testing.assert_allclose(got, want, atol=2e-5)  # samples hold 5 decimals
        moved += not np.allclose(got, plain, atol=1e-4)
    assert moved == cfg.limit  # the edit changed every item's letters


def test_its_op_count_case_is_held_to_the_budget(toy_kind):
    import op_counts as oc

    scenarios = oc.edit_scenarios()
    assert "ScaleMlpOut" in scenarios
    extra = oc.profile("llama", scenarios["ScaleMlpOut"], keep=0).minus(oc.profile("llama", oc.bare))
    assert max(extra.per_layer.values()) <= oc.BUDGET_PER_LAYER
    assert extra.per_pass[2] == extra.per_pass[8] <= oc.BUDGET_PER_PASS
