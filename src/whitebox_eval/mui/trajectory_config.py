"""A trajectory's config (the ``mui`` record's ``trajectory`` mode, :mod:`.trajectory` runs it):
apart from the run code, so that planning it imports no study code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.config import MUIConfig
from whitebox_eval.runs.config import config_dict


@dataclass
class TrajectoryConfig:
    """What sets a trajectory's numbers: the fine-tuning run folder (its checkpoints), the held-out
    task every checkpoint answers and the MUI study's settings."""

    model: str = ""
    """A ``finetune`` run folder that kept checkpoints."""
    task: str = "arithmetic-gen"
    limit: int = 48
    max_new_tokens: int | None = None
    mui: dict[str, Any] = field(default_factory=dict)
    """Further MUI study settings for every checkpoint (score, threshold, shots, chat, ...)."""
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def check(self) -> None:
        if self.limit is None or self.limit < 2:
            raise WhiteboxError("a trajectory needs limit >= 2 items (every checkpoint answers the same items)")
        reserved = {"model", "task", "limit", "seed", "batch_size", "dtype", "max_new_tokens"} & set(self.mui)
        if reserved:
            raise WhiteboxError(f"set {', '.join(sorted(reserved))} on the trajectory itself, not in mui")
        self.mui_config(self.model or "smollm2-135m")  # a bad MUI setting is one line here

    def mui_config(self, model: str) -> MUIConfig:
        return MUIConfig(model=model, task=self.task, limit=self.limit, seed=self.seed, batch_size=self.batch_size,
                         dtype=self.dtype, max_new_tokens=self.max_new_tokens, **self.mui)

    def to_dict(self) -> dict:
        return config_dict(self, "mui", mode="trajectory")
