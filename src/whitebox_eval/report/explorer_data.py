"""The data the interactive page's per-item views read, one JSON object for the whole page.

Per run: its items (every sample line; for GAR's intervention runs one item per example,
a method per stage), each item's predictions and correctness per method (the sample
viewer's :func:`~whitebox_eval.report.samples.scorers_of`), its numeric fields (to sort by)
and the helpers each suite's views draw with (:mod:`.explorer_views`, which also assembles
the page's data). Floats are rounded to 4 significant digits; attention rows travel as base64 float32 (:func:`f32`). The page embeds
the object as JSON text (:func:`embed`) and its script builds the views with ``textContent``.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from whitebox_eval.report.metrics import cut
from whitebox_eval.report.rundata import RunData
from whitebox_eval.report.samples import scorers_of
from whitebox_eval.runs.estimates import is_number

TEXT_CAP = 4000
"""Characters of an item's text kept for its view (the whole text stays in samples.jsonl)."""

SKIP_NUMBERS = {"doc_id", "index", "n_options"}


def num(x: Any) -> float | None:
    """``x`` to 4 significant digits; None for NaN, infinities and non-numbers."""
    if not is_number(x) or not math.isfinite(float(x)):
        return None
    return float(f"{float(x):.4g}")


def nums(values: Any) -> list[float | None]:
    return [num(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def f32(values: Any) -> str:
    """A float row as base64 little-endian float32 (exact for what the run stored)."""
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")


def embed(payload: Mapping[str, Any]) -> str:
    """``payload`` as JSON safe inside ``<script type=application/json>``: ``<``, ``>`` and ``&``
    written as ``\\u`` escapes, so no data string can close the element."""
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def item_table(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """``methods`` (scorer names, first seen order) and one ``items`` row per sample."""
    methods: list[str] = []
    rows = []
    for s in samples:
        row = item_row(s)
        for scorer in scorers_of(s):
            key = _method_key(scorer.name)
            if key not in methods:
                methods.append(key)
            row["pred"][key] = _shown(scorer.pred, s.get("labels"))
            row["ok"][key] = scorer.correct
        rows.append(row)
    return {"methods": methods, "items": rows}


def item_row(s: Mapping[str, Any]) -> dict[str, Any]:
    """The fields every item has: id, gold, text, numbers, and empty predictions."""
    doc = s.get("doc") if isinstance(s.get("doc"), Mapping) else {}
    text = doc.get("question") or s.get("question") or s.get("input") or s.get("prompt") or s.get("text") or ""
    gold = s.get("gold", s.get("target", s.get("label", s.get("answer"))))
    numbers = {k: num(v) for k, v in s.items() if k not in SKIP_NUMBERS and is_number(v) and num(v) is not None}
    return {"id": str(s.get("id", "")), "gold": _shown(gold, s.get("labels")), "text": cut(str(text), TEXT_CAP),
            "num": numbers, "pred": {}, "ok": {}}


def _method_key(name: str) -> str:
    """``qk head L3H1`` -> ``qk head`` (the filter keeps its name when heads differ between runs)."""
    return name.split(" L", 1)[0] if " head L" in name else name


def _shown(value: Any, labels: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and isinstance(labels, list) and 0 <= value < len(labels):
        return str(labels[value])
    return cut(value if isinstance(value, str) else json.dumps(value, default=str), 300)
