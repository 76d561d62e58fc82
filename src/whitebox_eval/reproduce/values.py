"""The one reader of a child run's results.json: a number, its interval and its test.

Every number the reproduction reports comes from here, with its source: the child run
and the place in its results.json (``key``: an estimate ``name,filter`` at the top level
or in ``headline``; ``at``: a path of keys). An estimate's interval is the one
:mod:`whitebox_eval.stats` wrote beside it. Every test, the child's or one computed from
its samples (:mod:`.derived`, :mod:`.claim_checks`), is one :class:`Record`; an exact McNemar
test gets the exact interval its b and c imply (:func:`whitebox_eval.stats.mcnemar_interval`,
which agrees with its p-value), whatever interval the child wrote.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from whitebox_eval import stats

from whitebox_eval.runs.estimates import interval, is_number


class Record(TypedDict, total=False):
    """A test or estimate as claims read it: ``value`` (a difference, or an estimate), its 95%
    interval ``lo``-``hi``, ``p_value`` (None: the interval decides), ``n``, ``test`` (its
    name), ``source`` (where in the child run); ``se`` where the statistic has its own,
    McNemar's ``b`` and ``c``, and the two sides ``a`` and ``b_value`` where known."""

    value: float
    lo: float
    hi: float
    p_value: float | None
    n: int | None
    test: str | None
    source: str
    ci_method: str
    se: float
    b: int
    c: int


def record(t: stats.PairedTest | Mapping[str, Any], source: str) -> Record:
    """The :class:`Record` of a :class:`~whitebox_eval.stats.PairedTest` or of a paired-test
    dict as results.json holds it (``diff``, ``lo``/``hi`` or ``diff_ci``, ``p_value``...)."""
    d = t.as_dict() if isinstance(t, stats.PairedTest) else dict(t)
    lo, hi = (d["lo"], d["hi"]) if "lo" in d else d["diff_ci"]
    out: Record = {"value": float(d["diff"]), "lo": float(lo), "hi": float(hi),
                   "p_value": None if d.get("p_value") is None else float(d["p_value"]), "n": _test_n(d),
                   "test": d.get("test"), "source": source, "ci_method": d.get("ci_method") or d.get("diff_ci_method") or ""}
    if d.get("test") == "mcnemar_exact" and d.get("b") is not None and d.get("c") is not None and out["n"]:
        out["b"], out["c"] = int(d["b"]), int(d["c"])
        out["lo"], out["hi"] = stats.mcnemar_interval(out["b"], out["c"], int(out["n"]))
        out["ci_method"] = "exact_cp_product"
    if d.get("diff_stderr") is not None:
        out["se"] = float(d["diff_stderr"])
    return out


class Missing(Exception):
    """The child run has no such number (the reason is the message). ``beside``: what the claim's cell
    reports all the same (e.g. 001's ``off_format`` share, with its responses' classes as
    ``observations``, which :func:`whitebox_eval.reproduce.split` moves to the evidence), set by the
    statistic that refused."""

    beside: Mapping[str, Any] = {}


class Floor(Missing):
    """The child ran, but the statistic is undefined by its data: an arm that does not vary, an
    empty group (a floor; the verdict is *uninformative (floor)* with this reason)."""


class TooFew(Floor):
    """The statistic is undefined because a group is too small; ``groups`` holds the counts
    (a claim's ``enough_per_group`` precondition reads them)."""

    def __init__(self, message: str, groups: Mapping[str, int]):
        super().__init__(message)
        self.groups = dict(groups)


def at(results: Mapping[str, Any], path: Sequence[Any]) -> Any:
    """``results[p0][p1]...``; :class:`Missing` naming the first absent key."""
    node: Any = results
    for i, key in enumerate(path):
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and -len(node) <= key < len(node):
            node = node[key]
        else:
            where = "/".join(str(k) for k in path[:i]) or "results.json"
            raise Missing(f"no {key!r} in {where}")
    return node


