"""Tests a claim needs that its child run does not write, computed from the child's own
samples with :mod:`whitebox_eval.stats` (the suites stay as they are).

- ``group_gap``: two groups of one run's samples (GAR forms, difficulties): permutation
  test of the difference of accuracies (002 fig. 2);
- ``stage_gap``: two stages of one span run (ID vs OOD, 003 Table 1): permutation test;
- ``paired_fields``: two per-sample fields of one stage (partial vs exact accuracy, 003
  Table 1): paired bootstrap;
- ``t_interval``: a child's t-test (``mean_correct``, ``mean_error``, ``statistic``,
  ``p_value``) as a difference with the interval its t implies (003 Table 2);
- ``utility_law``: ``MUI = A ln(P) + B`` over several MUI runs with the suite's own fit
  (``whitebox-eval mui law``; 001 sec. 3.2): A with its t-interval.

Each returns the shape of :func:`whitebox_eval.reproduce.values.test` plus the values the
child reports for the two sides, so the report shows the child's numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from whitebox_eval import power, stats
from whitebox_eval.reproduce.values import Missing, at


def _matches(sample: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    return all(sample.get(k) == v for k, v in where.items())


def _test_dict(t: stats.PairedTest, source: str) -> dict[str, Any]:
    return {"value": t.diff, "lo": t.lo, "hi": t.hi, "p_value": t.p_value, "n": t.n, "test": t.test,
            "source": source}


def group_gap(samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """Accuracy of samples matching ``spec["a"]`` minus those matching ``spec["b"]``
    (``field``: the 0/1 field, default ``correct``), permutation test over samples."""
    field = spec.get("field", "correct")
    a = [float(bool(s[field])) for s in samples if _matches(s, spec["a"])]
    b = [float(bool(s[field])) for s in samples if _matches(s, spec["b"])]
    if len(a) < 2 or len(b) < 2:
        raise Missing(f"groups too small to compare: {len(a)} vs {len(b)} samples")
    return _test_dict(stats.permutation_test(a, b), f"samples.jsonl {field}: {_where(spec['a'])} vs {_where(spec['b'])}")


def _where(where: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in where.items())


def stage_gap(samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """``field`` (default ``exact``) of stage ``a`` minus stage ``b``: permutation test."""
    return group_gap(samples, {"a": {"stage": spec["a"]}, "b": {"stage": spec["b"]},
                               "field": spec.get("field", "exact")})


def paired_fields(samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """Mean of per-sample ``x`` minus ``y`` in ``stage``: paired bootstrap."""
    rows = [s for s in samples if s.get("stage") == spec["stage"]]
    if len(rows) < 2:
        raise Missing(f"stage {spec['stage']} has {len(rows)} samples")
    x = [float(s[spec["x"]]) for s in rows]
    y = [float(s[spec["y"]]) for s in rows]
    return _test_dict(stats.paired_bootstrap(x, y), f"samples.jsonl {spec['stage']}: {spec['x']} - {spec['y']}")


def t_interval(results: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """The child's two-group test at ``spec["at"]`` as ``mean_correct - mean_error`` with
    the normal interval its t statistic implies (SE = |difference / t|)."""
    t = at(results, spec["at"])
    keys = ("mean_correct", "mean_error", "statistic", "p_value")
    if any(t.get(k) is None for k in keys):
        missing = [k for k in keys if t.get(k) is None]
        raise Missing(f"the child's test has no {', '.join(missing)} "
                      f"({t.get('n_correct', 0)} correct, {t.get('n_error', 0)} error tokens)")
    diff = float(t["mean_correct"]) - float(t["mean_error"])
    se = abs(diff / float(t["statistic"])) if float(t["statistic"]) != 0 else float("inf")
    z = power._z(0.5 + stats.LEVEL / 2)
    return {"value": diff, "lo": diff - z * se, "hi": diff + z * se, "p_value": float(t["p_value"]),
            "n": int(t.get("n_correct", 0)) + int(t.get("n_error", 0)), "test": t.get("test"),
            "source": "/".join(map(str, spec["at"])), "a": float(t["mean_correct"]), "b": float(t["mean_error"])}


def utility_law(folders: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    """A of the Utility Law fitted over ``folders`` (percent units, as the paper and
    ``mui law``), with its t-interval; also B, R^2 and the points."""
    from whitebox_eval.errors import WhiteboxError
    from whitebox_eval.mui.compare import fit_runs

    try:
        fit = fit_runs(list(folders), labels=list(labels))
    except WhiteboxError as e:
        raise Missing(str(e)) from None
    f = fit.fit
    if f.a_ci is None:
        raise Missing(f"{f.n_points} points: the interval of A needs at least 3")
    return {"value": f.a, "lo": f.a_ci[0], "hi": f.a_ci[1], "p_value": None, "n": f.n_points,
            "test": "OLS t-interval of A (MUI = A ln(P) + B, percent units)", "source": "mui law over the runs",
            "b": f.b, "r2": f.r2, "points": [{"label": lab, "performance": p, "mui": m}
                                             for lab, p, m in zip(fit.labels, fit.performance, fit.mui)],
            "skipped": list(fit.skipped)}


SAMPLE_DERIVED = {"group_gap": group_gap, "stage_gap": stage_gap, "paired_fields": paired_fields}
RESULTS_DERIVED = {"t_interval": t_interval}


def compute(name: str, spec: Mapping[str, Any], results: Mapping[str, Any],
            samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The derived test ``name`` of one child run."""
    if name in SAMPLE_DERIVED:
        return SAMPLE_DERIVED[name](samples, spec)
    if name in RESULTS_DERIVED:
        return RESULTS_DERIVED[name](results, spec)
    raise Missing(f"unknown derived statistic {name!r}")
