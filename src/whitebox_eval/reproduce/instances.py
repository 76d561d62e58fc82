"""What the plan decided about each paper before any child runs: plain data that assembly reads.

:func:`.plan.build` records, per paper, the models its children run on, which claims the
scale cannot test and why, the manipulation checks each claim is conditional on, the
experiments that run at the scale, the values a template is filled from (``{data.NAME}``,
``{data.NAME.name}``) and each table's ``ours`` specs filled with them (a column's ``vars``
too). ``{phase}`` and ``{setting}`` stay, for what each child's results fill in
(:func:`.assemble._child_env`); a template naming a value the plan does not know stays as
written (assembly then says which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CHILD_PLACEHOLDERS = ("phase", "setting")
"""The placeholders a child's results fill in, kept by the plan's filling."""


@dataclass(frozen=True)
class ClaimInstance:
    """One claim at the plan's scale: why the scale cannot test it (None: it can), and the
    manipulation checks it is conditional on (:func:`.plan.manipulations`), filled from the plan's values."""

    not_tested: str | None
    manipulations: list[dict[str, Any]]


@dataclass(frozen=True)
class TableInstance:
    """A table's ``ours`` specs filled: per row, one spec (None: an empty cell) or one per
    column; per ``ours_rows`` row, its specs."""

    rows: list[Any]
    our_rows: list[list[Any]]


@dataclass(frozen=True)
class PaperInstances:
    """One paper in the plan: the models its children run on (plan order), its claims and
    tables by id, the experiments that run at the scale, and the values its templates are filled
    from (``{phase}`` and ``{setting}`` left as they are)."""

    models: list[str]
    claims: dict[str, ClaimInstance]
    tables: dict[str, TableInstance]
    runs_at: list[str]
    env: dict[str, str]
