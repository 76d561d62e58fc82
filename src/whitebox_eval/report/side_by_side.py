"""The table ``whitebox-eval compare`` prints: run folders and lm-eval results files side by side.

Each input is a column (A, B, ...): a run folder's headline metrics, or an lm-eval
``results_*.json`` mapped onto our tasks and metrics (:mod:`.lm_eval_results`). With
run folders only, rows are metrics (as before); with an lm-eval file among the inputs,
rows are (task, metric), our run's task named as lm-eval names it (``hellaswag``,
``arc_challenge`` / ``arc_easy``, ``mmlu``), and an lm-eval file shows only the tasks
of the runs beside it (all its tasks when no run folder is given). Deltas are each
column minus column A; when some row lacks A but two later inputs have it, every row's
deltas are taken against the first input that has the row (header "X - first in row").
With run folders only, each later run is then compared with A item by item
(:mod:`.paired_runs`: paired tests and flips on the items both hold).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.finished import is_started
from whitebox_eval.report.moves import moves
from whitebox_eval.report.lm_eval_results import (
    MAPPING_NOTE, MMLU_SUBJECTS, LMEvalFile, find_results_files, lm_eval_rows, load_lm_eval_file)
from whitebox_eval.report.metrics import delta, format_cell, format_delta, format_value
from whitebox_eval.report.paired_runs import PairedComparison, paired_comparison, paired_lines
from whitebox_eval.report.rundata import RunData, load_run
from whitebox_eval.runs.estimates import estimate_rows
from whitebox_eval.runs.folder import RunFolder
from whitebox_eval.runs.samples_file import read_samples_file
from whitebox_eval.tasks.spec import TaskSpec

ARC_TASKS = ("arc_challenge", "arc_easy")


@dataclass
class Column:
    """One input of the comparison: its label, its header line and its rows."""

    label: str
    title: str
    rows: dict[tuple[str, str], tuple[Any, dict | None]]
    run: RunData | None = None
    notes: list[str] = field(default_factory=list)


def load_inputs(paths: list[Path]) -> list[RunData | LMEvalFile]:
    """Each path as a finished run folder or lm-eval results file(s); a folder holding
    ``results_*.json`` (at any depth, as ``lm_eval --output_path`` nests them) gives one
    input per file. Errors are one line saying what to give instead."""
    inputs: list[RunData | LMEvalFile] = []
    for path in paths:
        path = Path(path)
        if path.is_file() and path.suffix == ".json":
            inputs.append(load_lm_eval_file(path))
            continue
        if path.is_dir() and not is_started(path):
            files = find_results_files(path)
            if files:
                inputs.extend(load_lm_eval_file(f) for f in files)
                continue
        run = load_run(path, sample_cap=0)
        if run.results_error is not None:
            raise WhiteboxError(run.results_error)
        if run.results is None:
            raise WhiteboxError(f"{run.path} has no results.json yet: the run did not finish; "
                                "complete it with --resume before comparing")
        inputs.append(run)
    if len(inputs) < 2:
        raise WhiteboxError("compare needs at least two inputs (run folders or lm-eval results_*.json files)")
    return inputs


def run_task(run: RunData, lm_eval_tasks: set[str]) -> str:
    """A run's task as lm-eval names it: ``arc`` becomes ``arc_challenge`` / ``arc_easy``
    when its file path says which, or when the lm-eval files hold only one of them."""
    if not isinstance(run.config.get("task"), str):
        return str(run.task or "?")
    spec = TaskSpec.from_config(run.config)
    name = spec.lm_eval_task or spec.name
    if name == "arc":
        where = (spec.path or "").lower()
        named = [t for t in ARC_TASKS if t.split("_")[1] in where]
        present = [t for t in ARC_TASKS if t in lm_eval_tasks]
        if len(named) == 1:
            return named[0]
        if len(present) == 1:
            return present[0]
    return name


def mmlu_subjects(run: RunData) -> set[str] | None:
    """The MMLU subjects a run evaluated (its samples' ``doc.subject``, or the subject in
    the item id ``mmlu/<subject>/...``), or None when one is not an MMLU subject name."""
    found: set[str] = set()
    for s in RunFolder.open(run.path).read_samples():
        doc = s.get("doc") if isinstance(s.get("doc"), dict) else {}
        subject = doc.get("subject") or (str(s.get("id", "")).split("/")[1] if str(s.get("id", "")).count("/") >= 2 else None)
        if subject not in MMLU_SUBJECTS:
            return None
        found.add(subject)
    return found or None


def _label(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"#{i + 1}"


def build_columns(inputs: list[RunData | LMEvalFile]) -> tuple[list[Column], bool]:
    """The columns, and whether rows carry a task (an lm-eval file is among the inputs)."""
    lm_files = [x for x in inputs if isinstance(x, LMEvalFile)]
    with_tasks = bool(lm_files)
    lm_tasks = {task for f in lm_files for task, _ in lm_eval_rows(f)[0]}
    runs = [x for x in inputs if isinstance(x, RunData)]
    run_tasks = {run_task(x, lm_tasks) for x in runs}
    subjects: set[str] | None = None
    if lm_files and "mmlu" in run_tasks:  # lm-eval's MMLU over the subjects our runs evaluated
        per_run = [mmlu_subjects(x) for x in runs if run_task(x, lm_tasks) == "mmlu"]
        subjects = set().union(*per_run) if all(per_run) else None
    parsed = {id(f): lm_eval_rows(f, subjects) for f in lm_files}
    columns: list[Column] = []
    for i, x in enumerate(inputs):
        label = _label(i)
        if isinstance(x, RunData):
            task = run_task(x, lm_tasks) if with_tasks else ""
            rows = {(task, k): (v, ci) for k, v, ci in estimate_rows(x.headline, x.results or {})}
            columns.append(Column(label, f"{x.run_id}  ({x.suite or '?'} / {x.model or '?'} / {x.task or '?'})",
                                  rows, run=x))
            continue
        rows, notes = parsed[id(x)]
        held = sorted({t for t, _ in rows})
        if run_tasks:
            rows = {k: v for k, v in rows.items() if k[0] in run_tasks}
            if not rows:
                notes = [*notes, f"{label}: none of its tasks ({', '.join(held)}) is a task of the runs "
                                 f"({', '.join(sorted(run_tasks))})"]
        title = (f"{x.path}  (lm-eval {x.version or '?'} / {x.model or '?'} / "
                 f"{', '.join(held) if held else 'no tasks'})")
        columns.append(Column(label, title, rows, notes=list(notes)))
    return columns, with_tasks


def _differing_n(columns: list[Column], keys: list[tuple[str, str]]) -> list[str]:
    """Rows whose inputs measured different numbers of items (so not the same items)."""
    out = []
    for key in keys:
        ns = {c.label: c.rows[key][1]["n"] for c in columns
              if key in c.rows and c.rows[key][1] and c.rows[key][1].get("n") is not None}
        if len(set(ns.values())) > 1:
            shown = ", ".join(f"{label} n={n}" for label, n in ns.items())
            out.append(f"{' '.join(k for k in key if k)}: {shown}: not the same items, so the delta mixes "
                       "model and item differences")
    return out


def _notes(columns: list[Column], with_tasks: bool) -> list[str]:
    notes = [n for c in columns for n in c.notes]
    if not with_tasks:
        return notes
    notes.append(MAPPING_NOTE)
    notes.append("intervals: ours as each run wrote them (Wilson for accuracies); lm-eval's are value +- 1.96 "
                 "stderr (normal-approx), from the stderr it reports")
    for c in columns:
        style = c.run.config.get("prompt") if c.run is not None else None
        if c.run is not None and style not in (None, "lm-eval"):
            notes.append(f"{c.label} used --prompt {style}, not lm-eval's prompts: its numbers differ from "
                         "lm-eval's by design (rerun with --prompt lm-eval to compare like for like)")
    return notes


def _no_samples(column: Column) -> str | None:
    """Why a run's items cannot be paired, when its folder holds no per-item lines."""
    path = RunFolder.open(column.run.path).samples_path
    if not path.is_file():
        return (f"{column.label} ({column.run.run_id}) has no {path.name} (its per-item lines), "
                "so its items cannot be paired")
    if next(iter(read_samples_file(path)), None) is None:
        return f"{column.label} ({column.run.run_id}) has an empty {path.name}: no items to pair"
    return None


