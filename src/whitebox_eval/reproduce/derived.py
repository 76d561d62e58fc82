"""Tests a claim needs that its child run does not write, computed from the child's own
samples with :mod:`whitebox_eval.stats` (the suites stay as they are).

- ``group_gap``: two groups of one run's samples (GAR forms, difficulties): permutation
  test of the difference of accuracies (002 fig. 2);
- ``stage_gap``: two stages of one span run (ID vs OOD, 003 Table 1): permutation test;
- ``paired_fields``: two per-sample fields of one stage (partial vs exact accuracy, 003
  Table 1): paired bootstrap;
- ``clustered``: token-level scores of correct vs wrong tokens, the sequence as the unit
  (cluster-robust t; 003 Table 2);
- ``rarefied_relative``: 001's correct-vs-incorrect MUI on the rarefied subsets, as the
  relative difference its margin is stated on (sec. 3.7);
- ``utility_law``: ``MUI = A ln(P) + B`` over several MUI runs with the suite's own fit
  (``whitebox-eval mui law``; 001 sec. 3.2): A with its t-interval.

Each returns the shape of :func:`whitebox_eval.reproduce.values.test` plus the values the
child reports for the two sides, so the report shows the child's numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.reproduce.values import Missing, at, record


class TooFew(Missing):
    """The statistic is undefined because a group is too small; ``groups`` holds the counts
    (a claim's ``enough_per_group`` precondition reads them)."""

    def __init__(self, message: str, groups: Mapping[str, int]):
        super().__init__(message)
        self.groups = dict(groups)


def _matches(sample: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    return all(sample.get(k) == v for k, v in where.items())


def _test_dict(t: stats.PairedTest, source: str) -> dict[str, Any]:
    return dict(record(t, source))


def group_gap(samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """Accuracy of samples matching ``spec["a"]`` minus those matching ``spec["b"]``
    (``field``: the 0/1 field, default ``correct``), permutation test over samples."""
    field = spec.get("field", "correct")
    a = [float(bool(s[field])) for s in samples if _matches(s, spec["a"])]
    b = [float(bool(s[field])) for s in samples if _matches(s, spec["b"])]
    if len(a) < 2 or len(b) < 2:
        raise Missing(f"groups too small to compare: {len(a)} vs {len(b)} samples")
    out = _test_dict(stats.permutation_test(a, b), f"samples.jsonl {field}: {_where(spec['a'])} vs {_where(spec['b'])}")
    out["arms"] = {"a": {"label": _where(spec["a"]), "k": int(sum(a)), "n": len(a), "value": float(np.mean(a))},
                   "b": {"label": _where(spec["b"]), "k": int(sum(b)), "n": len(b), "value": float(np.mean(b))}}
    return out


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


def clustered(samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """Token-level ``score`` (default ``rollout_scores``) of correct minus wrong tokens
    (``correct``, one 0/1 per token) in ``stage``, pooled as the child's test pools them, but
    with the sequence as the unit: cluster-robust t (:func:`whitebox_eval.stats.clustered_difference`;
    003 Table 2). ``groups`` counts the sequences holding each kind of token."""
    score, flag = spec.get("score", "rollout_scores"), spec.get("correct", "correct")
    values, good, seq = [], [], []
    n_good = n_bad = 0
    for s in samples:
        if s.get("stage") != spec["stage"] or s.get(score) is None:
            continue
        pairs = [(float(v), bool(c)) for v, c in zip(s[score], s[flag]) if v is not None and v == v]
        n_good += any(c for _, c in pairs)
        n_bad += any(not c for _, c in pairs)
        for v, c in pairs:
            values.append(v)
            good.append(c)
            seq.append(str(s["id"]))
    groups = {"sequences with a correct token": n_good, "sequences with a wrong token": n_bad}
    if not values or all(good) or not any(good) or len(set(seq)) < 3:
        raise TooFew(f"no clustered comparison: {n_good} sequences with a correct token, {n_bad} with a wrong one "
                     f"({len(set(seq))} sequences)", groups)
    t = stats.clustered_difference(values, good, seq)
    v, g = np.asarray(values), np.asarray(good)
    return {**_test_dict(t, f"samples.jsonl {spec['stage']} {score} by {flag}, clustered by sequence"),
            "side_a": float(v[g].mean()), "side_b": float(v[~g].mean()), "groups": groups, "tokens": int(v.size)}


def rarefied_relative(results: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """001 sec. 3.7 on the statistic's own scale: the child's correct-vs-incorrect test on
    rarefied subsets of r responses, as ``relative_diff`` = diff / mean of the two rarefied
    MUIs, its interval and standard error divided by the same mean (held fixed)."""
    t = at(results, spec["at"])
    if t.get("refused"):
        raise TooFew(f"the child run did not test it: {t['refused']}",
                     {"correct": int(t.get("n_correct", 0)), "incorrect": int(t.get("n_incorrect", 0))})
    a, b = float(t["mui_correct_at_r"]), float(t["mui_incorrect_at_r"])
    mean = (a + b) / 2
    if mean <= 0:
        raise Missing("both rarefied MUIs are 0")
    lo, hi = t["diff_ci"]
    return {"value": float(t["relative_diff"]), "lo": float(lo) / mean, "hi": float(hi) / mean,
            "se": float(t["diff_stderr"]) / mean, "p_value": float(t["p_value"]),
            "n": int(t["n_correct"]) + int(t["n_incorrect"]), "test": f"{t.get('test')}; jackknife interval / mean",
            "source": "/".join(map(str, spec["at"])) + "/relative_diff", "side_a": a, "side_b": b,
            "subset_size": int(t["subset_size"]),
            "groups": {"correct": int(t["n_correct"]), "incorrect": int(t["n_incorrect"])}}


def utility_law(folders: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    """A of the Utility Law fitted over ``folders`` (percent units, as the paper and
    ``mui law``), with its t-interval; also B, R^2 and the points. MUI is a union that grows
    with the items and tokens, so only runs of equal MUI settings are comparable: the fit takes
    the largest such group, and each run outside it is listed as left out with the settings
    that differ (a task run with more items or a longer budget than the rest)."""
    from whitebox_eval.errors import WhiteboxError
    from whitebox_eval.mui.over_runs import comparable_groups, fit_runs, mixed_settings
    from whitebox_eval.runs import RunFolder

    kept, *others = comparable_groups(folders)
    left = [f"{labels[i]} (settings differ from the fit's runs: "
            + "; ".join(mixed_settings([RunFolder.open(folders[kept[0]]), RunFolder.open(folders[i])])) + ")"
            for g in others for i in g]
    try:
        fit = fit_runs([folders[i] for i in kept], labels=[labels[i] for i in kept])
    except WhiteboxError as e:
        raise Missing(str(e) + (f"; left out: {'; '.join(left)}" if left else "")) from None
    f = fit.fit
    if f.a_ci is None:
        raise Missing(f"{f.n_points} points: the interval of A needs at least 3")
    return {"value": f.a, "lo": f.a_ci[0], "hi": f.a_ci[1], "p_value": None, "n": f.n_points,
            "test": "OLS t-interval of A (MUI = A ln(P) + B, percent units)", "source": "mui law over the runs",
            "b": f.b, "r2": f.r2, "points": [{"label": lab, "performance": p, "mui": m}
                                             for lab, p, m in zip(fit.labels, fit.performance, fit.mui)],
            "skipped": list(fit.skipped) + left}


SAMPLE_DERIVED = {"group_gap": group_gap, "stage_gap": stage_gap, "paired_fields": paired_fields,
                  "clustered": clustered}
RESULTS_DERIVED = {"rarefied_relative": rarefied_relative}


def compute(name: str, spec: Mapping[str, Any], results: Mapping[str, Any],
            samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The derived test ``name`` of one child run."""
    if name in SAMPLE_DERIVED:
        return SAMPLE_DERIVED[name](samples, spec)
    if name in RESULTS_DERIVED:
        return RESULTS_DERIVED[name](results, spec)
    raise Missing(f"unknown derived statistic {name!r}")
