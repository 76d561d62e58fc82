"""GAR's configs (paper 002; the ``gar`` record's modes): the base every mode's config shares and
each mode's own, what planning builds without the studies (``gar/*_study.py``, ``gar/truth_heads.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from whitebox_eval.runs.config import config_dict

#: config.yaml's words for where interventions edit (``edit_at``; interventions module doc)
EDIT_POSITIONS = {
    "read": "the last prompt token E, where the answer's first-token probability is read",
    "pattern": "the last token of the pattern's attending role (Q->A: the stated answer A), as sec. 5 states it",
    "both": "the pattern's attending role and the last prompt token E",
}


@dataclass
class GARRun:
    """What every GAR mode's config holds (written to config.yaml with its ``mode``)."""

    MODE: ClassVar[str] = ""
    model: str = "smollm2-135m"
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    edits: tuple[str, ...] = ()  # --edit SPEC: every pass of the mode runs under these (recorded when given)
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def __post_init__(self) -> None:
        from whitebox_eval.command_options import parsed_edits

        self.edits = parsed_edits(self.edits)  # a malformed spec: one line, here

    def to_dict(self) -> dict:
        extra = {}
        if hasattr(self, "edit_at"):
            extra["edit_positions"] = EDIT_POSITIONS[getattr(self, "edit_at")]
        d = config_dict(self, "gar", mode=self.MODE, **extra)
        if not self.edits:  # recorded only when given, so earlier runs resume as before
            d.pop("edits", None)
        if d.get("elements") == "all":  # likewise: the element split's halves only when one is asked
            d.pop("elements")
        return d


@dataclass
class GARConfig(GARRun):
    """Everything that determines a GAR evaluation's numbers (written to config.yaml)."""

    tasks: str = "all"
    limit: int | float | None = None  # per task: N examples, or a fraction below 1 of its default set
    include_kr: bool = True
    rule: str = "chance"
    elements: str = "all"  # all, or one half of the element split (train / test, seeded by seed): gar.elements

    MODE: ClassVar[str] = "evaluate"


@dataclass
class GARAttributeConfig(GARRun):
    """EAP-IG head ranking per task and the heads the tasks share (sec. 4)."""

    MODE: ClassVar[str] = "attribute"
    tasks: str = "truth"
    limit: int | float | None = None  # per task: N examples, or a fraction below 1 of its default set
    steps: int = 5
    top: int = 10
    batch_size: int = 4


@dataclass
class GARHeadsConfig(GARRun):
    """The True/False-head study (secs. 4-5, App. E)."""

    tasks: str = "truth"
    limit: int | float | None = None  # per task: N examples, or a fraction below 1 of its default set
    steps: int = 5
    n_candidates: int = 10
    n_true: int = 2
    n_false: int = 2
    true_heads: str | None = None
    false_heads: str | None = None
    pattern: str = "Q->A"
    edit_at: str = "read"
    select_fraction: float = 0.5
    random_draws: int = 5
    inverse_draws: bool = True  # the inverse edit on each random head set too (stages invrand{d})
    probe_data: tuple[str, ...] = ()
    probe_limit: int | None = None
    probe_folds: int = 5
    on_bad_row: str = "skip"
    rule: str = "chance"
    batch_size: int = 4
    elements: str = "all"  # as GARConfig's

    MODE: ClassVar[str] = "truth-heads"

    @property
    def heads_given(self) -> bool:
        return self.true_heads is not None or self.false_heads is not None


@dataclass
class GARInterveneConfig(GARRun):
    """Strong / weak / knock-out interventions on chosen heads (sec. 5, fig. 4)."""

    tasks: str = "truth"
    limit: int | float | None = None  # per task: N examples, or a fraction below 1 of its default set
    heads: str = ""
    pattern: str = "V->E"
    edit_at: str = "read"
    rule: str = "chance"

    MODE: ClassVar[str] = "intervene"


@dataclass
class GARProbeConfig(GARRun):
    """App. E truth probe on chosen heads."""

    heads: str = ""
    probe_data: tuple[str, ...] = ()
    probe_limit: int | None = None
    probe_folds: int = 5
    random_draws: int = 5
    on_bad_row: str = "skip"

    MODE: ClassVar[str] = "probe"
