"""What determines an MCQA study's numbers (paper 000): its methods and its config."""

from __future__ import annotations

from dataclasses import dataclass, field

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mcqa import head_scores as hs
from whitebox_eval.runs import config_dict
from whitebox_eval.tasks.spec import MCQ_TASKS, MCQ_USAGE, TaskSpec
from whitebox_eval.tasks.hub import location

METHODS = ("baseline", "qk", "attention", "lens", "pride", "pa", "ablation", "cloze")
DEFAULT_METHODS = ("baseline", "qk", "attention", "lens", "pride", "pa")
HEAD_METHODS = ("qk", "attention")
#: methods that choose something (a head, a prior) on validation items: with any of them
#: the items are split and those methods are reported on the test items only
SELECTING_METHODS = ("qk", "attention", "pride", "ablation")
#: methods that need the options listed in the prompt (every method but the cloze)
LETTER_METHODS = tuple(m for m in METHODS if m != "cloze")
#: the positions ``--save-activations`` can name in mcqa (its main pass scores prompts, generates nothing)
SAVE_POSITIONS = ("last", "all", "options")
SYNTHETIC_DEFAULT_LIMIT = 500  # ssd / arithmetic generate items: this many unless --limit says otherwise

#: what each view of an lm-eval task scores (config.yaml: lm_eval_view)
VIEW_RULES = {
    "cloze": "lm-eval's own requests (context, continuation) per choice, unchanged: acc/acc_norm as lm-eval computes them",
    "letters": "the documents of lm-eval's task, each question followed by its choices as 'A. ..' lines and 'Answer:' "
               "(lm-eval's exact text where the task already letters its options), letters scored as the next token, "
               "so the head scores apply; the demonstrations are the documents lm-eval's sampler drew (seed 1234); "
               "the cloze method still scores lm-eval's own requests",
}

def default_methods(task: TaskSpec, prompt: str = "paper", view: str | None = None) -> tuple[str, ...]:
    """The methods a study runs when none are named: lm-eval's cloze tasks (HellaSwag,
    ARC) with ``--prompt lm-eval`` and ``lm-eval:TASK``'s cloze view show no options, so only
    the cloze applies; ``lm-eval:TASK``'s letters view runs every method."""
    from whitebox_eval.tasks.lm_eval import LM_EVAL

    if task.is_lm_eval:
        return DEFAULT_METHODS + ("cloze",) if view == "letters" else ("cloze",)
    if prompt == LM_EVAL and task.record.lm_eval_output == "cloze":
        return ("cloze",)
    return DEFAULT_METHODS


