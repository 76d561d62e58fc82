"""Runs side by side: headline metrics with deltas, and for MUI runs the direction each
task moved (paper 001 sec. 3.3), each run against the first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from whitebox_eval.report.metrics import delta, estimate_rows
from whitebox_eval.report.rundata import RunData


@dataclass
class HeadlineRow:
    """One headline metric across runs (None where a run lacks it)."""

    metric: str
    values: list[Any]
    intervals: list[dict | None] = None  # type: ignore[assignment]  # [lo, hi] etc. where the run wrote one

    def __post_init__(self) -> None:
        if self.intervals is None:
            self.intervals = [None] * len(self.values)

    def deltas(self) -> list[float | None]:
        """Each run's value minus the first run's (None for the first and for non-numbers)."""
        first = self.values[0]
        return [None] + [delta(first, v) for v in self.values[1:]]


@dataclass
class MUIMove:
    """How a MUI task moved from the first run to another run of the same task."""

    task: str
    before_run: str
    after_run: str
    before: tuple[float, float]
    after: tuple[float, float]
    direction: str


def headline_rows(runs: list[RunData]) -> list[HeadlineRow]:
    """Union of the runs' headline metrics, in order of first appearance; a metric's
    interval keys (``acc_ci,x`` ...) are folded into its row's ``intervals``."""
    order: list[str] = []
    per_run = [{k: (v, ci) for k, v, ci in estimate_rows(run.headline, run.results or {})} for run in runs]
    for rows in per_run:
        order.extend(k for k in rows if k not in order)
    return [HeadlineRow(k, [rows.get(k, (None, None))[0] for rows in per_run],
                        [rows.get(k, (None, None))[1] for rows in per_run]) for k in order]


def mui_point(run: RunData) -> tuple[float, float] | None:
    """``(accuracy %, MUI %)`` of a finished MUI run, or None for other runs."""
    results = run.results or {}
    if run.suite != "mui":
        return None
    for acc_key, mui_key, scale in (("accuracy_percent", "mui_percent", 1.0), ("accuracy", "mui", 100.0)):
        acc, mui = results.get(acc_key), results.get(mui_key)
        if isinstance(acc, (int, float)) and isinstance(mui, (int, float)) \
                and not isinstance(acc, bool) and not isinstance(mui, bool):
            return float(acc) * scale, float(mui) * scale
    return None


def mui_moves(runs: list[RunData]) -> list[MUIMove]:
    """Direction from the first run to each later MUI run of the same task (both MUI runs)."""
    if len(runs) < 2:
        return []
    first = runs[0]
    before = mui_point(first)
    if before is None:
        return []
    from whitebox_eval.mui.utility_law import classify_direction  # light: numpy + scipy

    moves = []
    for run in runs[1:]:
        after = mui_point(run)
        if after is None or run.task != first.task:
            continue
        moves.append(MUIMove(task=str(first.task), before_run=first.run_id, after_run=run.run_id,
                             before=before, after=after,
                             direction=classify_direction(before, after).value))
    return moves


def skipped_mui_runs(runs: list[RunData]) -> list[str]:
    """Why later MUI runs got no direction (another task, or no results yet)."""
    if len(runs) < 2 or runs[0].suite != "mui":
        return []
    notes = []
    first = runs[0]
    for run in runs[1:]:
        if run.suite != "mui":
            continue
        if run.task != first.task:
            notes.append(f"{run.run_id}: task {run.task} differs from {first.run_id}'s task "
                         f"{first.task}; directions compare the same task only")
        elif mui_point(run) is None or mui_point(first) is None:
            notes.append(f"{run.run_id}: no accuracy/MUI results yet on one side")
    return notes
