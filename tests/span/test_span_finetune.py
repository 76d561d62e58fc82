"""Fine-tuning loop (003 App. E) on a tiny model: batches, loss, learning, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from whitebox_eval.span.finetune import (
    FinetuneConfig,
    finetune,
    target_loss,
    training_batch,
)
from whitebox_eval.span.tasks import generate
from whitebox_eval.span.examples import string_reversal_example
from whitebox_eval.span.tokenization import tokenize_example
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.training import load_weights


def _toks(tok, n=8):
    return [tokenize_example(e, tok, instruction="R:", append_eos=True)
            for e in generate("string_reversal", n, "id", seed=2, length=(2, 5))]


def test_training_batch_is_right_padded_with_target_rows(char_tokenizer):
    a = tokenize_example(string_reversal_example("abc"), char_tokenizer)
    b = tokenize_example(string_reversal_example("x"), char_tokenizer)
    tb = training_batch([a, b], pad_id=0)
    assert tb.input_ids.shape == (2, 8)
    assert tb.input_ids[1, :4].tolist() == b.input_ids.tolist()
    assert tb.attention_mask[1].tolist() == [1] * 4 + [0] * 4
    assert tb.rows[0].tolist() == [4, 5, 6] and tb.targets[0].tolist() == a.target_ids.tolist()
    assert tb.weights[1].tolist() == [1.0, 0.0, 0.0]


def test_target_loss_is_cross_entropy_on_target_tokens_only(make_span_lm):
    lm = make_span_lm()
    toks = _toks(lm.tokenizer, 3)
    with torch.no_grad():
        loss = target_loss(lm.model, training_batch(toks, pad_id=0))
    nll = []
    for t in toks:  # one example at a time, full logits
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([t.input_ids.tolist()])).logits[0]
        logp = torch.log_softmax(logits.double(), -1)
        nll += [-float(logp[p, g]) for p, g in zip(t.prediction_positions, t.target_ids)]
    assert float(loss) == pytest.approx(np.mean(nll), rel=1e-4)


def test_finetune_reduces_loss_and_checkpoints_round_trip(make_span_lm, tmp_path):
    lm = make_span_lm(seed=1)
    toks = _toks(lm.tokenizer, 8)
    batch = training_batch(toks, pad_id=0)
    with torch.no_grad():
        before = float(target_loss(lm.model, batch))
    cfg = FinetuneConfig(learning_rate=3e-3, weight_decay=0.0, batch_size=4, epochs=6)
    steps = []
    result = finetune(lm, toks, cfg, checkpoint_dir=tmp_path, on_step=lambda s, l: steps.append(s))
    with torch.no_grad():
        after = float(target_loss(lm.model, batch))
    assert result.steps == 12 == len(result.losses) and steps == list(range(1, 13))
    assert after < 0.7 * before
    assert not lm.model.training
    # the checkpoint restores exactly these weights into a fresh model
    fresh = make_span_lm(seed=5)
    load_weights(fresh.model, result.checkpoint)
    for (n, p), (_, q) in zip(lm.model.named_parameters(), fresh.model.named_parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=n)
    assert fresh.model.get_output_embeddings().weight.data_ptr() == \
        fresh.model.get_input_embeddings().weight.data_ptr()


def test_max_steps_and_bad_config(make_span_lm, tmp_path):
    lm = make_span_lm()
    result = finetune(lm, _toks(lm.tokenizer, 8), FinetuneConfig(max_steps=1, batch_size=2))
    assert result.steps == 1 and result.examples_seen == 2 and result.checkpoint is None
    with pytest.raises(WhiteboxError, match="learning rate"):
        finetune(lm, _toks(lm.tokenizer, 2), FinetuneConfig(learning_rate=0))
    with pytest.raises(WhiteboxError, match="no training examples"):
        finetune(lm, [], FinetuneConfig())
    with pytest.raises(WhiteboxError, match="no checkpoint"):
        load_weights(lm.model, tmp_path)


def test_bf16_finetuning_steps_float32_master_weights(make_span_lm):
    """At a learning rate whose every AdamW step (about lr per weight) is below half a bf16 weight's
    spacing (|w| >= 0.25: spacing 2**-9, so lr 2e-4 < 4.9e-4), stepping bf16 weights directly rounds
    each update away and the weights never move. With float32 masters the updates accumulate: the
    trained bf16 weights follow the float32 run's from the same start (their gradients differ only by
    bf16 rounding in the forward pass, so the few weights with near-zero gradients may go another way)."""
    lm, ref = make_span_lm(seed=1), make_span_lm(seed=1)
    lm.model.to(torch.bfloat16)
    ref.model.to(torch.bfloat16).to(torch.float32)  # the same (bf16-rounded) start, trained in float32
    toks = _toks(lm.tokenizer, 8)
    cfg = FinetuneConfig(learning_rate=2e-4, weight_decay=0.0, batch_size=4, epochs=20, max_steps=20)
    start = {n: p.detach().float().clone() for n, p in lm.model.named_parameters()}
    finetune(lm, toks, cfg)
    finetune(ref, toks, cfg)
    assert all(p.dtype == torch.bfloat16 for p in lm.model.parameters())
    got = torch.cat([p.detach().float().flatten() for p in lm.model.parameters()])
    want = torch.cat([p.detach().flatten() for p in ref.model.parameters()])
    w0 = torch.cat([start[n].flatten() for n, _ in lm.model.named_parameters()])
    large = w0.abs() >= 0.25
    moved = (want - w0).abs() > 2.0 ** -9  # weights the float32 run moves by more than a bf16 spacing
    assert int((large & moved).sum()) > 100
    sel = large & moved
    assert float((torch.sign(got - w0) == torch.sign(want - w0))[sel].float().mean()) > 0.9  # they move, the same way
    spacing = torch.finfo(torch.bfloat16).eps * 2.0 ** torch.floor(torch.log2(want.abs().clamp_min(1e-30)))
    assert float(((got - want).abs() <= spacing).float().mean()) > 0.9  # to a bf16 spacing, nearly all weights
