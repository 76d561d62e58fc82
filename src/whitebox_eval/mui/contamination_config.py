"""The contamination study's config (paper 001 sec. 3.4; the ``contamination`` record's): what
planning builds without the study (:mod:`whitebox_eval.mui.contamination` runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.config import MUIConfig
from whitebox_eval.runs.config import config_dict


@dataclass
class ContaminationConfig:
    """Everything that sets a contamination study's numbers (App. A.6's ranges: lr 7e-5 .. 2e-9,
    2-4 epochs, batch 4-128; full-parameter AdamW)."""

    model: str = "smollm2-135m"
    task: str = "arithmetic-gen"
    """The contaminated task: its ``limit`` evaluated test items are trained on."""
    ood_tasks: tuple[str, ...] = ("ssd",)
    limit: int = 48
    epochs: int = 3
    learning_rate: float = 5e-5
    weight_decay: float = 0.0
    train_batch_size: int = 4
    checkpoints: tuple[int, ...] = ()
    """Optimizer steps at which a checkpoint is also evaluated (the final one always is)."""
    until_significant: bool = False
    """Train epoch by epoch (on every item) until the contaminated task's accuracy on the stopping
    half of its items (:func:`stopping_split`), read as the MUI study reads it (same prompts, greedy
    generation, the task's answer check), is significantly above its value before training (exact
    McNemar, p < 0.05, more items gained than lost), or until ``max_epochs``: then the contamination
    did not take and the report says so. ``epochs`` is ignored. The contaminated task's changes are
    then tested on the other half only."""
    max_epochs: int = 10
    """The cap of ``until_significant`` (epochs)."""
    max_new_tokens: int | None = None
    mui: dict[str, Any] = field(default_factory=dict)
    """Further MUI study settings for every evaluation (score, threshold, shots, chat, ...)."""
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def __post_init__(self) -> None:
        self.ood_tasks = tuple(self.ood_tasks)
        self.checkpoints = tuple(int(s) for s in self.checkpoints)

    def check(self) -> None:
        if self.limit is None or self.limit < 2:
            raise WhiteboxError("contamination needs limit >= 2 items (paired tests on the same items)")
        if self.epochs < 1 or self.train_batch_size < 1 or self.max_epochs < 1:
            raise WhiteboxError("epochs, max_epochs and train_batch_size must be at least 1")
        if self.learning_rate <= 0:
            raise WhiteboxError(f"learning rate must be positive; got {self.learning_rate}")
        if any(s < 1 for s in self.checkpoints):
            raise WhiteboxError("checkpoint steps must be >= 1 (step 0 is the model before training)")
        reserved = {"model", "task", "limit", "seed", "batch_size", "dtype", "max_new_tokens"} & set(self.mui)
        if reserved:
            raise WhiteboxError(f"set {', '.join(sorted(reserved))} on the contamination study itself, not in mui")
        if not self.ood_tasks:
            raise WhiteboxError("give at least one out-of-domain task (ood_tasks)")
        if self.until_significant and self.limit < 4:
            raise WhiteboxError("until_significant stops on one half of the items and tests the other: limit >= 4")

    def to_dict(self) -> dict:
        return config_dict(self, "contamination")

    def mui_config(self, model: str, task: str) -> MUIConfig:
        """The MUI study every checkpoint runs on ``task``."""
        return MUIConfig(model=model, task=task, limit=self.limit, seed=self.seed, batch_size=self.batch_size,
                         dtype=self.dtype, max_new_tokens=self.max_new_tokens, **self.mui)

    @property
    def tasks(self) -> list[str]:
        return [self.task, *self.ood_tasks]