@dataclass
class MCQAConfig:
    """Everything that determines an MCQA study's numbers (written to config.yaml)."""

    model: str = "smollm2-135m"
    task: str | TaskSpec = "ssd"  # read once into ``spec``; config.yaml records the canonical text
    n_options: int = 4
    labels: str = "letters"
    uncertainty: bool = True
    language: str = "en"
    shots: int = 0
    limit: int | float | None = None  # N items, or a fraction below 1 of them (runs/limits.py)
    prompt: str = "paper"
    representative: str = "eol"
    methods: tuple[str, ...] | None = None  # None: default_methods(task, prompt, view)
    seed: int = 0
    val_fraction: float = hs.DEFAULT_VAL_FRACTION
    min_val_items: int = hs.DEFAULT_MIN_VAL_ITEMS
    ablation_k: int = 5
    ablation_draws: int = 5
    on_bad_row: str = "skip"
    batch_size: int = 8
    dtype: str = "float32"
    prefix_cache: bool = True
    demos_from: str | None = None
    apply_chat_template: bool = False
    fields: tuple[str, ...] = ()  # --field NAME=COLUMN of --task mcq=PATH (config.yaml: task_spec.fields)
    lm_eval_data: str | None = None  # --lm-eval-data DIR of --task lm-eval:TASK
    view: str | None = None  # --view cloze|letters of --task lm-eval:TASK
    item_views: bool = True  # keep the report's per-item attention rows (one more pass, mcqa/explorer.py)
    edits: tuple[str, ...] = ()  # --edit SPEC: every pass runs under these (internals/edit_specs.py)
    save_activations: tuple[str, ...] = ()  # --save-activations SPEC: kept per item (internals/activation_specs.py)
    volatile: tuple[str, ...] = field(default=("batch_size", "prefix_cache", "item_views"), repr=False)

    def __post_init__(self) -> None:
        from whitebox_eval.internals.activation_specs import parse_activations
        from whitebox_eval.internals.edit_specs import parse_edit
        from whitebox_eval.runs.limits import checked

        edits = [parse_edit(e) for e in self.edits]  # a malformed spec: one line, here
        self.edits = tuple(e.text for e in edits)
        self.limit = checked(self.limit)  # N items or a fraction of them (runs/limits.py)
        self.save_activations = tuple(s.text for s in parse_activations(self.save_activations, SAVE_POSITIONS))
        if isinstance(self.task, TaskSpec) and self.task.fields and not self.fields:
            self.fields = tuple(f"{name}={column}" for name, column in self.task.fields)
        self._spec = TaskSpec.parse(self.task, MCQ_TASKS, MCQ_USAGE, fields=self.fields)
        self.task = str(self._spec)
        self._demos = location(self.demos_from) if self.demos_from else None
        if self.methods is None:  # before the view: lm-eval:TASK without --view runs the cloze
            self.methods = default_methods(self._spec, self.prompt, self.view)
        if self._spec.is_lm_eval:  # always lm-eval's own text, no extra options
            self.prompt, self.uncertainty = "lm-eval", False
            if self.view is None:
                self.view = "letters" if any(m != "cloze" for m in self.methods) else "cloze"
        elif self.prompt != "paper":  # lm-eval's own text lists no uncertainty options
            self.uncertainty = False
        self.methods = tuple(self.methods)
        self._check(edits)

    def _check(self, edits) -> None:
        """One line for a method, prompt style, view or edit this task or these methods cannot run."""
        from whitebox_eval.tasks import lm_eval

        for m in self.methods:
            if m not in METHODS:
                raise WhiteboxError(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
        letters = [m for m in self.methods if m in LETTER_METHODS]
        if self._spec.is_lm_eval:
            _check_lm_eval_task(self, letters)
        else:
            lm_eval.check_style(self._spec.record, self.prompt)
        if self.prompt == lm_eval.LM_EVAL and not self._spec.is_lm_eval:
            if letters and default_methods(self._spec, self.prompt) == ("cloze",):
                raise WhiteboxError(f"lm-eval's {self._spec.name} task scores the option texts as continuations and "
                                    f"lists no options, so {', '.join(letters)} cannot run with --prompt lm-eval; use "
                                    "--methods cloze (or --prompt paper for the letter methods)")
            if self.labels != "letters":
                raise WhiteboxError("--prompt lm-eval writes lm-eval's labels A, B, C, D; drop --labels")
        if "cloze" in self.methods:  # a packed row holds every choice: only edits of each token alone mean the same there
            for spec in edits:
                if spec.last_only or spec.kind == "attn":
                    raise WhiteboxError(f"--edit {spec.text}: the cloze method scores every choice in one packed row, "
                                        "where the last position and attention cells are each choice's own; edit "
                                        "every position (no @last, no attn:) or leave cloze out of --methods")

    @property
    def spec(self) -> TaskSpec:
        """The task, read once (:class:`~whitebox_eval.tasks.spec.TaskSpec`)."""
        return self._spec

    @property
    def demos_source(self):
        """``--demos-from``, read once: a local path or a hub split (:func:`whitebox_eval.tasks.hub.location`)."""
        return self._demos

    def to_dict(self) -> dict:
        d = config_dict(self, "mcqa", task_spec=self.spec.to_config())
        if not self.fields:  # recorded only when given (task_spec.fields), so earlier runs resume as before
            del d["fields"]
        for key in ("lm_eval_data", "view"):  # likewise: only lm-eval:TASK studies have them
            if d.get(key) is None:
                del d[key]
        if self.item_views:  # recorded only when turned off, so earlier runs resume as before
            del d["item_views"]
        if not self.edits:  # likewise: recorded only when given
            del d["edits"]
        if not self.save_activations:  # likewise
            del d["save_activations"]
        return d


def _check_lm_eval_task(cfg: MCQAConfig, letters: list[str]) -> None:
    """One-line errors for what an ``lm-eval:TASK`` view cannot run."""
    if cfg.view not in VIEW_RULES:
        raise WhiteboxError(f"--view {cfg.view!r}: choose cloze (lm-eval's requests) or letters (options listed, head scores)")
    if cfg.view == "cloze" and letters:
        raise WhiteboxError(f"the cloze view of {cfg.task} lists no options, so {', '.join(letters)} cannot run; "
                            "use --methods cloze, or --view letters for the letter methods")
    if cfg.apply_chat_template:
        raise WhiteboxError(f"--apply-chat-template is not supported with --task {cfg.task} (lm-eval builds chat "
                            "prompts its own way); run lm-eval:TASK without it")
    if cfg.demos_from:
        raise WhiteboxError(f"--demos-from does not apply to --task {cfg.task}: lm-eval's sampler takes the "
                            "demonstrations from the task's few-shot split (point it at files with --lm-eval-data)")
