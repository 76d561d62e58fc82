"""What sets a fine-tuning (:mod:`.study`): its config, apart from the run code so that planning a
``finetune`` child (its items and units of work) imports no study code."""

from __future__ import annotations

from dataclasses import dataclass, field

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune.sources import ANSWER_ENDS, ARITH, FACTS, GAR, GEN, SPAN, TEXT, parse_source
from whitebox_eval.runs.config import config_dict


@dataclass
class FinetuneConfig:
    """Everything that sets a fine-tuning's weights and its check."""

    model: str = "smollm2-135m"
    task: str = "arithmetic-gen"
    limit: int | None = 200
    """Items drawn from the task before deduplication (None: all of a file)."""
    validation: float = 0.1
    test: float = 0.2
    shots: int = 0
    """Demonstrations before each check prompt, from a pool no split holds (training is zero-shot)."""
    learning_rate: float = 5e-5
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    train_batch_size: int = 8
    epochs: int = 1
    max_steps: int | None = None
    grad_clip: float | None = None
    save_every: int = 25
    """Steps between saved states (0: none; a kill then restarts the training)."""
    eval_every: int | None = None
    """Steps between validation losses (None: ``save_every``, or only at the end when that is 0)."""
    patience: int = 0
    """Stop after this many validation losses without a new best (0: never early)."""
    max_new_tokens: int | None = None
    """The check's generation budget (None: the longest test answer plus 2 tokens)."""
    check_samples: int = 5
    """arithmetic-text: answers drawn at temperature 1 per test problem in 004's free format (its
    free P(correct)); 0: the greedy answer only."""
    answer_end: str = "eos"
    """What closes each trained answer: ``eos`` (the model's end token), ``newline`` or ``none``
    (:func:`~whitebox_eval.finetune.sources.answer_end_id`); prompt-and-answer tasks only (span
    lays out its own end, a text line has no answer). config.yaml omits the default."""
    train_context: int = 0
    """Each training and validation line after this many training lines as bare demonstrations (a
    seeded draw per line, the loss on its own answer): arithmetic text and free-answer tasks, so a
    skill learned alone also holds after the few-shot prompt's demonstrations (0: each line alone;
    config.yaml omits it)."""
    line_style: str = "plain"
    """arithmetic text: ``plain`` (``75 + 22 = 97``) or ``mixed`` (each line in one of several neutral
    styles, :data:`~whitebox_eval.finetune.arithmetic_text.MIXED_STYLES`; config.yaml omits plain)."""
    keep_checkpoints: int = 0
    """Checkpoints kept along the training (:mod:`whitebox_eval.models.checkpoints`): the model before
    training and at this many steps spaced evenly over the planned ones (0: none; config.yaml omits it)."""
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=("batch_size", "trained_weights"), repr=False)

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)

    def check(self) -> None:
        if self.learning_rate <= 0 or self.train_batch_size < 1 or self.epochs < 1 or self.batch_size < 1:
            raise WhiteboxError("finetune needs a positive learning rate, and batch sizes and epochs of at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise WhiteboxError("max_steps must be at least 1 (or None for every epoch)")
        if min(self.save_every, self.patience, self.shots, self.check_samples, self.keep_checkpoints) < 0 \
                or (self.eval_every or 1) < 1:
            raise WhiteboxError("save_every, patience, shots, check_samples and keep_checkpoints must be >= 0, "
                                "eval_every >= 1")
        if self.limit is not None and self.limit < 4:
            raise WhiteboxError("finetune needs a limit of at least 4 items (train, validation, test)")
        if not (0 < self.validation < 1 and 0 < self.test < 1 and self.validation + self.test < 1):
            raise WhiteboxError("validation and test are shares of the items: each in (0, 1), their sum below 1")
        source = parse_source(self.task)
        if self.answer_end not in ANSWER_ENDS:
            raise WhiteboxError(f"answer_end is one of {', '.join(ANSWER_ENDS)}; got {self.answer_end!r}")
        if self.answer_end != "eos" and source.kind in (TEXT, SPAN):
            raise WhiteboxError(f"answer_end {self.answer_end!r} applies to tasks with a prompt and an answer; "
                                f"{source.kind} lays out its own ends (leave it at eos)")
        if self.train_context < 0:
            raise WhiteboxError(f"train_context must be >= 0 (0: each line alone); got {self.train_context}")
        if self.train_context and source.kind not in (ARITH, GEN):
            raise WhiteboxError(f"train_context applies to arithmetic-text and free-answer tasks; {source.kind} "
                                "trains each line alone (leave it at 0)")
        from whitebox_eval.finetune.arithmetic_text import LINE_STYLES

        if self.line_style not in LINE_STYLES:
            raise WhiteboxError(f"line_style is one of {', '.join(LINE_STYLES)}; got {self.line_style!r}")
        if self.line_style != "plain" and source.kind != ARITH:
            raise WhiteboxError(f"line_style applies to arithmetic-text; {source.kind} writes its own lines "
                                "(leave it at plain)")
        if self.shots and source.kind in (TEXT, GAR, FACTS):
            raise WhiteboxError(f"--shots applies to tasks with answers; {source.kind} prompts take none here")

    def to_dict(self) -> dict:
        d = config_dict(self, "finetune")
        for key, default in (("keep_checkpoints", 0), ("answer_end", "eos"), ("train_context", 0),
                             ("line_style", "plain")):
            if d[key] == default:  # off: config.yaml (and so every run id) as before the option
                del d[key]
        return d

    def steps(self, n_train: int) -> int:
        per_epoch = -(-n_train // self.train_batch_size)
        return min(per_epoch * self.epochs, self.max_steps or per_epoch * self.epochs)
