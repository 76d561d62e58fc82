"""The explorer's data for a page: each run's items and its suite's views.

Every run gets the item table (:func:`whitebox_eval.runs.items.item_table`); a run whose suite's
record names ``views`` (``<suite>/views.py``) gets what they add, read from the run's files: per
item ``row[<suite>]`` (drawn by the record's ``script``), and ``items``/``methods`` where the suite
lays its items out itself. A run of a suite no record names (another tool's, or a plug-in not
registered in this process) shows its items alone.
"""

from __future__ import annotations

from typing import Any

from whitebox_eval.lazy import resolve
from whitebox_eval.report.rundata import RunData
from whitebox_eval.runs import RunFolder
from whitebox_eval.runs.items import item_table
from whitebox_eval import suites


def page_data(runs: list[RunData]) -> dict[str, Any]:
    """Every run's explorer data, in page order (``key`` matches the run's section id)."""
    out = []
    for i, run in enumerate(runs):
        samples = [s for s in RunFolder.open(run.path).read_samples() if isinstance(s, dict)]
        entry = {"key": f"run{i}", "id": run.run_id, "suite": run.suite, "model": run.model, "task": run.task}
        entry.update(suite_views(run, samples))
        if "items" not in entry:
            entry.update(item_table(samples))
        out.append(entry)
    return {"runs": out}


def suite_views(run: RunData, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The suite's view data for ``run`` ({} for a suite without item views)."""
    record = suites.SUITES.get(run.suite or "")
    if record is None or record.views is None:
        return {}
    return resolve(record.views)(run.path, run.results or {}, samples)


def scripts() -> list[tuple[str, str]]:
    """(package, file) of every registered suite's view script, in the records' order."""
    return [tuple(r.script.split(":", 1)) for r in suites.SUITES.values() if r.script]  # type: ignore[misc]
