"""``whitebox-eval compare --json``: the same comparison as the printed table, as one JSON
object a script can read, every number exact (floats as Python writes them, not rounded).

The object::

    {"inputs":  [{"label": "A", "title": ..., "path": ..., "run_id": ... (run folders)}, ...],
     "rows":    [{"task": ... (with an lm-eval file), "metric": ...,
                  "values": {"A": {"value": v, "interval": {...} | null}, ...}}, ...],
     "paired":  [{"a": "A", "b": "B", "n_shared": n, "only_a": n, "only_b": n,
                  "metrics": [{"metric", "mean_a", "mean_b", "test", "diff", "lo", "hi", "p_value",
                               "n", "b", "c", "significant", "gained", "lost"}, ...],
                  "notes": [...]}
                 | {"a": "A", "b": "B", "error": "why the items cannot be paired"}, ...],
     "notes":   [...]}

``diff`` is B - A; ``b`` / ``c`` (McNemar) count the items right only in B / only in A, and
``gained`` / ``lost`` list them. A number that is not finite is written as null (JSON has no NaN).
"""

from __future__ import annotations

import json
import math
from typing import Any

from whitebox_eval.report.lm_eval_results import LMEvalFile
from whitebox_eval.report.paired_runs import PairedComparison
from whitebox_eval.report.rundata import RunData
from whitebox_eval.report.side_by_side import _differing_n, _notes, build_columns, paired_sections


def _plain(value: Any) -> Any:
    """JSON-safe: non-finite floats become None, tuples lists, numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _paired(a: str, b: str, paired: PairedComparison | str) -> dict[str, Any]:
    if isinstance(paired, str):
        return {"a": a, "b": b, "error": paired}
    metrics = []
    for m in paired.metrics:
        test = m.test.as_dict()
        metrics.append({"metric": m.metric, "mean_a": m.mean_a, "mean_b": m.mean_b, **test,
                        **({"gained": m.gained, "lost": m.lost} if m.binary else {})})
    return {"a": a, "b": b, "n_shared": paired.n_shared, "only_a": paired.only_a, "only_b": paired.only_b,
            "metrics": metrics, "notes": list(paired.notes)}


def compare_json(inputs: list[RunData | LMEvalFile]) -> dict[str, Any]:
    """The comparison ``compare`` prints, as a JSON-ready dict (see the module docstring)."""
    columns, with_tasks = build_columns(inputs)
    described = []
    for c, x in zip(columns, inputs):  # one column per input, in order
        entry: dict[str, Any] = {"label": c.label, "title": c.title, "path": str(x.path)}
        if c.run is not None:
            entry["run_id"] = c.run.run_id
        described.append(entry)
    keys: list[tuple[str, str]] = []
    for c in columns:
        keys.extend(k for k in c.rows if k not in keys)
    rows = []
    for key in keys:
        values = {c.label: {"value": c.rows[key][0], "interval": c.rows[key][1]} for c in columns if key in c.rows}
        rows.append({**({"task": key[0]} if with_tasks else {}), "metric": key[1], "values": values})
    paired = [_paired(columns[0].label, label, p) for label, p in paired_sections(columns)]
    notes = _notes(columns, with_tasks) + _differing_n(columns, keys)
    return _plain({"inputs": described, "rows": rows, "paired": paired, "notes": notes})


def compare_json_text(inputs: list[RunData | LMEvalFile]) -> str:
    """:func:`compare_json` as indented, strict JSON text."""
    return json.dumps(compare_json(inputs), indent=2, allow_nan=False)
