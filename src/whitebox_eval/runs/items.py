"""A run's samples as items: what the report's explorer and sample viewer read of them.

Per sample: the scorers it records (:func:`scorers_of`: each way the run picked an answer,
its prediction and whether it is right), and its row (:func:`item_row`, :func:`item_table`:
id, gold, text, numbers to sort by, each method's prediction and correctness). The helpers
each suite's explorer views draw with (``<suite>/views.py``, named by its record) are here
too: :func:`num` (4 significant digits), :func:`nums`, :func:`f32` (a float row as base64
float32), :func:`array` (a run's array, memory-mapped) and :func:`cut`.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.runs.estimates import is_number

MAX_TEXT = 2000
"""Longer text values are cut (with a note) in tables and the sample viewer."""
GOLD_KEYS = ("gold", "target", "label", "answer")
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


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` shortened to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\u2026 [{len(text) - limit} more characters]"


def array(folder: Path, name: str):
    """``folder/arrays/<name>.npy`` memory-mapped; None when absent or unreadable."""
    path = Path(folder) / "arrays" / f"{name}.npy"
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False) if path.is_file() else None
    except (OSError, ValueError):
        return None


@dataclass
class Scorer:
    """One way the run picked an answer for a sample."""

    name: str
    pred: Any
    scores: Sequence[Any] | Mapping[str, Any] | None = None
    correct: bool | None = None


def scorers_of(sample: Mapping[str, Any]) -> list[Scorer]:
    """The scorers a sample records, in a stable order (baseline first)."""
    gold = sample.get("gold")
    found: list[Scorer] = []
    if "pred_baseline" in sample:
        found.append(Scorer("baseline", sample["pred_baseline"], sample.get("letter_logits")))
    for key, value in sample.items():
        if key.endswith("_head") and isinstance(value, Mapping) and "pred" in value:
            head = value.get("head")
            where = f" L{head[0]}H{head[1]}" if isinstance(head, list) and len(head) == 2 else ""
            found.append(Scorer(f"{key[:-5]} head{where}", value["pred"], value.get("scores")))
    for key, value in sample.items():
        if key.startswith("pred_") and key != "pred_baseline":
            found.append(Scorer(key[5:], value))
    for key, name in (("cloze_loglik", "cloze"), ("cloze_loglik_norm", "cloze (length-normalised)")):
        scores = sample.get(key)
        if isinstance(scores, list) and scores and all(is_number(x) for x in scores):
            found.append(Scorer(name, max(range(len(scores)), key=lambda j: finite(scores[j])), scores))
    if "prediction" in sample:
        found.append(Scorer("model", sample["prediction"], sample.get("probs")))
    elif "predicted" in sample or "response" in sample:
        text = sample.get("predicted", sample.get("response"))
        judged = sample.get("correct") if isinstance(sample.get("correct"), bool) else None
        found.append(Scorer("model", text, None, judged))
    for scorer in found:
        if scorer.correct is None:
            scorer.correct = matches(scorer.pred, gold if "gold" in sample else gold_of(sample))
    return found


def gold_key(sample: Mapping[str, Any]) -> str | None:
    return next((k for k in GOLD_KEYS if k in sample), None)


def gold_of(sample: Mapping[str, Any]) -> Any:
    key = gold_key(sample)
    return None if key is None else sample[key]


def matches(pred: Any, gold: Any) -> bool | None:
    if pred is None or gold is None:
        return None
    if is_number(pred) and is_number(gold):
        return pred == gold
    if isinstance(pred, str) and isinstance(gold, str):
        return pred.strip() == gold.strip()
    return None


def finite(x: Any) -> float:
    return float(x) if is_number(x) and math.isfinite(x) else -math.inf