def _estimate_key(results: Mapping[str, Any], key: str) -> dict[str, Any]:
    head = results.get("headline") or {}
    for where in (head, results):
        if key in where:
            value = where[key]
            if value is None or not is_number(value):
                name, _, rest = key.partition(",")
                why = where.get(f"{name}_reason,{rest}") if rest else where.get(f"{name}_reason")
                if why:
                    raise Floor(f"{key} is undefined in the child run: {why}")
                raise Missing(f"{key} is {value!r} in the child run")
            ci = interval(key, where, results, head)
            out = {"value": float(value), "source": key}
            if ci is not None:
                out.update(_honest(float(value), ci))
            return out
    raise Missing(f"no {key!r} in results.json")


def _honest(value: float, ci: Mapping[str, Any]) -> dict[str, Any]:
    """The child's interval, except a zero-width bootstrap at 0 or 1 (a run written before
    :func:`whitebox_eval.stats.bootstrap` stopped giving one): then Wilson over its n items,
    as stats gives now (``wilson_at_bound``)."""
    out = {"lo": ci["lo"], "hi": ci["hi"], "n": ci["n"], "method": ci["method"]}
    if ci["method"] == "bootstrap" and ci["lo"] == ci["hi"] == value and value in (0.0, 1.0) and ci.get("n"):
        n = int(ci["n"])
        out["lo"], out["hi"] = stats.wilson(int(value) * n, n)
        out["method"] = "wilson_at_bound"
    return out


def estimate(results: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """``{value, lo, hi, n, method, source}`` of a table cell or a claim's estimate:
    ``spec`` has ``key`` (an estimate) or ``at`` (a path; the interval is the ``_ci``
    beside the last key, when there is one). ``scale`` multiplies a value kept as a count
    or fraction, e.g. 100 for percent."""
    if "key" in spec:
        out = _estimate_key(results, spec["key"])
    else:
        path = list(spec["at"])
        value = at(results, path)
        if isinstance(value, list) and spec.get("index") is not None:
            value = value[spec["index"]]
        if value is None or not is_number(value):
            raise Missing(f"{'/'.join(map(str, path))} is {value!r} in the child run")
        out = {"value": float(value), "source": "/".join(map(str, path))}
        parent = at(results, path[:-1]) if len(path) > 1 else results
        if isinstance(parent, Mapping) and isinstance(path[-1], str):
            ci = interval(path[-1], parent)
            if ci is not None:
                out.update(_honest(out["value"], ci))
    return out


def test(results: Mapping[str, Any], spec: Mapping[str, Any]) -> Record:
    """A paired test of the child run: ``spec`` is ``{paired: NAME}`` (results.json
    ``paired_tests``) or ``{at: path}``; returns value (the difference), lo, hi, p_value,
    n, test (its name) and source."""
    if "paired" in spec:
        path = ["paired_tests", spec["paired"]]
    else:
        path = list(spec["at"])
    try:
        t = at(results, path)
    except Missing:
        parent = at(results, path[:-1]) if len(path) > 1 else results
        empty = [k for k, g in (parent.get("partitions") or {}).items() if isinstance(g, Mapping) and not g.get("n")] \
            if isinstance(parent, Mapping) else []
        if empty:
            raise Floor(f"the child run did not test it: no item in {', '.join(empty)} "
                          f"({'/'.join(map(str, path[:-1]))})") from None
        raise
    if isinstance(t, Mapping) and t.get("refused"):
        raise Missing(f"the child run did not test it: {t['refused']}")
    if not isinstance(t, Mapping) or "diff" not in t:
        raise Missing(f"{'/'.join(map(str, path))} is not a test in the child run")
    return record(t, "/".join(map(str, path)))


def _test_n(t: Mapping[str, Any]) -> int | None:
    """A test's n: its own, else the sum of its two groups' sizes (``n_<group>`` counts)."""
    if t.get("n") is not None:
        return t["n"]
    groups = [v for k, v in t.items() if k.startswith("n_") and isinstance(v, int)]
    return sum(groups) if len(groups) == 2 else None


def text(results: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """A non-numeric cell (``text: heads``: a list of [layer, head] as ``L.H, L.H``)."""
    value = at(results, list(spec["at"]))
    if spec.get("text") == "heads":
        if not isinstance(value, list):
            raise Missing(f"{'/'.join(map(str, spec['at']))} is {value!r}, not a list of heads")
        return ", ".join(f"{int(h[0])}.{int(h[1])}" for h in value) or "none"
    return str(value)
