"""What determines an MCQA study's numbers (paper 000): its methods and its config."""

from __future__ import annotations

from dataclasses import dataclass, field

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

        self.edits = tuple(parse_edit(e).text for e in self.edits)  # a malformed spec: one line, here
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
