"""The suites, one record each: the one list that ``cli``, ``studies`` and ``reproduce`` read.

A :class:`Suite` names its command, and per mode its config dataclass and run function,
as ``"module:attribute"`` strings (:func:`whitebox_eval.lazy.resolve`), so ``--help`` and
planning import no suite; whether a mode shards its items over torchrun ranks; and its
work in units (one forward-sized step) computed from a config object, so every default is
the dataclass's own. :func:`run` runs (or resumes) a study of any suite and returns its
:class:`~whitebox_eval.runs.finished.StudyResult`.

Adding a suite is one record in :data:`SUITES` (DESIGN.md, "How to add a suite").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.lazy import resolve


@dataclass(frozen=True)
class Mode:
    """One way to run a suite: its config dataclass and run function (``module:attribute``)."""

    config: str
    run: str
    shards: bool = False  # splits its items over torchrun ranks (runs/distributed.py)


@dataclass(frozen=True)
class Suite:
    """One suite: its name (``studies.<name>``, a reproduce experiment's ``suite:``), what it
    is, its command (``module:attribute`` of a click command, None for a sub-command of
    another suite's), its modes (the first is the default) and its work in units."""

    name: str
    summary: str
    command: str | None
    modes: dict[str, Mode]
    work: Callable[[Any, str], tuple[int, float]]

    @property
    def default_mode(self) -> str:
        return next(iter(self.modes))

    def mode(self, name: str | None) -> Mode:
        """Mode ``name`` (None: the default); one line naming the modes otherwise."""
        key = name or self.default_mode
        if key not in self.modes:
            raise WhiteboxError(f"unknown {self.name} mode {name!r}; choose one of {', '.join(self.modes)}")
        return self.modes[key]

    @property
    def shards(self) -> bool:
        return any(m.shards for m in self.modes.values())

    def config(self, mode: str | None, settings: dict[str, Any]):
        """The mode's config object from ``settings`` (its field names; lists for tuples)."""
        cls = resolve(self.mode(mode).config)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "volatile"}
        unknown = sorted(set(settings) - set(fields))
        if unknown:
            raise WhiteboxError(f"unknown setting(s) {', '.join(unknown)} for {cls.__name__}; "
                                f"the settings are: {', '.join(sorted(fields))}")
        options = {k: tuple(v) if isinstance(v, list) and "tuple" in str(fields[k].type) else v
                   for k, v in settings.items()}
        return cls(**options)

    def estimate(self, mode: str | None, settings: dict[str, Any]) -> tuple[int, float]:
        """(items, units of work) of a study with ``settings``."""
        return self.work(self.config(mode, settings), mode or self.default_mode)


def register(record: Suite) -> Suite:
    """Add ``record`` to :data:`SUITES` at run time (a plug-in's suite): ``studies.<name>`` and
    reproduce's ``suite: <name>`` follow. (``whitebox-eval``'s commands are those of the
    records written in :data:`SUITES`.)"""
    if record.name in SUITES:
        raise WhiteboxError(f"a suite named {record.name!r} is registered already")
    if not record.modes:
        raise WhiteboxError(f"suite {record.name!r} has no mode")
    SUITES[record.name] = record
    return record


def suite(name: str) -> Suite:
    """The record of suite ``name``; one line naming the suites otherwise."""
    if name not in SUITES:
        raise WhiteboxError(f"unknown suite {name!r} (one of {', '.join(SUITES)})")
    return SUITES[name]


def run(name: str, mode: str | None, /, output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
        show_progress: bool | None = None, loaded=None, **settings: Any):
    """Run (or resume) one study of suite ``name`` and read its folder back; ``settings`` are
    the mode's config fields, ``loaded`` a model already loaded (its spec is the default model).
    ``name`` and ``mode`` are positional only: a config may have a field called ``mode`` (span's
    reinforcement mode), which then arrives in ``settings``."""
    from whitebox_eval.runs.finished import read

    record = suite(name)
    if loaded is not None and "model" not in settings:
        settings["model"] = loaded.spec
    cfg = record.config(mode, settings)
    folder = resolve(record.mode(mode).run)(cfg, output, run_id=run_id, resume=resume, loaded=loaded,
                                            show_progress=show_progress)
    return read(folder.path)


# --- work in units, from a config object -------------------------------------------------

def _items(cfg, unknown: int) -> int:
    """``cfg.limit``, else the rows of the task's local file, else ``unknown``."""
    if cfg.limit is not None:
        return int(cfg.limit)
    rows = _rows(None if cfg.spec.is_hub else cfg.spec.path)
    return rows if rows is not None else unknown


def _rows(path: str | None) -> int | None:
    """Rows of a data file or folder of CSVs (for a run without a limit)."""
    import csv

    if not path:
        return None
    p = Path(path).expanduser()
    files = sorted(p.glob("*.csv")) if p.is_dir() else [p]
    total = 0
    for f in files:
        if not f.is_file():
            return None
        with open(f, encoding="utf-8", errors="replace", newline="") as fh:
            if f.suffix == ".csv":
                total += max(0, sum(1 for _ in csv.reader(fh)) - (0 if "mmlu" in str(f) else 1))
            elif f.suffix == ".json" and fh.read(1) == "[":
                import json

                fh.seek(0)
                total += len(json.load(fh))
            else:
                total += sum(1 for line in fh if line.strip())
    return total


def _mcqa_work(cfg, mode: str) -> tuple[int, float]:
    n = _items(cfg, 500)
    methods = set(cfg.methods)
    passes = 1.0 + ("pa" in methods) + 0.3 * ("pride" in methods) + 0.5 * ("cloze" in methods) * 4
    if "ablation" in methods:
        passes += 1 + cfg.ablation_draws
    if cfg.item_views and methods & {"qk", "attention"}:  # the explorer's rows pass (mcqa/explorer.py)
        passes += 1
    return n, n * passes * (1 + 0.15 * cfg.shots)


def _formats_work(cfg, mode: str) -> tuple[int, float]:
    n = _items(cfg, 160)
    return n, n * (1 + 2 * cfg.n_samples * cfg.max_new_tokens / 16)


def _mui_work(cfg, mode: str) -> tuple[int, float]:
    n = int(cfg.limit or 100)
    return n, n * (4 + int(cfg.max_new_tokens or 64))  # None: the task's own budget


def _contamination_work(cfg, mode: str) -> tuple[int, float]:
    """Its MUI runs (every task at step 0 and each checkpoint), in mui's units, plus training
    (a step ~ 3 forwards of the batch; a cached training costs none)."""
    n = int(cfg.limit)
    points = 2 + len(cfg.checkpoints)
    per_run = n * (4 + int(cfg.max_new_tokens or 64))
    return n * len(cfg.tasks), per_run * len(cfg.tasks) * points + 3 * n * cfg.epochs * 16


def _masking_work(cfg, mode: str) -> tuple[int, float]:
    n = int(cfg.limit or 32)
    gen = int(cfg.max_new_tokens or 64) if cfg.generate else 1
    return n, n * (gen + len(cfg.ks) * len(cfg.eval_tasks) * (1 + cfg.random_draws) * (1 + gen / 8))


def _span_work(cfg, mode: str) -> tuple[int, float]:
    splits = 2 if cfg.split == "both" else 1
    units = cfg.limit * splits
    if cfg.finetune_examples:  # a training step ~ 3 forwards per example (a cached training costs none)
        units += cfg.limit * splits + 3 * cfg.finetune_examples * cfg.finetune.epochs
    if cfg.reinforce:
        units += cfg.key_samples + cfg.select_limit * (len(cfg.heads) * len(cfg.values) + 1)
        units += cfg.limit * (2 + cfg.random_draws)
    return cfg.limit * splits, units * (1 + cfg.shots)


def _gar_work(cfg, mode: str) -> tuple[int, float]:
    from whitebox_eval.gar.selection import select_tasks

    def count(tasks) -> int:  # limit examples per task, else each task's own 8 / 16 (gar.selection.task_examples)
        return sum(int(cfg.limit) if cfg.limit else (8 if t.is_kr else t.n_examples) for t in tasks)

    if mode == "evaluate":
        n = count(select_tasks(cfg.tasks, include_kr=cfg.include_kr))
        return n, n
    n = count(select_tasks(getattr(cfg, "tasks", "truth"), include_kr=False))
    probe = int(getattr(cfg, "probe_limit", None) or 300) * len(getattr(cfg, "probe_data", ()))
    steps, draws = getattr(cfg, "steps", 5), getattr(cfg, "random_draws", 5)
    return n + probe, n * (2 * steps + 8 + 5 * draws) + probe


_G = "whitebox_eval.gar."
SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("mcqa", "MCQA through select-and-copy heads (paper 000): baseline vs best QK / Attention head.",
          "whitebox_eval.mcqa.command:mcqa",
          {"study": Mode("whitebox_eval.mcqa.study:MCQAConfig", "whitebox_eval.mcqa.study:run_mcqa", shards=True)},
          _mcqa_work),
    Suite("formats", "First-token probabilities vs free generation (paper 004).", "whitebox_eval.mcqa.command:formats",
          {"study": Mode("whitebox_eval.mcqa.formats_study:FormatsConfig", "whitebox_eval.mcqa.formats_study:run_formats",
                         shards=True)},
          _formats_work),
    Suite("mui", "Model Utilization Index (paper 001): how much of the model a task uses.",
          "whitebox_eval.mui.command:command",
          {"study": Mode("whitebox_eval.mui.study:MUIConfig", "whitebox_eval.mui.study:run_mui")}, _mui_work),
    Suite("masking", "Paper 001's masking validation: key neurons masked vs random ones (mui masking).", None,
          {"study": Mode("whitebox_eval.mui.masking:MaskingConfig", "whitebox_eval.mui.masking:run_masking")},
          _masking_work),
    Suite("contamination", "Paper 001 sec. 3.4: fine-tune on a task's test items, then (accuracy, MUI) per checkpoint "
          "in and out of domain (Python and reproduce; examples/mui_contamination.py).", None,
          {"study": Mode("whitebox_eval.mui.contamination:ContaminationConfig",
                         "whitebox_eval.mui.contamination:run_contamination")},
          _contamination_work),
    Suite("span", "AttentionSpan (paper 003): algorithmic tasks with reference attention masks.",
          "whitebox_eval.attentionspan.command:command",
          {"study": Mode("whitebox_eval.attentionspan.study:SpanConfig", "whitebox_eval.attentionspan.study:run_span")},
          _span_work),
    Suite("gar", "GAR: compositional relational reasoning, its evaluation and its heads (paper 002).",
          "whitebox_eval.gar.command:command",
          {"evaluate": Mode(_G + "evaluate_study:GARConfig", _G + "evaluate_study:run_gar", shards=True),
           "attribute": Mode(_G + "attribute_study:GARAttributeConfig", _G + "attribute_study:run_gar_attribute"),
           "truth-heads": Mode(_G + "truth_heads:GARHeadsConfig", _G + "truth_heads:run_gar_heads"),
           "intervene": Mode(_G + "intervene_study:GARInterveneConfig", _G + "intervene_study:run_gar_intervene"),
           "probe": Mode(_G + "probe_study:GARProbeConfig", _G + "probe_study:run_gar_probe")},
          _gar_work),
)}
