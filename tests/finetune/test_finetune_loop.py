"""The one training loop (models/training.py): span's and contamination's algorithm unchanged (the
loop as they wrote it, kept here as the reference, gives the same weights bit for bit), and a
resumed run equals an uninterrupted one."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))

from tiny_models import tiny_loaded  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.models.training import (  # noqa: E402
    MasterWeights, Recipe, adamw, row_batch, row_loss, train_rows)


def _seqs(n=10, seed=5):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        k = 6 + i % 4
        ids = torch.randint(3, 60, (k,), generator=g).tolist()
        out.append((ids, list(range(k - 3, k - 1)), ids[k - 2:k]))
    return out


def _reference(lm, seqs, recipe: Recipe) -> list[float]:
    """The loop span's finetune and contamination's _train each ran before they shared one."""
    model = lm.model
    torch.manual_seed(recipe.seed)
    masters = MasterWeights([p for p in model.parameters() if p.requires_grad])
    opt = adamw(masters.params, recipe.learning_rate, recipe.betas, recipe.weight_decay)
    rng = random.Random(recipe.order_key)
    per_epoch = -(-len(seqs) // recipe.batch_size)
    losses = []
    model.train()
    for step in range(1, recipe.steps + 1):
        if (step - 1) % per_epoch == 0:
            order = list(range(len(seqs)))
            rng.shuffle(order)
        i = (step - 1) % per_epoch * recipe.batch_size
        loss = row_loss(model, row_batch([seqs[j] for j in order[i:i + recipe.batch_size]], lm.pad_id))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        masters.grads_to_masters()
        if recipe.grad_clip:
            torch.nn.utils.clip_grad_norm_(masters.params, recipe.grad_clip)
        opt.step()
        masters.masters_to_model()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def _state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _equal(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("family,dtype", [("llama", torch.float32), ("gemma2", torch.bfloat16)])
def test_the_loop_is_the_reference_loop_bit_for_bit(family, dtype):
    recipe = Recipe(1e-3, (0.9, 0.999), 0.01, 3, 7, 3, "test/order", grad_clip=1.0)
    seqs = _seqs()
    ref = tiny_loaded(family, seed=1)
    ref.model.to(dtype)
    ref_losses = _reference(ref, seqs, recipe)
    lm = tiny_loaded(family, seed=1)
    lm.model.to(dtype)
    start = _state(lm.model)
    result = train_rows(lm, seqs, recipe)
    assert result.losses == ref_losses and result.steps == 7 and result.seen == 19  # 10 items in batches 3, 3, 3, 1
    assert _equal(_state(lm.model), _state(ref.model))
    assert not _equal(_state(lm.model), start)  # it trained


@pytest.mark.parametrize("family,dtype", [("qwen2", torch.float32), ("gemma2", torch.bfloat16)])
def test_a_run_resumed_from_a_saved_state_equals_an_uninterrupted_one(family, dtype):
    recipe = Recipe(2e-3, (0.9, 0.999), 0.0, 4, 9, 0, "test/resume")  # 3 epochs of 3 steps: reshuffles
    seqs = _seqs()
    whole = tiny_loaded(family, seed=2)
    whole.model.to(dtype)
    full = train_rows(whole, seqs, recipe, extra={"n": 0}, after_step=lambda s, l: None)

    saved: dict[int, bytes] = {}

    class Crash(Exception):
        pass

    def save(data: bytes) -> None:
        saved[len(saved)] = data
        if len(saved) == 2:  # killed right after the state of step 4 was written
            raise Crash

    first = tiny_loaded(family, seed=2)
    first.model.to(dtype)
    with pytest.raises(Crash):
        train_rows(first, seqs, recipe, save_state=save, save_every=2)
    again = tiny_loaded(family, seed=2)  # a fresh process: the weights as loaded, the rest from the state
    again.model.to(dtype)
    resumed = train_rows(again, seqs, recipe, start=saved[1])
    assert resumed.losses == full.losses and resumed.steps == 9
    assert _equal(_state(again.model), _state(whole.model))


def test_a_state_of_another_recipe_is_refused():
    seqs = _seqs()
    states = []
    lm = tiny_loaded("llama")
    train_rows(lm, seqs, Recipe(1e-3, (0.9, 0.999), 0.0, 4, 2, 0, "a"), save_state=states.append, save_every=1)
    with pytest.raises(WhiteboxError, match="another model or recipe"):
        train_rows(tiny_loaded("llama"), seqs, Recipe(1e-3, (0.9, 0.999), 0.0, 4, 3, 0, "a"), start=states[-1])
