"""Fine-tuning a causal LM on an AttentionSpan task (paper 003, sec. 4 and App. E).

App. E: AdamW (lr 5e-6, betas (0.95, 0.999), weight decay 0.2), batch size 4, one
epoch, no dropout; the loss is the next-token cross-entropy on the target tokens only
(the instruction, few-shot prefix and input are context, not predicted). The model is
trained in place (``lm.model``); checkpoints are Hugging Face folders
(``model.safetensors`` + config + tokenizer), loadable again with ``load_model(path)``.

Training batches are right-padded (position ids 0..n-1 per example, padding masked as
keys and never scored), so no query row is fully masked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from whitebox_eval.span.config import FinetuneConfig
from whitebox_eval.span.tokenization import TokenizedExample
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs import progress
from whitebox_eval.models.training import (
    WEIGHTS_FILE,
    Recipe,
    RowBatch,
    load_weights,
    row_batch,
    row_loss,
    save_weights,
    train_rows,
)

CHECKPOINT_WEIGHTS = WEIGHTS_FILE


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
    """What a fine-tuning run did: per-step losses, time and the final checkpoint."""

    losses: list[float]
    steps: int
    examples_seen: int
    seconds: float
    checkpoint: Path | None = None
    checkpoints: list[Path] = field(default_factory=list)

    def summary(self, window: int = 20) -> dict:
        first = float(np.mean(self.losses[:window])) if self.losses else float("nan")
        last = float(np.mean(self.losses[-window:])) if self.losses else float("nan")
        return {"steps": self.steps, "examples_seen": self.examples_seen,
                "seconds": round(self.seconds, 1), "loss_first": first, "loss_last": last,
                "checkpoint": str(self.checkpoint) if self.checkpoint else None}


def save_checkpoint(lm, path: str | Path) -> Path:
    """Write ``lm``'s model (safetensors) and tokenizer as a loadable HF folder."""
    return save_weights(lm, path)


def load_checkpoint_weights(lm, path: str | Path) -> None:
    """Load weights written by :func:`save_checkpoint` into ``lm.model`` in place."""
    load_weights(lm.model, path)


def finetune(lm, train: Sequence[TokenizedExample], cfg: FinetuneConfig | None = None, *,
             checkpoint_dir: str | Path | None = None,
             on_step: Callable[[int, float], None] | None = None,
             show_progress: bool | None = None) -> FinetuneResult:
    """Train ``lm.model`` on ``train`` with AdamW, loss on target tokens only (App. E), through
    the one training loop (:func:`whitebox_eval.models.training.train_rows`: bf16/fp16 weights
    through float32 master copies).

    Examples are shuffled each epoch with ``cfg.seed``; the model is left in eval mode.
    With ``checkpoint_dir`` the final weights go to ``<dir>/final`` (and every
    ``checkpoint_every`` steps to ``<dir>/step-XXXXXX``). ``on_step(step, loss)`` is
    called after every optimizer step; progress on stderr and run.log (``show_progress``).
    """
    cfg = cfg or FinetuneConfig()
    cfg.check()
    if not train:
        raise WhiteboxError("no training examples; generate some in-distribution examples first")
    per_epoch = -(-len(train) // cfg.batch_size)
    steps = per_epoch * cfg.epochs if cfg.max_steps is None else min(per_epoch * cfg.epochs, cfg.max_steps)
    recipe = Recipe(cfg.learning_rate, tuple(cfg.betas), cfg.weight_decay, cfg.batch_size, steps, cfg.seed,
                    f"attentionspan/finetune/{cfg.seed}", cfg.grad_clip)
    checkpoints: list[Path] = []

    def after_step(step: int, loss: float) -> None:
        if on_step is not None:
            on_step(step, loss)
        if checkpoint_dir and cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
            checkpoints.append(save_checkpoint(lm, Path(checkpoint_dir) / f"step-{step:06d}"))

    sequences = [(t.input_ids.tolist(), t.prediction_positions.tolist(), t.target_ids.tolist()) for t in train]
    result = train_rows(lm, sequences, recipe, after_step=after_step,
                        bar=lambda r: progress(r, desc="fine-tuning (steps)", enabled=show_progress))
    final = save_checkpoint(lm, Path(checkpoint_dir) / "final") if checkpoint_dir else None
    return FinetuneResult(result.losses, result.steps, result.seen, result.seconds, final, checkpoints)
