"""Runs side by side: headline metrics with deltas, and the direction each run moved from the
first, for runs whose results.json says how such a move is named (``moves``).

``moves`` is part of the results contract, written by the suite that defines directions:
``{"axes": [x, y], "names": {"up,down": ..., "up,up": ..., "down,up": ..., "down,down": ...,
"unchanged": ...}, "note": ...}``. ``x`` and ``y`` are estimates of the run (headline or
top-level keys); a later run of the same task with the same ``moves`` moved from the first
run's point to its own, and the signs of the two changes name the move (``unchanged`` when
either does not change). The report knows no suite: all it needs is in results.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from whitebox_eval.report.metrics import delta
from whitebox_eval.report.rundata import RunData
from whitebox_eval.runs.estimates import estimate_rows, is_number

MOVES = "moves"
"""The results.json key that declares how moves between runs of one task are named."""


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
class Move:
    """How one task moved from the first run to another run of the same task."""

    task: str
    before_run: str
    after_run: str
    axes: tuple[str, str]
    before: tuple[float, float]
    after: tuple[float, float]
    direction: str
    note: str | None = None


def headline_rows(runs: list[RunData]) -> list[HeadlineRow]:
    """Union of the runs' headline metrics, in order of first appearance; a metric's
    interval keys (``acc_ci,x`` ...) are folded into its row's ``intervals``."""
    order: list[str] = []
    per_run = [{k: (v, ci) for k, v, ci in estimate_rows(run.headline, run.results or {})} for run in runs]
    for rows in per_run:
        order.extend(k for k in rows if k not in order)
    return [HeadlineRow(k, [rows.get(k, (None, None))[0] for rows in per_run],
                        [rows.get(k, (None, None))[1] for rows in per_run]) for k in order]


def move_spec(run: RunData) -> Mapping[str, Any] | None:
    """The run's ``moves`` declaration, or None when it has none (or a malformed one)."""
    spec = (run.results or {}).get(MOVES)
    if isinstance(spec, Mapping) and isinstance(spec.get("axes"), list) and len(spec["axes"]) == 2 \
            and isinstance(spec.get("names"), Mapping):
        return spec
    return None


def _point(run: RunData, axes: tuple[str, str]) -> tuple[float, float] | None:
    results = run.results or {}
    values = [run.headline.get(a, results.get(a)) for a in axes]
    return (float(values[0]), float(values[1])) if all(is_number(v) for v in values) else None


def direction(spec: Mapping[str, Any], before: tuple[float, float], after: tuple[float, float]) -> str:
    """The name ``spec`` gives the move ``before -> after`` (by the signs of its two changes)."""
    dx, dy = after[0] - before[0], after[1] - before[1]
    if dx == 0 or dy == 0:
        return str(spec["names"].get("unchanged", "unchanged"))
    key = f"{'up' if dx > 0 else 'down'},{'up' if dy > 0 else 'down'}"
    return str(spec["names"].get(key, key))


def moves(runs: list[RunData]) -> list[Move]:
    """The move from the first run to each later run of the same task with the same ``moves``."""
    if len(runs) < 2:
        return []
    first = runs[0]
    spec = move_spec(first)
    if spec is None:
        return []
    axes = (str(spec["axes"][0]), str(spec["axes"][1]))
    before = _point(first, axes)
    if before is None:
        return []
    out = []
    for run in runs[1:]:
        after = _point(run, axes)
        if move_spec(run) != spec or run.task != first.task or after is None:
            continue
        out.append(Move(str(first.task), first.run_id, run.run_id, axes, before, after,
                        direction(spec, before, after), spec.get("note")))
    return out


def skipped_moves(runs: list[RunData]) -> list[str]:
    """Why later runs that name moves as the first run does got no direction."""
    spec = move_spec(runs[0]) if len(runs) >= 2 else None
    if spec is None:
        return []
    first = runs[0]
    axes = (str(spec["axes"][0]), str(spec["axes"][1]))
    notes = []
    for run in runs[1:]:
        if move_spec(run) != spec:
            continue
        if run.task != first.task:
            notes.append(f"{run.run_id}: task {run.task} differs from {first.run_id}'s task "
                         f"{first.task}; directions compare the same task only")
        elif _point(run, axes) is None or _point(first, axes) is None:
            notes.append(f"{run.run_id}: no {axes[0]} / {axes[1]} results yet on one side")
    return notes
