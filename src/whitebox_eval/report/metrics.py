"""Summary metrics as rows: the headline first, then every other result flattened.

Estimates (a value with its interval) are read by :mod:`whitebox_eval.runs.estimates`;
this module shows every other value."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from whitebox_eval.runs.estimates import format_estimate, is_number
from whitebox_eval.runs.items import MAX_TEXT, cut

__all__ = ["MAX_TEXT", "cut"]  # the report's text cut, kept where its tables read it

MAX_LIST_ITEMS = 24
"""Longer lists are shown cut, with their length."""



def format_value(value: Any, max_items: int = MAX_LIST_ITEMS) -> str:
    """Plain text for a metric or field value: floats with 4 significant digits,
    lists cut after ``max_items``, None as an em dash. (The caller escapes it.)"""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        shown = ", ".join(format_value(v, max_items) for v in value[:max_items])
        more = f", \u2026 ({len(value)} items)" if len(value) > max_items else ""
        return cut(f"[{shown}{more}]")
    if isinstance(value, Mapping):
        return cut(json.dumps(value, ensure_ascii=False, default=str))
    return cut(str(value))


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, leaf)`` pairs of nested mappings; lists stay whole leaves."""
    if isinstance(value, Mapping) and value:
        rows: list[tuple[str, Any]] = []
        for key, inner in value.items():
            rows.extend(flatten(inner, f"{prefix}{key}."))
        return rows
    return [(prefix.rstrip("."), value)]


PAIRED_TESTS = "paired_tests"
"""The results.json key of :func:`whitebox_eval.stats.add_paired` (shown as its own table)."""


def format_cell(value: Any, ci: Mapping[str, Any] | None) -> str:
    """A table cell: an estimate with its interval on one line (:func:`format_estimate`),
    or any other value as :func:`format_value` shows it."""
    return format_estimate(value, ci) if ci is not None else format_value(value)


def metric_rows(results: Mapping[str, Any]) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """``(headline rows, other rows)``: the headline in its stored order, then the rest
    of ``results.json`` flattened to dotted keys (sorted as stored). ``paired_tests`` is
    left out (the report shows it as its own table)."""
    head = results.get("headline")
    headline = list(head.items()) if isinstance(head, Mapping) else []
    rest = flatten({k: v for k, v in results.items() if k not in ("headline", PAIRED_TESTS)})
    return headline, [(k, v) for k, v in rest if k]


def paired_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The paired tests of results.json as rows with a verdict in words.

    ``verdict`` is "significant at <alpha>" or "NOT significant: n is too small to tell
    this difference from chance" (p >= alpha), as :func:`whitebox_eval.stats.verdict` words it.
    """
    tests = results.get(PAIRED_TESTS)
    if not isinstance(tests, Mapping):
        return []
    rows = []
    for name, t in tests.items():
        if not isinstance(t, Mapping) or not is_number(t.get("p_value")):
            continue
        alpha = t.get("alpha", 0.05)
        significant = t["p_value"] < alpha
        rows.append({"name": str(name), **t, "verdict": f"significant at {alpha:g}" if significant else
                     "NOT significant: n is too small to tell this difference from chance"})
    return rows


def delta(a: Any, b: Any) -> float | None:
    """``b - a`` when both are finite numbers, else None."""
    if is_number(a) and is_number(b) and math.isfinite(a) and math.isfinite(b):
        return float(b) - float(a)
    return None


def format_delta(d: float | None) -> str:
    """A signed delta (``+0.05``), or an empty string when there is none."""
    return "" if d is None else f"{d:+.4g}"
