"""What determines a MUI study's numbers (paper 001): its config, and the names of its thresholds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.command_options import parsed_edits
from whitebox_eval.runs.limits import checked
from whitebox_eval.tasks.spec import GENERATION_TASKS, GENERATION_USAGE as TASK_USAGE, TaskSpec

if TYPE_CHECKING:
    from whitebox_eval.mui.keyneurons import KeyNeuronConfig

THRESHOLDS: dict[str, str] = {
    "top-per-mille": "top_fraction", "top-fraction": "top_fraction", "topk": "topk",
    "global-topk": "global_topk", "topscore": "topscore",
}
"""CLI threshold names -> App. A.4 functions (top-per-mille = top-fraction with 0.001)."""


def threshold_setting(name: str, value: float | None) -> tuple[str, float | None]:
    """``(method, value)`` for :func:`whitebox_eval.mui.thresholds.key_mask` from a CLI name."""
    key = name.strip().lower().replace("_", "-")
    if key not in THRESHOLDS:
        raise WhiteboxError(f"unknown threshold {name!r}; choose {', '.join(THRESHOLDS)}")
    if key == "top-per-mille":
        if value is not None:
            raise WhiteboxError("top-per-mille is fixed at 0.001; use --threshold top-fraction --threshold-value F for other fractions")
        return "top_fraction", 1e-3
    if key != "top-fraction" and value is None:
        raise WhiteboxError(f"--threshold {key} needs --threshold-value (k for topk/global-topk, a ratio for topscore)")
    return THRESHOLDS[key], value


REFERENCE_CODE_SETTINGS: dict[str, str] = {
    "activation": "mlp_gate_act", "score_token": "at", "unit": "pair", "final_norm": "none",
}
"""What ``--reference-code-compat`` sets: the authors' ``get_neuron.py`` hooks ``act_fn`` (act(gate)
only), scores the response tokens' own positions against the token *at* each position, pools
(position, neuron) pairs per layer and uses the raw ``lm_head`` (no final norm)."""


@dataclass
class MUIConfig:
    """Everything that determines a MUI study's numbers (written to config.yaml)."""

    model: str = "smollm2-135m"
    task: str | TaskSpec = "arithmetic-gen"  # read once into ``spec``; config.yaml records the canonical text
    score: str = "contribution"
    activation: str = "mlp_act"
    final_norm: str = "none"
    response_level: bool = False
    threshold: str = "top-per-mille"
    threshold_value: float | None = None
    unit: str = "pair"
    ties: str = "include"
    score_token: str = "next"
    reference_code_compat: bool = False
    ig_steps: int = 10
    ig_joint_layers: bool = False
    sae: tuple[str, ...] = ()
    shots: str = "auto"
    chat: str = "auto"
    responses: str = "model"
    max_new_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    n_options: int = 4
    limit: int | float | None = 100  # N items, or a fraction below 1 of the task's items (runs/limits.py)
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    answer: str | None = None  # --answer of gen=PATH (config.yaml: task_spec.answer)
    fields: tuple[str, ...] = ()  # --field NAME=COLUMN of gen=PATH (config.yaml: task_spec.fields)
    lm_eval_data: str | None = None  # --lm-eval-data DIR of lm-eval:TASK
    allow_code_execution: bool = False  # lm-eval tasks whose metric runs the model's code
    on_bad_row: str = "skip"  # a malformed row of a local file: skip it (listed) or stop ("error")
    save_activations: tuple[str, ...] = ()  # --save-activations SPEC (mui/activations.py)
    edits: tuple[str, ...] = ()  # --edit SPEC: the responses and every scoring pass run under these
    # on_bad_row never changes a finished run's numbers ("error" stops at the first bad row), so a resume may change it
    volatile: tuple[str, ...] = field(default=("batch_size", "on_bad_row"), repr=False)

    def __post_init__(self) -> None:
        from whitebox_eval.mui.activations import POSITIONS as SAVE_POSITIONS, parse_activations
        from whitebox_eval.sae.feature_edits import refuse_last

        self.edits = parsed_edits(self.edits)  # a malformed spec: one line, here
        refuse_last(self.edits, "mui generates its responses and scores every response token")
        self._spec = TaskSpec.parse(self.task, GENERATION_TASKS, TASK_USAGE, fields=self.fields, answer=self.answer)
        self.task, self.limit = str(self._spec), checked(self.limit)
        if not self._spec.is_lm_eval:  # what took effect only: the options of the tasks that read them
            self.lm_eval_data = None
        self.allow_code_execution = self.allow_code_execution and (self._spec.is_lm_eval or bool(self._spec.record.runs_code))
        self.sae, self.edits = tuple(self.sae), tuple(self.edits)
        self.save_activations = tuple(s.text for s in parse_activations(self.save_activations, SAVE_POSITIONS))
        if self.reference_code_compat:
            want = REFERENCE_CODE_SETTINGS
            clash = {k: getattr(self, k) for k, v in want.items() if getattr(self, k) not in (v, MUIConfig.defaults()[k])}
            if clash:
                raise WhiteboxError("--reference-code-compat sets " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v
                                                                in want.items())
                                    + "; drop " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in clash.items()))
            if self.score not in ("contribution", "activation"):
                raise WhiteboxError("--reference-code-compat reproduces the authors' get_neuron.py: "
                                    "use --score contribution or activation")
            for k, v in want.items():
                setattr(self, k, v)

    @staticmethod
    def defaults() -> dict:
        return {f.name: f.default for f in dataclasses.fields(MUIConfig)}

    @property
    def spec(self) -> TaskSpec:
        """The task, read once (:class:`~whitebox_eval.tasks.spec.TaskSpec`)."""
        return self._spec

    def key_neuron_config(self) -> KeyNeuronConfig:
        from whitebox_eval.mui.keyneurons import KeyNeuronConfig

        method, value = threshold_setting(self.threshold, self.threshold_value)
        if self.score == "sae" and self.threshold == "top-per-mille":
            method, value = "top_fraction", None  # the SAE default: top-50 per layer (eq. 9)
        return KeyNeuronConfig(
            score=self.score, activation=self.activation, final_norm=self.final_norm,
            response_level=self.response_level, threshold=method, threshold_value=value, unit=self.unit,
            ties=self.ties, ig_steps=self.ig_steps, ig_joint_layers=self.ig_joint_layers, score_token=self.score_token,
        ).validate()

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["sae"], d["edits"] = list(self.sae), list(self.edits)
        d["stop"] = None if self.stop is None else list(self.stop)
        d["_volatile"] = list(d.pop("volatile"))
        for key in ("answer", "fields", "lm_eval_data", "allow_code_execution", "save_activations", "edits"):  # only when given
            if not d[key]:
                del d[key]
        d["task_spec"] = self.spec.to_config()
        d["suite"] = "mui"
        d["key_set_rule"] = self.key_set_rule()
        return d

    def key_set_rule(self) -> str:
        """Words for config.yaml: is this the paper's key-neuron rule?"""
        if self.reference_code_compat:
            return "authors' code (get_neuron.py): act(gate), token at p, pooled pairs; not eq. 2 as printed"
        unit = ("pooled (response token, neuron) pairs, eq. 8/10 (the paper's)" if self.unit == "pair"
                else "best score per neuron, exactly k per layer (not the paper's rule)")
        token = "next token, eq. 2 (the paper's)" if self.score_token == "next" else "token at p (authors' code)"
        return f"{unit}; scored against the {token}"
