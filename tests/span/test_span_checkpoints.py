"""Span's fine-tuning keeps its step checkpoints through the shared module (models/checkpoints.py):
listed by ``list_checkpoints``, each a folder that loads as a model with the training's weights at
that step and records its producer; a killed save's leftovers are ignored and replaced."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models import load_model
from whitebox_eval.models.checkpoints import CHECKPOINTS, list_checkpoints
from whitebox_eval.models.training import WEIGHTS_FILE, trained_model_record, weights_file_sha256
from whitebox_eval.span.finetune import FinetuneConfig, finetune
from whitebox_eval.span.study import SpanConfig, run_span
from whitebox_eval.span.tasks import generate
from whitebox_eval.span.tokenization import tokenize_example

# 8 examples in batches of 4 for 3 epochs: 6 steps; 3 checkpoints spread over them: steps 2, 4, 6
CFG = dict(learning_rate=3e-3, weight_decay=0.0, batch_size=4, epochs=3)


def _toks(tok, n=8):
    return [tokenize_example(e, tok, instruction="R:", append_eos=True)
            for e in generate("string_reversal", n, "id", seed=2, length=(2, 5))]


def _weights(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _trained(lm, folder, **kw):
    """Fine-tune keeping 3 checkpoints; the weights after every step (0: before training)."""
    seen = {0: _weights(lm.model)}
    result = finetune(lm, _toks(lm.tokenizer), FinetuneConfig(**CFG, keep_checkpoints=3), checkpoint_dir=folder,
                      run_id="span-run", on_step=lambda step, loss: seen.__setitem__(step, _weights(lm.model)), **kw)
    return result, seen


def test_step_checkpoints_list_and_load_as_the_weights_at_their_step(make_span_lm, tmp_path):
    lm = make_span_lm(seed=1)
    result, seen = _trained(lm, tmp_path / "train")
    kept = list_checkpoints(tmp_path / "train")
    assert [c["step"] for c in kept] == [0, 2, 4, 6] and result.steps == 6
    assert result.checkpoint == tmp_path / "train" / "final"  # the final weights where consumers read them
    for c in kept:
        assert c["run_id"] == "span-run" and c["sha256"] == weights_file_sha256(c["path"])
        loaded = load_model(c["path"])
        got = dict(loaded.model.named_parameters())
        assert got.keys() == seen[c["step"]].keys()
        for name, want in seen[c["step"]].items():
            torch.testing.assert_close(got[name].detach(), want, rtol=0, atol=0, msg=name)
        # a study given the step as --model records where its weights came from
        assert trained_model_record(c["path"])["model_weights"] == {
            "producer": "span-run", "sha256": c["sha256"], "step": c["step"]}
    assert any(not torch.equal(seen[0][n], seen[6][n]) for n in seen[0])  # the steps differ: training moved
    final = load_model(str(result.checkpoint))
    for name, p in final.model.named_parameters():
        torch.testing.assert_close(p.detach(), seen[6][name], rtol=0, atol=0, msg=name)
    # keeping checkpoints changes no weight: the same training without them ends where this one did
    plain = make_span_lm(seed=1)
    finetune(plain, _toks(plain.tokenizer), FinetuneConfig(**CFG))
    for name, p in plain.model.named_parameters():
        torch.testing.assert_close(p.detach(), seen[6][name], rtol=0, atol=0, msg=name)


def test_a_killed_saves_leftovers_are_ignored_and_replaced(make_span_lm, tmp_path):
    root = tmp_path / "train" / CHECKPOINTS
    partial, unrenamed = root / ".step-000002.partial", root / "step-000004"
    partial.mkdir(parents=True)
    (partial / WEIGHTS_FILE).write_bytes(b"half a file")
    unrenamed.mkdir()  # killed between removing an old folder and the rename: weights, no trained.json
    (unrenamed / WEIGHTS_FILE).write_bytes(b"stale")
    with pytest.raises(WhiteboxError, match="keeps no checkpoints"):
        list_checkpoints(tmp_path / "train")  # neither counts as a checkpoint
    _, seen = _trained(make_span_lm(seed=1), tmp_path / "train")
    assert sorted(p.name for p in root.iterdir()) == ["step-000000", "step-000002", "step-000004", "step-000006"]
    step4 = next(c for c in list_checkpoints(tmp_path / "train") if c["step"] == 4)
    got = dict(load_model(step4["path"]).model.named_parameters())
    for name, want in seen[4].items():
        torch.testing.assert_close(got[name].detach(), want, rtol=0, atol=0, msg=name)


def test_keep_checkpoints_is_checked_and_left_out_when_off(make_span_lm):
    lm = make_span_lm()
    with pytest.raises(WhiteboxError, match="checkpoint_dir"):
        finetune(lm, _toks(lm.tokenizer, 4), FinetuneConfig(keep_checkpoints=2))
    with pytest.raises(WhiteboxError, match="keep_checkpoints must be >= 0"):
        SpanConfig(finetune_examples=8, finetune={"keep_checkpoints": -1}).check()
    with pytest.raises(WhiteboxError, match="--finetune N"):
        SpanConfig(finetune={"keep_checkpoints": 2}).check()
    assert "keep_checkpoints" not in SpanConfig().to_dict()["finetune"]
    assert SpanConfig(finetune={"keep_checkpoints": 2}).to_dict()["finetune"]["keep_checkpoints"] == 2


def test_a_span_run_names_its_trainings_checkpoints(make_span_lm, tmp_path):
    cfg = SpanConfig(model="tiny", task="string_reversal", split="id", limit=2, id_params={"length": (2, 4)},
                     instruction="R:", finetune_examples=8, rollout=False, heatmaps=0, batch_size=4,
                     finetune=FinetuneConfig(learning_rate=1e-3, batch_size=4, keep_checkpoints=2))
    folder = run_span(cfg, tmp_path, run_id="kept", loaded=make_span_lm(seed=1), show_progress=False)
    record = json.loads((folder.path / "finetune.json").read_text())
    kept = list_checkpoints(record["checkpoints"])
    assert [c["step"] for c in kept] == [0, 1, 2] and {c["run_id"] for c in kept} == {"kept"}
    assert weights_file_sha256(kept[-1]["path"]) == weights_file_sha256(record["weights"])  # the last is the final
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["finetune"]["keep_checkpoints"] == 2
    # a step as --model of another span run: its config.yaml records the producer and the step
    used = run_span(SpanConfig(model=kept[1]["path"], task="string_reversal", split="id", limit=2,
                               id_params={"length": (2, 4)}, instruction="R:", rollout=False, heatmaps=0,
                               batch_size=4), tmp_path, run_id="used", show_progress=False)
    assert yaml.safe_load((used.path / "config.yaml").read_text())["model_weights"] == {
        "producer": "kept", "sha256": kept[1]["sha256"], "step": 1}
