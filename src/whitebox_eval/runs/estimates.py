"""Reading and printing the estimates of a results.json (the keys :mod:`whitebox_eval.stats` writes).

An estimate is a number ``name,filter`` (a fraction for accuracies, a mean, a difference)
with, beside it, ``name_ci,filter`` = [lo, hi], ``name_n,filter``, ``name_stderr,filter`` and
``name_ci_method,filter`` (:data:`whitebox_eval.stats.DERIVED_SUFFIXES`). Every command's
summary, ``report.html`` and ``compare`` read estimates with :func:`estimate_rows` /
:func:`interval` and word them with :func:`format_estimate`, so a number and its interval
are always shown together, on one row, the same way.

Runs written before every suite followed this contract may hold ``<name>_percent`` with
``<name>_ci_percent`` beside it (and the items in ``n``): :func:`estimate_rows` reads such a
pair as the estimate ``<name>`` in fractions, so older and newer runs line up row by row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from whitebox_eval.stats import DERIVED_SUFFIXES, Estimate, derived_key

LEGACY_PERCENT = "_percent"
"""Suffix of the percent values older runs wrote; their interval is ``<name>_ci_percent``, their n ``n``."""


def is_number(value: Any) -> bool:
    """A real number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_pair(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(is_number(v) for v in value)


def _lookup(key: str, where: tuple[Mapping[str, Any], ...]) -> Any:
    for m in where:
        if key in m:
            return m[key]
    return None


def _legacy_ci_key(key: str) -> str | None:
    name, _, filt = key.partition(",")
    if not name.endswith(LEGACY_PERCENT) or name.endswith("_ci" + LEGACY_PERCENT):
        return None
    return name[: -len(LEGACY_PERCENT)] + "_ci" + LEGACY_PERCENT + (f",{filt}" if filt else "")


def interval(key: str, *where: Mapping[str, Any]) -> dict | None:
    """``{lo, hi, n, method}`` of the estimate ``key``, read from the first mapping of ``where``
    that holds its ``_ci`` key (``n`` and ``method`` are None when not written); None when
    ``key`` has no interval."""
    ci = _lookup(derived_key(key, "ci"), where)
    if _is_pair(ci):
        return {"lo": float(ci[0]), "hi": float(ci[1]), "n": _lookup(derived_key(key, "n"), where),
                "method": _lookup(derived_key(key, "ci_method"), where)}
    return None


def _legacy_row(key: str, value: Any, values: Mapping[str, Any]) -> tuple[str, float, dict] | None:
    """An older ``<name>_percent`` with ``<name>_ci_percent`` beside it, as ``<name>`` in fractions."""
    legacy = _legacy_ci_key(key)
    ci = values.get(legacy) if legacy else None
    name, _, filt = key.partition(",")
    name = name[: -len(LEGACY_PERCENT)] + (f",{filt}" if filt else "")
    if not _is_pair(ci) or name in values:
        return None
    n = values.get(_n_key(key))
    return name, value / 100, {"lo": ci[0] / 100, "hi": ci[1] / 100, "n": n if is_number(n) else None, "method": None}


def _n_key(key: str) -> str:
    """The ``n`` beside ``key`` (``by_group.a.accuracy_percent`` -> ``by_group.a.n``)."""
    parent = key.partition(",")[0].rpartition(".")[0]
    return f"{parent}.n" if parent else "n"


def estimate_rows(values: Mapping[str, Any], *also: Mapping[str, Any]) -> list[tuple[str, Any, dict | None]]:
    """``(key, value, interval)`` for every entry of ``values``, in order.

    A number whose ``_ci`` = [lo, hi] is beside it (in ``values`` or, failing that, in one of
    ``also``, e.g. the top level of results.json for a headline metric) gets its
    :func:`interval`; its ``_ci``, ``_n``, ``_stderr`` and ``_ci_method`` keys are then not
    rows of their own. An older ``<name>_percent`` / ``<name>_ci_percent`` pair is the row
    ``<name>`` in fractions (its n from ``n`` beside it).
    """
    where = (values, *also)
    folded: set[str] = set()
    rows: dict[str, tuple[str, Any, dict | None]] = {}
    for key, value in values.items():
        if not is_number(value):
            continue
        found = interval(key, *where)
        if found is not None:
            rows[key] = (key, value, found)
            folded.update(derived_key(key, s) for s in DERIVED_SUFFIXES)
        elif (old := _legacy_row(key, value, values)) is not None:
            rows[key] = old
            folded.update({_legacy_ci_key(key), *([_n_key(key)] if old[2]["n"] is not None else [])})
    return [rows.get(k, (k, v, None)) for k, v in values.items() if k not in folded]


def format_number(value: Any, spec: str | None = None) -> str:
    """``value`` with the format ``spec`` (e.g. ``".1%"``); without one, floats get 4
    significant digits and ints stay whole. None is ``n/a``; non-numbers are ``str``."""
    if value is None:
        return "n/a"
    if not is_number(value):
        return str(value)
    if spec is not None:
        return format(value, spec)
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.4g}"
    return str(value)


def format_estimate(value: Any, ci: Mapping[str, Any] | None = None, spec: str | None = None, *,
                    n: bool = True, method: bool = True) -> str:
    """``0.4123 [0.3702, 0.4555] n=475 wilson`` (``spec`` ``".1%"``: ``41.2% [37.0%, 45.6%] ...``).

    ``value`` may be a :class:`whitebox_eval.stats.Estimate` (its interval is used). The
    bounds take ``spec`` without its width, so ``"6.1%"`` pads the value only. ``n`` and
    ``method`` leave out those words; without an interval the value is shown alone.
    """
    if isinstance(value, Estimate):
        value, ci = value.value, {"lo": value.lo, "hi": value.hi, "n": value.n, "method": value.method}
    text = format_number(value, spec)
    if ci is None or not is_number(value):
        return text
    inner = None if spec is None else spec.lstrip("0123456789")
    text += f" [{format_number(ci['lo'], inner)}, {format_number(ci['hi'], inner)}]"
    if n and ci.get("n") is not None:
        text += f" n={ci['n']}"
    if method and ci.get("method"):
        text += f" {ci['method']}"
    return text


def describe(results: Mapping[str, Any], key: str, spec: str | None = None, *, n: bool = True,
             method: bool = False) -> str:
    """The estimate ``key`` of ``results`` with its interval (:func:`format_estimate`);
    ``n/a`` when ``results`` lacks it."""
    if results.get(key) is None:
        return "n/a"
    return format_estimate(results[key], interval(key, results), spec, n=n, method=method)


def headline_lines(results: Mapping[str, Any], spec: str | None = None, width: int = 28) -> list[str]:
    """One line per headline metric, its interval on the same line: ``  key  value [lo, hi] n=.. method``."""
    head = results.get("headline")
    if not isinstance(head, Mapping):
        return []
    return [f"  {key:{width}s} {format_estimate(value, ci, spec)}"
            for key, value, ci in estimate_rows(head, results)]
