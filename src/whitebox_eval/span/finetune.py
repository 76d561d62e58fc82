"""Fine-tuning a causal LM on an AttentionSpan task (paper 003, sec. 4 and App. E).

App. E: AdamW (lr 5e-6, betas (0.95, 0.999), weight decay 0.2), batch size 4, one
epoch, no dropout; the loss is the next-token cross-entropy on the target tokens only
(the instruction, few-shot prefix and input are context, not predicted). The model is
trained in place (``lm.model``); its final weights are a Hugging Face folder
(``model.safetensors`` + config + tokenizer, ``load_model(path)`` loads it again), and the
checkpoints it keeps along the way are the project's
(:mod:`whitebox_eval.models.checkpoints`: ``checkpoints/step-NNNNNN/`` with ``trained.json``).

Training batches are right-padded (position ids 0..n-1 per example, padding masked as
keys and never scored), so no query row is fully masked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from whitebox_eval.span.config import FinetuneConfig
from whitebox_eval.span.tokenization import TokenizedExample
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs import progress
from whitebox_eval.models.checkpoints import checkpoint_steps, save_checkpoint
from whitebox_eval.models.training import Recipe, RowBatch, row_batch, row_loss, save_weights, train_rows

TrainingBatch = RowBatch


def training_batch(tokenized: Sequence[TokenizedExample], pad_id: int = 0) -> RowBatch:
    """Right-pad the examples' full sequences and list their target rows (App. E)."""
    return row_batch([(t.input_ids.tolist(), t.prediction_positions.tolist(), t.target_ids.tolist())
                      for t in tokenized], pad_id)


def target_loss(model, batch: RowBatch) -> torch.Tensor:
    """Mean cross-entropy of the target tokens given everything before them (App. E);
    logits only at the target rows (:func:`whitebox_eval.models.training.row_loss`)."""
    return row_loss(model, batch)


@dataclass
class FinetuneResult:
    """What a fine-tuning run did: per-step losses, time and the final weights' folder."""

    losses: list[float]
    steps: int
    examples_seen: int
    seconds: float
    checkpoint: Path | None = None

    def summary(self, window: int = 20) -> dict:
        first = float(np.mean(self.losses[:window])) if self.losses else float("nan")
        last = float(np.mean(self.losses[-window:])) if self.losses else float("nan")
        return {"steps": self.steps, "examples_seen": self.examples_seen,
                "seconds": round(self.seconds, 1), "loss_first": first, "loss_last": last,
                "checkpoint": str(self.checkpoint) if self.checkpoint else None}


def finetune(lm, train: Sequence[TokenizedExample], cfg: FinetuneConfig | None = None, *,
             checkpoint_dir: str | Path | None = None, run_id: str | None = None,
             on_step: Callable[[int, float], None] | None = None,
             show_progress: bool | None = None) -> FinetuneResult:
    """Train ``lm.model`` on ``train`` with AdamW, loss on target tokens only (App. E), through
    the one training loop (:func:`whitebox_eval.models.training.train_rows`: bf16/fp16 weights
    through float32 master copies).

    Examples are shuffled each epoch with ``cfg.seed``; the model is left in eval mode.
    With ``checkpoint_dir`` the final weights go to ``<dir>/final``, and with ``cfg.keep_checkpoints``
    the model before training and at the steps :func:`~whitebox_eval.models.checkpoints.checkpoint_steps`
    spreads over the planned ones to ``<dir>/checkpoints/step-NNNNNN/`` (their ``trained.json``
    names ``run_id``, the run that trained them; ``list_checkpoints(dir)`` lists them).
    ``on_step(step, loss)`` is called after every optimizer step, before that step's checkpoint;
    progress on stderr and run.log (``show_progress``).
    """
    cfg = cfg or FinetuneConfig()
    cfg.check()
    if not train:
        raise WhiteboxError("no training examples; generate some in-distribution examples first")
    per_epoch = -(-len(train) // cfg.batch_size)
    steps = per_epoch * cfg.epochs if cfg.max_steps is None else min(per_epoch * cfg.epochs, cfg.max_steps)
    recipe = Recipe(cfg.learning_rate, tuple(cfg.betas), cfg.weight_decay, cfg.batch_size, steps, cfg.seed,
                    f"attentionspan/finetune/{cfg.seed}", cfg.grad_clip)
    if cfg.keep_checkpoints and not checkpoint_dir:
        raise WhiteboxError("keep_checkpoints needs a checkpoint_dir to keep them in")
    keep = set(checkpoint_steps(steps, cfg.keep_checkpoints))
    if keep:
        save_checkpoint(lm, checkpoint_dir, 0, run_id)

    def after_step(step: int, loss: float) -> None:
        if on_step is not None:
            on_step(step, loss)
        if step in keep:
            save_checkpoint(lm, checkpoint_dir, step, run_id)

    sequences = [(t.input_ids.tolist(), t.prediction_positions.tolist(), t.target_ids.tolist()) for t in train]
    result = train_rows(lm, sequences, recipe, after_step=after_step,
                        bar=lambda r: progress(r, desc="fine-tuning (steps)", enabled=show_progress))
    final = save_weights(lm, Path(checkpoint_dir) / "final") if checkpoint_dir else None
    return FinetuneResult(result.losses, result.steps, result.seen, result.seconds, final)
