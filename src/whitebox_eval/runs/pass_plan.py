"""A study's passes stated up front, so its progress says ``pass k of N`` and how long the
whole study has left, not only the pass at hand.

A study calls :func:`plan_passes` with its run folder and ``(pass name, items)`` in the order
it will run them (each suite's ``study.py`` says which passes its settings run). Each
:func:`~whitebox_eval.runs.passes.run_pass` of that folder then prints, when it starts,
``pass 2 of 5: mcqa perm, 500 items; overall about 3:10 left``, and its progress lines carry
``pass 2 of 5`` and the overall estimate. The estimate is the study's time so far per item
computed, times the items still to compute (this pass's rest and every later pass; items a
resumed run finds done are not counted on either side). A pass the plan does not name (a
study's optional extra) runs as before, without ``k of N``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from whitebox_eval.runs.progress import duration, log_line


@dataclass
class PassPlan:
    """The passes of one run folder, in order, with the items each computes."""

    folder: Path
    passes: list[tuple[str, int]]
    clock: Callable[[], float] = time.monotonic
    started: float = 0.0
    todo: dict[str, int] = field(default_factory=dict)  # items each pass still computes (planned: all)
    finished: set[str] = field(default_factory=set)
    current: str | None = None

    def __post_init__(self) -> None:
        self.started = self.clock()
        self.todo = {name: n for name, n in self.passes}

    def position(self, name: str) -> tuple[int, int] | None:
        names = [n for n, _ in self.passes]
        return (names.index(name) + 1, len(names)) if name in names else None

    def label(self, name: str) -> str | None:
        at = self.position(name)
        return None if at is None else f"pass {at[0]} of {at[1]}"

    def begin(self, name: str, n_todo: int) -> str | None:
        """Pass ``name`` starts with ``n_todo`` items to compute: the line that says so."""
        if self.position(name) is None:
            return None
        self.todo[name] = n_todo
        self.current = name
        left = self.left(0.0)
        return f"{self.label(name)}: {name}, {n_todo} items to compute" + (f"; overall about {left} left" if left else "")

    def end(self, name: str) -> None:
        self.finished.add(name)
        self.current = None

    def left(self, fraction: float) -> str | None:
        """The study's time left, with ``fraction`` of the current pass done; None before any item."""
        done = sum(self.todo[n] for n in self.finished)
        current = self.todo.get(self.current, 0) if self.current else 0
        done_now = done + fraction * current
        if done_now <= 0:
            return None
        total = sum(self.todo.values())
        elapsed = self.clock() - self.started
        return duration(elapsed / done_now * max(total - done_now, 0.0))

    def after(self, done: int, total: int | None, elapsed: float) -> str:
        """What a progress line of the current pass adds: the overall estimate."""
        left = self.left(done / total if total else 0.0)
        return f", overall about {left} left" if left else ""


_PLAN: PassPlan | None = None


def plan_passes(folder, passes: Sequence[tuple[str, int]], clock: Callable[[], float] = time.monotonic) -> PassPlan:
    """State the passes the study of ``folder`` (a RunFolder or its path) will run, in order,
    as ``(pass name, items)``; passes with no items are left out."""
    global _PLAN
    path = Path(getattr(folder, "path", folder)).resolve()
    _PLAN = PassPlan(path, [(str(n), int(k)) for n, k in passes if int(k) > 0], clock)
    log_line("plan: " + ", ".join(f"{n} ({k} items)" for n, k in _PLAN.passes))
    return _PLAN


def plan_of(folder) -> PassPlan | None:
    """The plan stated for ``folder``, if any."""
    path = Path(getattr(folder, "path", folder)).resolve()
    return _PLAN if _PLAN is not None and _PLAN.folder == path else None


def extend_plan(folder, passes: Sequence[tuple[str, int]]) -> PassPlan:
    """Add passes a study learns of as it goes (span's evaluation of the setting it chose):
    N grows, the passes so far and the time they took are kept."""
    plan = plan_of(folder)
    if plan is None:
        return plan_passes(folder, passes)
    for name, n in passes:
        if int(n) > 0 and plan.position(str(name)) is None:
            plan.passes.append((str(name), int(n)))
            plan.todo[str(name)] = int(n)
    log_line("plan extended: " + ", ".join(f"{n} ({k} items)" for n, k in passes if int(k) > 0))
    return plan
