"""The masking validation's config (paper 001 sec. 3.8; the ``masking`` record's): what planning
builds without the study (:mod:`whitebox_eval.mui.masking` runs it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from whitebox_eval.errors import WhiteboxError

DEFAULT_KS: tuple[int, ...] = (1, 2, 4, 8, 16)
DEFAULT_RANDOM_DRAWS = 5
DEFAULT_MASKING_MAX_NEW_TOKENS = 64
"""Budget of generation under masks (engine-decoded): short-answer tasks stop well before it;
answers that reach it are counted (``n_truncated``)."""
METRICS_ALL: tuple[str, ...] = ("accuracy", "answer_logprob")


@dataclass
class MaskingConfig:
    """A masking validation: key neurons of ``source_task`` masked while answering ``eval_tasks``."""

    model: str = "smollm2-135m"
    source_task: str = "arithmetic-gen"
    eval_tasks: tuple[str, ...] | None = None  # None: the source task and ssd
    ks: tuple[int, ...] = DEFAULT_KS
    score: str = "contribution"
    activation: str = "mlp_act"
    final_norm: str = "none"
    response_level: bool = False
    unit: str = "pair"
    target: str = "own"
    shots: str = "auto"
    chat: str = "auto"
    source_responses: str = "model"
    limit: int | None = 32
    seed: int = 0
    random_draws: int = DEFAULT_RANDOM_DRAWS
    generate: bool = True
    max_new_tokens: int | None = DEFAULT_MASKING_MAX_NEW_TOKENS
    batch_size: int = 8
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def __post_init__(self) -> None:
        if self.eval_tasks is None:
            self.eval_tasks = tuple(dict.fromkeys((self.source_task, "ssd")))  # ssd's own: once
        self.eval_tasks, self.ks = tuple(self.eval_tasks), tuple(self.ks)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["eval_tasks"], d["ks"] = list(self.eval_tasks), list(self.ks)
        d["_volatile"] = list(d.pop("volatile"))
        d["suite"] = "masking"  # its record's name (studies.masking, suite: masking)
        d["task"] = self.source_task
        return d

    def validate(self) -> MaskingConfig:
        if not self.ks or any(int(k) < 1 for k in self.ks):
            raise WhiteboxError(f"ks must be positive integers (neurons per layer per sample), got {list(self.ks)}")
        if not self.eval_tasks:
            raise WhiteboxError("give at least one evaluation task")
        if self.score not in ("contribution", "activation"):
            raise WhiteboxError("masking ranks neurons by --score contribution or activation")
        if self.random_draws < 1:
            raise WhiteboxError("random_draws must be >= 1")
        if self.unit not in ("pair", "neuron"):
            raise WhiteboxError(f"unit must be pair (the paper's) or neuron, got {self.unit!r}")
        if self.target not in ("own", "gold"):
            raise WhiteboxError(f"target must be own (the model's unmasked answer) or gold, got {self.target!r}")
        if self.limit is None or self.limit < 1:
            raise WhiteboxError("masking needs --limit >= 1 (items per split)")
        return self

    @property
    def metrics(self) -> list[str]:
        return (["accuracy"] if self.generate else []) + ["answer_logprob"]
