"""The formats study's config and its constants (paper 004; the ``formats`` record's): what planning
builds without the study (:mod:`whitebox_eval.formats.study` runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from whitebox_eval.internals.activation_specs import parse_activations
from whitebox_eval.runs.config import config_dict
from whitebox_eval.tasks.spec import FORMATS_USAGE, MCQ_TASKS, TaskSpec

FORMATS = ("mcq", "free", "free_options")
FREE_FORMATS = ("free", "free_options")
TASKS = MCQ_TASKS  # arithmetic (number answers); any multiple-choice task whose choices are text
ARITHMETIC_LIMIT = 160  # questions evaluated by default: 160 arithmetic (10 per App. B category)
TEXT_LIMIT = 1000  # 004 sec. 2.3: 1,000 TriviaQA questions, the default of every text task
ARITHMETIC_POOL_PER_CATEGORY = 100  # generated questions per category to sample from
MAX_ANSWER_TOKENS = 15  # 004 sec. 2.3: gold answers of <= 15 tokens


@dataclass
class FormatsConfig:
    model: str = "smollm2-135m"
    task: str | TaskSpec = "arithmetic"  # read once into ``spec``
    limit: int | float | None = None  # None: 160 arithmetic, 1,000 for text answers (TriviaQA's); F < 1: a share
    shots: int = 5
    n_options: int = 4
    n_samples: int = 20
    temperature: float = 1.0
    max_new_tokens: int = 16
    top_p: float | None = None  # nucleus filtering of the free answers' draws (004 samples without it)
    top_k: int | None = None
    n_bins: int = 10
    extract: str = "paper"
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    fields: tuple[str, ...] = ()  # --field NAME=COLUMN of mcq=PATH (config.yaml: task_spec.fields)
    lm_eval_data: str | None = None  # --lm-eval-data DIR of lm-eval:TASK
    save_activations: tuple[str, ...] = ()  # --save-activations SPEC (formats/activations.py)
    edits: tuple[str, ...] = ()  # --edit SPEC: the MCQ pass and every free generation run under these
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def __post_init__(self) -> None:
        from whitebox_eval.command_options import parsed_edits

        self.edits = parsed_edits(self.edits)  # a malformed spec: one line, here
        self._spec = TaskSpec.parse(self.task, TASKS, FORMATS_USAGE, fields=self.fields)
        self.save_activations = tuple(s.text for s in parse_activations(self.save_activations))  # one line, here
        self.task = str(self._spec)

    @property
    def spec(self) -> TaskSpec:
        """The task, read once (:class:`~whitebox_eval.tasks.spec.TaskSpec`)."""
        return self._spec

    def to_dict(self) -> dict:
        d = config_dict(self, "formats", task_spec=self.spec.to_config())
        for key in ("fields", "lm_eval_data", "top_p", "top_k", "save_activations", "edits"):  # recorded only when given, so earlier runs resume as before
            if not d[key]:
                del d[key]
        return d
