"""What determines an AttentionSpan study's numbers (paper 003): the task, splits,
fine-tuning and reinforcement settings, and the task instructions."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from whitebox_eval.span.tasks import SPLIT_CHOICES, TASKS
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.config import config_dict

MODES = ("standard", "conditional")
"""The reinforcement's modes (:mod:`whitebox_eval.span.reinforcement`)."""

#: Short task instructions (App. D: "instruction prompt", wording not given in the paper).
INSTRUCTIONS = {
    "string_reversal": "Reverse the string.",
    "long_addition": "Add the numbers. Digits are written least significant first.",
    "long_multiplication": "Multiply the numbers, writing each partial product and then "
                           "the result. Digits are written least significant first.",
    "flip_flop": "Output the bit stored in the register read last.",
    "value_assignment": "Translate the string using the table.",
    "successor": "Continue the series.",
}


@dataclass
class FinetuneConfig:
    """App. E hyper-parameters (defaults are the paper's)."""

    learning_rate: float = 5e-6
    betas: tuple[float, float] = (0.95, 0.999)
    weight_decay: float = 0.2
    batch_size: int = 4
    epochs: int = 1
    max_steps: int | None = None
    """Stop after this many optimizer steps (None: run all epochs)."""
    grad_clip: float | None = None
    """Clip the gradient norm (paper silent; None = no clipping)."""
    keep_checkpoints: int = 0
    """Checkpoints kept along the training (:mod:`whitebox_eval.models.checkpoints`), as ``finetune``'s
    ``--keep-checkpoints``: the model before training and at this many steps spaced evenly over the
    planned ones (0: only the final weights)."""
    seed: int = 0

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        if not d["keep_checkpoints"]:  # off: config.yaml and the cache key omit it
            del d["keep_checkpoints"]
        return d

    def check(self) -> None:
        if self.learning_rate <= 0:
            raise WhiteboxError(f"learning rate must be positive; got {self.learning_rate}")
        if self.batch_size < 1 or self.epochs < 1:
            raise WhiteboxError("batch size and epochs must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise WhiteboxError("max_steps must be at least 1 (or None for all epochs)")
        if self.keep_checkpoints < 0:
            raise WhiteboxError(f"keep_checkpoints must be >= 0 (0: none); got {self.keep_checkpoints}")


DEFAULT_PER_SPLIT = 100  # examples per split without --limit (what a fractional limit is a share of)


@dataclass
class SpanConfig:
    """Everything that determines an AttentionSpan study's numbers (written to config.yaml)."""

    model: str = "smollm2-135m"
    task: str = "string_reversal"
    split: str = "ood"
    limit: int | float = 100  # per split: N examples, or a fraction below 1 of the default 100 (n_per_split)
    id_params: dict[str, Any] = field(default_factory=dict)
    ood_params: dict[str, Any] = field(default_factory=dict)
    instruction: str | None = None
    shots: int = 0
    append_eos: bool = True
    generation: bool = False
    rollout: bool = True
    heatmaps: int = 2
    test: str = "welch"
    finetune_examples: int = 0
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)
    reinforce: bool = False
    key_samples: int = 30
    select_limit: int = 50
    """OOD examples, disjoint from the evaluated ones, on which N and C are chosen."""
    heads: tuple[int, ...] = (5, 10, 20)
    values: tuple[float, ...] = (0.3, 1.0)
    mode: str = "standard"
    threshold: float = 0.05
    random_draws: int = 5
    shift: int = 1
    """Shifted-reference control: reference columns moved by this many tokens."""
    reinforce_generation: bool = False
    """Also generate freely under the chosen reinforcement (and its controls)."""
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    edits: tuple[str, ...] = ()
    """--edit SPEC: every evaluation pass (teacher-forced, generation, reinforcement) runs under these;
    fine-tuning trains the model as it is."""
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def __post_init__(self) -> None:
        from whitebox_eval.command_options import parsed_edits

        self.edits = parsed_edits(self.edits)  # a malformed spec: one line, here
        if isinstance(self.finetune, dict):  # from a paper's YAML or config.yaml: App. E's fields by name
            known = {f.name for f in dataclasses.fields(FinetuneConfig)}
            unknown = sorted(set(self.finetune) - known)
            if unknown:
                raise WhiteboxError(f"unknown fine-tuning setting(s) {', '.join(unknown)}; "
                                    f"the settings are: {', '.join(sorted(known))}")
            self.finetune = FinetuneConfig(**{k: tuple(v) if k == "betas" else v for k, v in self.finetune.items()})

    def to_dict(self) -> dict:
        d = config_dict(self, "span")
        d["finetune"] = self.finetune.to_dict()
        if not self.edits:  # recorded only when given, so earlier runs resume as before
            del d["edits"]
        return d

    @property
    def n_per_split(self) -> int:
        """Examples evaluated per split: ``limit``, or a fraction of the default 100 rounded up."""
        from whitebox_eval.runs.limits import checked, taken

        return taken(checked(self.limit), DEFAULT_PER_SPLIT)

    @property
    def splits(self) -> list[str]:
        return ["id", "ood"] if self.split == "both" else [self.split]

    def check(self) -> None:
        from whitebox_eval.runs.limits import checked

        if self.task not in TASKS:
            raise WhiteboxError(f"unknown task {self.task!r}; choose one of {', '.join(sorted(TASKS))}")
        if self.split not in SPLIT_CHOICES:
            raise WhiteboxError(f"split must be one of {SPLIT_CHOICES}; got {self.split!r}")
        checked(self.limit)  # N >= 1 or a fraction in (0, 1): one line otherwise (runs/limits.py)
        if self.mode not in MODES:
            raise WhiteboxError(f"reinforcement mode must be one of {MODES}; got {self.mode!r}")
        if self.reinforce and "ood" not in self.splits:
            raise WhiteboxError("reinforcement is evaluated on OOD examples: use --split ood or both")
        if self.reinforce and (not self.heads or not self.values):
            raise WhiteboxError("reinforcement needs at least one head count (--heads) and one C (--values)")
        if self.reinforce and self.select_limit < 1:
            raise WhiteboxError("N and C are chosen on a selection split: give --select-limit >= 1")
        if self.reinforce and self.random_draws < 2:
            raise WhiteboxError("the random-head control needs at least 2 draws for a mean and sd "
                                "(--random-draws; 5 or more recommended)")
        if self.reinforce and self.shift < 1:
            raise WhiteboxError("the shifted-reference control needs --shift >= 1")
        if self.reinforce_generation and not self.reinforce:
            raise WhiteboxError("generation under reinforcement needs --reinforce")
        if self.finetune_examples < 0:
            raise WhiteboxError("finetune_examples must be >= 0 (0 = no fine-tuning)")
        if self.finetune.keep_checkpoints and not self.finetune_examples:
            raise WhiteboxError("--keep-checkpoints keeps a fine-tuning's checkpoints: give --finetune N too")
        self.finetune.check()

    def params_for(self, split: str) -> dict[str, Any]:
        return dict(self.id_params if split == "id" else self.ood_params)