def paired_sections(columns: list[Column]) -> list[tuple[str, PairedComparison | str]]:
    """With run folders only: each later run paired with the first item by item, or the one
    line saying why it cannot be (a run without samples.jsonl, repeated ids)."""
    if any(c.run is None for c in columns):
        return []
    first = columns[0]
    first_missing = _no_samples(first)
    first_samples = [] if first_missing else list(RunFolder.open(first.run.path).read_samples())
    out: list[tuple[str, PairedComparison | str]] = []
    for c in columns[1:]:
        missing = first_missing or _no_samples(c)
        if missing:
            out.append((c.label, missing))
            continue
        try:
            out.append((c.label, paired_comparison(first_samples, RunFolder.open(c.run.path).read_samples(),
                                                   first.label, c.label)))
        except WhiteboxError as error:
            out.append((c.label, str(error)))
    return out


def compare_lines(inputs: list[RunData | LMEvalFile]) -> list[str]:
    """The aligned table ``compare`` prints, then notes (and the direction each later run
    moved from the first, for runs of one task whose results.json names moves)."""
    columns, with_tasks = build_columns(inputs)
    lines = [f"{c.label}: {c.title}" for c in columns] + [""]
    keys: list[tuple[str, str]] = []
    for c in columns:
        keys.extend(k for k in c.rows if k not in keys)
    if with_tasks:  # group by task, in order of first appearance
        order = list(dict.fromkeys(t for t, _ in keys))
        keys.sort(key=lambda k: order.index(k[0]))
    lead = ["task", "metric"] if with_tasks else ["metric"]
    # deltas against column A; a row A lacks but two later inputs have is taken against the first of them
    def _values(k):
        return [c.rows.get(k, (None, None))[0] for c in columns]
    rebased = any(v[0] is None and sum(x is not None for x in v) >= 2 for v in map(_values, keys))
    ref = "first in row" if rebased else columns[0].label
    header = lead + [c.label for c in columns] + [f"{c.label} - {ref}" for c in columns[1:]]
    table = [header]
    for key in keys:
        cells = [c.rows.get(key, (None, None)) for c in columns]
        at = next((i for i, (v, _) in enumerate(cells) if v is not None), 0) if rebased else 0
        first = cells[at][0]
        table.append(([key[0], key[1]] if with_tasks else [key[1]])
                     + [format_cell(v, ci) for v, ci in cells]
                     + [format_delta(delta(first, v)) if i > at else format_delta(None) for i, (v, _) in enumerate(cells) if i > 0])
    if len(table) == 1:
        return lines + ["no input has headline metrics"] + _notes(columns, with_tasks)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    n_lead = len(lead)
    for n, r in enumerate(table):
        cells = [f"{v:<{w}}" for v, w in zip(r[:n_lead], widths)] + \
                [f"{v:>{w}}" for v, w in zip(r[n_lead:], widths[n_lead:])]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    notes = _notes(columns, with_tasks) + _differing_n(columns, keys)
    if notes:
        lines += [""] + [f"note: {n}" for n in notes]
    for label, paired in paired_sections(columns):
        lines += [""] + (paired_lines(paired) if isinstance(paired, PairedComparison)
                         else [f"no item-by-item comparison of {label}: {paired}"])
    runs = [c.run for c in columns if c.run is not None]
    if len(runs) == len(columns):
        for move in moves(runs):
            lines += ["", f"direction on {move.task}: {move.direction} ({move.axes[0]} / {move.axes[1]}: "
                          f"{format_value(move.before[0])} / {format_value(move.before[1])} -> "
                          f"{format_value(move.after[0])} / {format_value(move.after[1])})"]
    return lines
