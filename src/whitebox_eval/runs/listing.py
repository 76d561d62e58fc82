"""``whitebox-eval runs``: one line per run folder under a root."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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
    damage: list[str] = field(default_factory=list)  # what is wrong with the folder's files (empty: nothing)
    variant: list[str] = field(default_factory=list)  # what the run ran under beyond its model and task


def list_runs(root: Path | str) -> list[RunSummary]:
    """Summaries of the run folders directly under ``root``, oldest first: every folder with a
    config.yaml, samples.jsonl or results.json; ``damage`` says what in it cannot be read."""
    root = Path(root)
    if not root.is_dir():
        raise WhiteboxError(f"no runs folder at {root}; give the folder runs were written to")
    summaries = []
    for path in sorted(p for p in root.iterdir() if any((p / f).is_file() for f in (CONFIG_FILE, SAMPLES_FILE,
                                                                                     RESULTS_FILE))):
        damage: list[str] = []
        config: dict[str, Any] = {}
        if not (path / CONFIG_FILE).is_file():
            damage.append(f"{CONFIG_FILE} is missing")
        else:
            try:
                config = read_config(path)
            except (WhiteboxError, OSError, UnicodeDecodeError) as exc:
                damage.append(f"{CONFIG_FILE} is unreadable ({_first_line(exc)})")
        headline = headline_value = None
        results_path = path / RESULTS_FILE
        if results_path.is_file():
            try:
                results = json.loads(results_path.read_text(encoding="utf-8"))
            except (ValueError, OSError) as exc:
                damage.append(f"{RESULTS_FILE} is corrupted ({_first_line(exc)})")
                results = {}
            head = results.get("headline") if isinstance(results, dict) else None
            if isinstance(head, dict) and head:
                headline, headline_value = next(iter(head.items()))
        try:
            n_samples, bad = _count_samples(path / SAMPLES_FILE)
        except OSError as exc:
            n_samples, bad = 0, []
            damage.append(f"{SAMPLES_FILE} is unreadable ({_first_line(exc)})")
        if bad:
            damage.append(f"{SAMPLES_FILE} has {len(bad)} line(s) that are not samples (line {bad[0]}"
                          + (", ..." if len(bad) > 1 else "") + ")")
        summaries.append(RunSummary(
            id=path.name, path=path, suite=_str_or_none(config.get("suite")),
            model=_str_or_none(config.get("model")),
            task=_str_or_none(config.get("task", config.get("tasks"))),
            created=_str_or_none(config.get("created")),
            n_samples=n_samples, headline=headline, headline_value=headline_value, damage=damage,
            variant=run_variant(config)))
    summaries.sort(key=lambda s: (s.created or "", s.id))
    return summaries


def run_variant(config: dict[str, Any]) -> list[str]:
    """What a run's config.yaml says it ran under beyond its model and task, so an edited or
    adapted run is told from its plain twin: ``--edit`` specs, the ``--adapter`` (its folder's
    name and mode), a revision (``--model-arg revision=``, the hub commit read), other model
    args, and the SAEs a run scored with."""
    out = [f"edit {e}" for e in config.get("edits") or () if isinstance(config.get("edits"), list)]
    load = config.get("model_load") if isinstance(config.get("model_load"), dict) else {}
    adapter = load.get("adapter")
    if isinstance(adapter, dict) and adapter.get("path"):
        out.append(f"adapter {Path(str(adapter['path'])).name} ({adapter.get('mode', 'merge')})")
    args = load.get("model_args") if isinstance(load.get("model_args"), dict) else {}
    if args.get("revision") is not None:
        out.append(f"revision {args['revision']}")
    if load.get("model_commit"):
        out.append(f"commit {str(load['model_commit'])[:12]}")
    out += [f"{k}={v}" for k, v in args.items() if k != "revision"]
    if load.get("trust_remote_code"):
        out.append("trust_remote_code")
    sae = config.get("sae")
    if isinstance(sae, list) and sae:
        out.append("sae " + ",".join(str(s) for s in sae))
    return out


def _count_samples(path: Path) -> tuple[int, list[int]]:
    """The samples in a JSONL file (lines holding a JSON object) and the line numbers of the
    other lines; a half-written last line (no newline yet: a run killed mid-write) is neither."""
    if not path.is_file():
        return 0, []
    count, bad = 0, []
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.endswith(b"\n") or not line.strip():
                continue
            try:
                ok = isinstance(json.loads(line), dict)
            except ValueError:  # not JSON, or not UTF-8
                ok = False
            if ok:
                count += 1
            else:
                bad.append(number)
    return count, bad


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
