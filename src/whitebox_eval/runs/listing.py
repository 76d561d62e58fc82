"""``whitebox-eval runs``: one line per run folder under a root."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.provenance import CONFIG_FILE, read_config

SAMPLES_FILE = "samples.jsonl"
RESULTS_FILE = "results.json"


@dataclass
class RunSummary:
    """One line of ``whitebox-eval runs``: what a run folder holds."""

    id: str
    path: Path
    suite: str | None
    model: str | None
    task: str | None
    created: str | None
    n_samples: int
    headline: str | None
    headline_value: Any = None




def list_runs(root: Path | str) -> list[RunSummary]:
    """Summaries of the run folders directly under ``root``, oldest first."""
    root = Path(root)
    if not root.is_dir():
        raise WhiteboxError(f"no runs folder at {root}; give the folder runs were written to")
    summaries = []
    for path in sorted(p for p in root.iterdir() if (p / CONFIG_FILE).is_file()):
        try:
            config = read_config(path)
        except WhiteboxError:
            config = {}
        headline = headline_value = None
        results_path = path / RESULTS_FILE
        if results_path.is_file():
            try:
                results = json.loads(results_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                results = {}
            head = results.get("headline") if isinstance(results, dict) else None
            if isinstance(head, dict) and head:
                headline, headline_value = next(iter(head.items()))
        summaries.append(RunSummary(
            id=path.name, path=path, suite=_str_or_none(config.get("suite")),
            model=_str_or_none(config.get("model")),
            task=_str_or_none(config.get("task", config.get("tasks"))),
            created=_str_or_none(config.get("created")),
            n_samples=_count_lines(path / SAMPLES_FILE),
            headline=headline, headline_value=headline_value))
    summaries.sort(key=lambda s: (s.created or "", s.id))
    return summaries


def _count_lines(path: Path) -> int:
    """Complete lines of a JSONL file (a half-written tail has no newline yet)."""
    if not path.is_file():
        return 0
    count = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            count += block.count(b"\n")
    return count


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
