"""How long a child run takes, estimated before it starts (for the printed plan).

Each suite's work is counted in *units* (one forward-sized step: a prompt scored, a token
generated, an example attributed) from its settings; a unit costs :data:`RATES` seconds,
measured per bundled model on 2 CPU cores (``benchmarks/reproduce_timing.py`` writes the
measured costs to ``benchmarks/results/reproduce_timing.md``). A model without a
measured rate gets SmolLM2's times :data:`UNKNOWN_MODEL_FACTOR`.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

BASIS = "on 2 CPU cores, from per-item costs measured there; a GPU is far faster"

#: seconds per unit of work, per suite (or "suite mode"), on 2 CPU cores (SmolLM2-135M): the
#: medians of benchmarks/results/reproduce_timing.md (reproduce all, quick scale, 2026-11-26)
RATES: dict[str, float] = {
    "mcqa": 0.35, "formats": 0.25, "mui": 0.02, "masking": 0.17, "span": 0.095, "gar": 0.17,
    "gar truth-heads": 0.04,
}
#: the other bundled model's time relative to SmolLM2-135M, measured on the same runs (its
#: per-paper minutes over SmolLM2's: 1.08; per suite 0.9-1.7)
MODEL_FACTOR: dict[str, float] = {"smollm2-135m": 1.0, "gemma3-270m": 1.1}
UNKNOWN_MODEL_FACTOR = 10.0

GAR_TASKS = 384 + 7  # the 384 GAR tasks and the knowledge-recall sub-problems (--tasks all)
GAR_TRUTH_TASKS = 3  # --tasks truth


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _rows(path: str | None) -> int | None:
    """Rows of a data file or folder of CSVs (for a run without --limit)."""
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


def _items(settings: dict[str, Any], default: int) -> int:
    limit = settings.get("limit")
    if limit is not None:
        return int(limit)
    from whitebox_eval.tasks.spec import TaskSpec

    path = TaskSpec.parse(str(settings.get("task", ""))).path if settings.get("task") else None
    rows = _rows(None if path is None or path.startswith("hf:") else path)
    return rows if rows is not None else default


def _units(suite: str, mode: str | None, s: dict[str, Any]) -> tuple[int, float]:
    """(items, units of work) of one study from its settings."""
    if suite == "mcqa":
        n = _items(s, 500)
        methods = set(s.get("methods") or ("baseline", "qk", "attention", "lens", "pride", "pa"))
        passes = 1.0 + ("pa" in methods) + 0.3 * ("pride" in methods) + 0.5 * ("cloze" in methods) * 4
        if "ablation" in methods:
            passes += 1 + int(s.get("ablation_draws", 5))
        return n, n * passes * (1 + 0.15 * int(s.get("shots", 0)))
    if suite == "formats":
        n = _items(s, 160)
        return n, n * (1 + 2 * int(s.get("n_samples", 20)) * int(s.get("max_new_tokens", 16)) / 16)
    if suite == "mui":
        n = int(s.get("limit") or 100)
        return n, n * (4 + int(s.get("max_new_tokens") or 64))
    if suite == "masking":
        n = int(s.get("limit") or 32)
        ks = len(s.get("ks") or (1, 2, 4, 8, 16))
        evals = len(s.get("eval_tasks") or ("arithmetic-gen", "ssd"))
        gen = int(s.get("max_new_tokens") or 64) if s.get("generate", True) else 1
        return n, n * (gen + ks * evals * (1 + int(s.get("random_draws", 5))) * (1 + gen / 8))
    if suite == "span":
        n = int(s.get("limit") or 100)
        splits = 2 if s.get("split") == "both" else 1
        units = n * splits
        if s.get("reinforce"):
            grid = len(s.get("heads") or (5, 10, 20)) * len(s.get("values") or (0.3, 1.0))
            units += int(s.get("key_samples", 30)) + int(s.get("select_limit", 50)) * (grid + 1)
            units += n * (2 + int(s.get("random_draws", 5)))
        return n * splits, units * (1 + int(s.get("shots", 0)))
    if suite == "gar":
        per_task = int(s.get("limit") or 8)
        if (mode or "evaluate") == "evaluate":
            selection = str(s.get("tasks", "all"))  # gar's --tasks: a group name or ';'-separated task ids
            named = {"all": GAR_TASKS, "generation": 192, "classification": 192, "kr": 7, "truth": GAR_TRUTH_TASKS}
            n = per_task * (named[selection] if selection in named else
                            len([t for t in selection.split(";") if t.strip()]))
            return n, n
        n = per_task * GAR_TRUTH_TASKS
        probe = int(s.get("probe_limit") or 300) * len(s.get("probe_data") or ())
        return n + probe, n * (2 * int(s.get("steps", 5)) + 8 + 5 * int(s.get("random_draws", 5))) + probe
    return 1, 1.0


def estimate(suite: str, mode: str | None, model: str, settings: dict[str, Any]) -> tuple[int, float]:
    """(items, estimated seconds) of a child run on ``model``."""
    items, units = _units(suite, mode, settings)
    factor = MODEL_FACTOR.get(model, UNKNOWN_MODEL_FACTOR)
    rate = RATES.get(f"{suite} {mode}", RATES.get(suite, 0.1))
    return items, units * rate * factor + (5.0 if math.isfinite(units) else 0.0)
