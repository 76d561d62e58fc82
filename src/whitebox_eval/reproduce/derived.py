"""Tests a claim needs that its child run does not write, computed from the child's own
samples with :mod:`whitebox_eval.stats` (the suites stay as they are).

- ``group_gap``: two groups of one run's samples (GAR forms, difficulties): permutation
  test of the difference of accuracies (002 fig. 2);
- ``stage_gap``: two stages of one span run (ID vs OOD, 003 Table 1): permutation test;
- ``paired_fields``: two per-sample fields of one stage (partial vs exact accuracy, 003
  Table 1): paired bootstrap;
- ``clustered``: token-level scores of correct vs wrong tokens, the sequence as the unit
  (cluster-robust t; 003 Table 2);
- ``paired_samples``, ``length_gap`` and ``two_tests`` (below).

They are the general statistics of :mod:`.vocabulary`; a suite's own (read-backs of its arrays,
fits over its runs) are in its package, named by its record's ``statistics``.
Each returns the shape of :func:`whitebox_eval.reproduce.values.test` plus the values the
child reports for the two sides, so the report shows the child's numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.reproduce.values import Missing, TooFew, at, record


def _matches(sample: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    return all(sample.get(k) == v for k, v in where.items())


def _test_dict(t: stats.PairedTest, source: str) -> dict[str, Any]:
    return dict(record(t, source))


def _arm(label: str, rows: Sequence[Mapping[str, Any]], values: Sequence[float],
         samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One arm of per-item values, keyed by item; a 0/1 arm (an answer right or wrong) also carries
    its items' answer keys, for its uninformed level (:mod:`.chance`). A continuous share that is
    not a probability of the answer (003's per-token partial accuracy) has no such level."""
    from whitebox_eval.reproduce.claim_checks import answers_for, arm_of, item_id

    arm = arm_of(label, {item_id(s): float(v) for s, v in zip(rows, values)})
    if "k" in arm:
        key = answers_for(rows, samples)
        if key:
            arm["answers"] = key
    return arm


def group_gap(samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """Accuracy of samples matching ``spec["a"]`` minus those matching ``spec["b"]``
    (``field``: the 0/1 field, default ``correct``), permutation test over samples."""
    from whitebox_eval.reproduce.claim_checks import item_id

    field = spec.get("field", "correct")
    rows_a = [s for s in samples if _matches(s, spec["a"])]
    rows_b = [s for s in samples if _matches(s, spec["b"])]
    a = [float(bool(s[field])) for s in rows_a]
    b = [float(bool(s[field])) for s in rows_b]
    if len(a) < 2 or len(b) < 2:
        raise Missing(f"groups too small to compare: {len(a)} vs {len(b)} samples")
    out = _test_dict(stats.permutation_test(a, b), f"samples.jsonl {field}: {_where(spec['a'])} vs {_where(spec['b'])}")
    out["scheme"] = {"test": "permutation of group labels", "permutations": stats.BOOTSTRAP_RESAMPLES,
                     "seed": stats.SEED, "interval": "percentile bootstrap per group, seed + 1"}
    out["arms"] = {}
    for side, rows, vals in (("a", rows_a, a), ("b", rows_b, b)):
        arm = _arm(_where(spec[side]), rows, vals, samples)
        if spec.get("strata"):
            arm["strata"] = {item_id(s): stratum_of(s, spec["strata"]) for s in rows}
        out["arms"][side] = arm
    if spec.get("strata"):
        out["stratified"] = stratified_gap(rows_a, a, rows_b, b, spec["strata"])
    return out


def stratum_of(sample: Mapping[str, Any], strata: Mapping[str, Any]) -> str:
    """A sample's stratum: its ``field``, with each ``strip`` pattern (a regular expression) removed."""
    import re

    value = str(sample.get(strata["field"]))
    for pattern in strata.get("strip", ()):
        value = re.sub(pattern, "", value)
    return value.strip()


LENGTH_BINS = 4
"""A task's length bins, where its items have a length and the claim declares it: the quartiles of
its items' lengths (fewer bins when fewer distinct lengths)."""


def length_bins(lengths: Sequence[Any], bins: int = LENGTH_BINS) -> list[str]:
    """Each item's length bin ``lo-hi`` (both ends included): the items' distinct lengths when at most
    ``bins``, else cut at the quantiles of the lengths (equal-count bins as far as ties allow); an item
    without a length (None) is in the bin ``no length``."""
    known = [v is not None for v in lengths]
    if not all(known):  # items without a length share one bin of their own
        inner = iter(length_bins([v for v in lengths if v is not None], bins))
        return [next(inner) if k else "no length" for k in known]
    x = np.array([float(v) for v in lengths])
    if not x.size:
        return []
    uniq = np.unique(x)
    if uniq.size <= bins:
        edges = np.concatenate([uniq, [np.inf]])
    else:
        edges = np.unique(np.quantile(x, np.linspace(0, 1, bins + 1))[:-1])
        edges = np.concatenate([edges, [np.inf]])
    idx = np.searchsorted(edges, x, side="right") - 1
    label = {}
    for i in np.unique(idx):
        inside = x[idx == i]
        label[i] = f"{inside.min():g}-{inside.max():g}"
    return [label[i] for i in idx]


def stratified_gap(rows_a: Sequence[Mapping[str, Any]], a: Sequence[float], rows_b: Sequence[Mapping[str, Any]],
                   b: Sequence[float], strata: Mapping[str, Any], permutations: int = stats.BOOTSTRAP_RESAMPLES,
                   seed: int = stats.SEED) -> dict[str, Any]:
    """The difference of means within each stratum (strata holding both groups), pooled with
    weights n_a n_b / (n_a + n_b) (the Cochran-Mantel-Haenszel weights of a difference), and a
    permutation test that shuffles the group labels within each stratum (``permutations``
    shuffles, ``seed``; p = (1 + hits) / (1 + permutations), two-sided on |difference|).
    ``strata_used`` / ``strata_dropped`` say which strata hold both groups."""
    sa = [stratum_of(s, strata) for s in rows_a]
    sb = [stratum_of(s, strata) for s in rows_b]
    names = sorted(set(sa) | set(sb))
    cells = []
    for name in names:
        xa = np.array([v for v, s in zip(a, sa) if s == name], dtype=float)
        xb = np.array([v for v, s in zip(b, sb) if s == name], dtype=float)
        if xa.size and xb.size:
            cells.append((name, xa, xb))
    dropped = [n for n in names if n not in {c[0] for c in cells}]
    if not cells:
        return {"error": "no stratum holds both groups", "strata_dropped": dropped}
    w = np.array([xa.size * xb.size / (xa.size + xb.size) for _, xa, xb in cells])

    def pooled(parts) -> float:
        return float(np.sum(w * np.array([xa.mean() - xb.mean() for xa, xb in parts])) / w.sum())

    observed = pooled([(xa, xb) for _, xa, xb in cells])
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(permutations):
        parts = []
        for _, xa, xb in cells:
            perm = rng.permutation(np.concatenate([xa, xb]))
            parts.append((perm[:xa.size], perm[xa.size:]))
        hits += abs(pooled(parts)) >= abs(observed) - 1e-12
    p = (1 + hits) / (1 + permutations)
    var = sum(wi ** 2 * (np.var(xa, ddof=1) / xa.size if xa.size > 1 else 0.0)
              + wi ** 2 * (np.var(xb, ddof=1) / xb.size if xb.size > 1 else 0.0)
              for wi, (_, xa, xb) in zip(w, cells)) / w.sum() ** 2
    se = float(np.sqrt(var))
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + stats.LEVEL / 2))
    return {"value": observed, "lo": observed - z * se, "hi": observed + z * se, "se": se,
            "n": int(sum(xa.size + xb.size for _, xa, xb in cells)), "p_value": float(p),
            "test": "permutation within strata (CMH-weighted difference)",
            "permutations": permutations, "seed": seed, "strata": strata.get("field"),
            "strata_used": {name: [int(xa.size), int(xb.size), float(xa.mean() - xb.mean())] for name, xa, xb in cells},
            "strata_dropped": dropped}


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
    out = _test_dict(stats.paired_bootstrap(x, y), f"samples.jsonl {spec['stage']}: {spec['x']} - {spec['y']}")
    out["arms"] = {side: _arm(spec[f], rows, v, samples) for side, f, v in (("a", "x", x), ("b", "y", y))}
    return out


def clustered(samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """Token-level ``score`` (default ``rollout_scores``) of correct minus wrong tokens
    (``correct``, one 0/1 per token) in ``stage``, pooled as the child's test pools them, but
    with the sequence as the unit: cluster-robust t (:func:`whitebox_eval.stats.clustered_difference`;
    003 Table 2). ``groups`` counts the sequences holding each kind of token."""
    score, flag = spec.get("score", "rollout_scores"), spec.get("correct", "correct")
    values, good, seq, pos, lbin = [], [], [], [], []
    n_good = n_bad = 0
    rows = [s for s in samples if s.get("stage") == spec["stage"] and s.get(score) is not None]
    bins = length_bins([s.get(spec["length"]) for s in rows]) if spec.get("length") else [None] * len(rows)
    for s, b in zip(rows, bins):
        pairs = [(float(v), bool(c), i) for i, (v, c) in enumerate(zip(s[score], s[flag])) if v is not None and v == v]
        n_good += any(c for _, c, _ in pairs)
        n_bad += any(not c for _, c, _ in pairs)
        for v, c, i in pairs:
            values.append(v)
            good.append(c)
            seq.append(str(s["id"]))
            pos.append(i)
            lbin.append(b)
    groups = {"sequences with a correct token": n_good, "sequences with a wrong token": n_bad}
    if not values or all(good) or not any(good) or len(set(seq)) < 3:
        raise TooFew(f"no clustered comparison: {n_good} sequences with a correct token, {n_bad} with a wrong one "
                     f"({len(set(seq))} sequences)", groups)
    t = stats.clustered_difference(values, good, seq)
    v, g = np.asarray(values), np.asarray(good)
    binned = bool(set(lbin) - {None, "no length"})  # a length bin where the task's items have lengths
    cells = np.asarray([f"{i}|{b}" for i, b in zip(pos, lbin)]) if binned else np.asarray(pos)
    return {**_test_dict(t, f"samples.jsonl {spec['stage']} {score} by {flag}, clustered by sequence"),
            "side_a": float(v[g].mean()), "side_b": float(v[~g].mean()), "groups": groups, "tokens": int(v.size),
            "stratified": within_positions(v, g, cells, seq, name="token position" + (" x length bin" if binned else "")),
            "observations": {"value": [float(x) for x in values], "correct": [bool(x) for x in good], "sequence": seq,
                             "position": [int(i) for i in pos], **({"length_bin": lbin} if binned else {})}}


def _by_stratum(v: np.ndarray, g: np.ndarray, strata: np.ndarray, size: int) -> tuple[float, np.ndarray]:
    """The CMH-weighted mean over strata of (mean of ``v`` where ``g``) - (where not ``g``), strata
    holding both kinds only (weights n_g n_not / (n_g + n_not)); and the strata used."""
    n_g = np.bincount(strata, weights=g, minlength=size)
    n_w = np.bincount(strata, weights=~g, minlength=size)
    s_g = np.bincount(strata, weights=v * g, minlength=size)
    s_w = np.bincount(strata, weights=v * ~g, minlength=size)
    used = (n_g > 0) & (n_w > 0)
    if not used.any():
        return float("nan"), used
    w = n_g[used] * n_w[used] / (n_g[used] + n_w[used])
    d = s_g[used] / n_g[used] - s_w[used] / n_w[used]
    return float(np.sum(w * d) / np.sum(w)), used


def within_positions(v: np.ndarray, g: np.ndarray, position: np.ndarray, sequence: Sequence[str],
                     permutations: int = stats.BOOTSTRAP_RESAMPLES, seed: int = stats.SEED,
                     name: str = "token position") -> dict[str, Any]:
    """A clustered token statistic within token position: the difference of group means at each
    position (positions holding both groups), combined with CMH weights n_a n_b / (n_a + n_b); p from
    a stratified permutation test (the group labels shuffled within each position, ``permutations``
    shuffles, two-sided on |difference|; tokens at one position come from different sequences); the
    interval normal with the SE of a cluster bootstrap over sequences (seed + 1)."""
    g = np.asarray(g, dtype=bool)
    v = np.asarray(v, dtype=float)
    _, strata = np.unique(position, return_inverse=True)
    size = int(strata.max()) + 1
    observed, used = _by_stratum(v, g, strata, size)
    if observed != observed:
        return {"error": f"no {name} holds both groups", "strata": name}
    rng = np.random.default_rng(seed)
    base = g[np.argsort(strata, kind="stable")]
    hits = 0
    for _ in range(permutations):
        order = np.lexsort((rng.random(v.size), strata))
        shuffled = np.empty_like(g)
        shuffled[order] = base
        hits += abs(_by_stratum(v, shuffled, strata, size)[0]) >= abs(observed) - 1e-12
    p = (1 + hits) / (1 + permutations)
    _, seq_idx = np.unique(np.asarray(sequence), return_inverse=True)
    tokens_of = [np.flatnonzero(seq_idx == k) for k in range(int(seq_idx.max()) + 1)]
    boot_rng = np.random.default_rng(seed + 1)
    boots = []
    for _ in range(permutations):
        idx = np.concatenate([tokens_of[k] for k in boot_rng.integers(0, len(tokens_of), len(tokens_of))])
        b, _ = _by_stratum(v[idx], g[idx], strata[idx], size)
        if b == b:
            boots.append(b)
    se = float(np.std(boots, ddof=1)) if len(boots) > 1 else float("nan")
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + stats.LEVEL / 2))
    return {"value": observed, "lo": observed - z * se, "hi": observed + z * se, "se": se, "p_value": float(p),
            "n": int(v.size), "test": f"permutation within {name} (CMH-weighted difference; SE by a cluster "
                                      "bootstrap over sequences)",
            "permutations": permutations, "seed": seed, "strata": name,
            "strata_used": int(used.sum()), "strata_dropped": int(size - used.sum())}


def paired_samples(samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """Two 0/1 fields ``x`` and ``y`` of the same samples (``where`` filters them): exact McNemar of
    x - y, with both sides as arms (e.g. the QK head against PriDe on the test split, 000 sec. 5.4)."""
    rows = [s for s in samples if _matches(s, spec.get("where") or {}) and s.get(spec["x"]) is not None
            and s.get(spec["y"]) is not None]
    if len(rows) < 2:
        raise Missing(f"{len(rows)} samples hold both {spec['x']} and {spec['y']}")
    x = np.array([bool(s[spec["x"]]) for s in rows])
    y = np.array([bool(s[spec["y"]]) for s in rows])
    out = _test_dict(stats.mcnemar(x, y), f"samples.jsonl {spec['x']} vs {spec['y']}")
    out["arms"] = {side: _arm(spec.get(f"label_{side}", field), rows, v.astype(float), samples)
                   for side, field, v in (("a", spec["x"], x), ("b", spec["y"], y))}
    return out


def length_gap(samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """``field`` (default ``exact``) of stage ``stage`` on the longer half of its items (``length``,
    default ``input_length``, above the median) minus the shorter half: permutation test (003's
    "stable across increasing sequence lengths")."""
    rows = [s for s in samples if s.get("stage") == spec["stage"] and s.get(spec.get("length", "input_length")) is not None]
    if len(rows) < 4:
        raise Missing(f"stage {spec['stage']} has {len(rows)} samples with a length")
    lengths = np.array([float(s[spec.get("length", "input_length")]) for s in rows])
    cut = float(np.median(lengths))
    long_ = [s for s, n in zip(rows, lengths) if n > cut]
    short = [s for s, n in zip(rows, lengths) if n <= cut]
    field = spec.get("field", "exact")
    a = [float(bool(s[field])) for s in long_]
    b = [float(bool(s[field])) for s in short]
    if len(a) < 2 or len(b) < 2:
        raise Missing(f"length halves too small: {len(a)} vs {len(b)}")
    out = _test_dict(stats.permutation_test(a, b), f"samples.jsonl {spec['stage']} {field}: length > {cut:g} vs <= {cut:g}")
    out["arms"] = {"a": _arm(f"length > {cut:g}", long_, a, samples), "b": _arm(f"length <= {cut:g}", short, b, samples)}
    return out




def two_tests(results: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """Test ``a`` minus test ``b`` of one child (``a``/``b``: paths to paired tests on disjoint items,
    e.g. masking's key-minus-random on the source task and on another task): the difference of the
    two effects, SE the root sum of squares of each one's SE (its interval's half-width / z_0.975),
    normal two-sided p (001 sec. 3.8: masking a task's key neurons hurts that task more)."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + stats.LEVEL / 2))
    parts = []
    for side in ("a", "b"):
        t = at(results, list(spec[side]))
        if not isinstance(t, Mapping) or "diff" not in t:
            raise Missing(f"{'/'.join(map(str, spec[side]))} is not a test in the child run")
        lo, hi = (t["lo"], t["hi"]) if "lo" in t else t["diff_ci"]
        parts.append((float(t["diff"]), (float(hi) - float(lo)) / (2 * z), int(t.get("n") or 0)))
    (da, sa, na), (db, sb, nb) = parts
    value, se = da - db, float(np.hypot(sa, sb))
    p = 1.0 if se == 0 else float(2 * norm.sf(abs(value) / se))
    return {"value": value, "lo": value - z * se, "hi": value + z * se, "se": se, "p_value": p, "n": na + nb,
            "test": "difference of two independent effects (normal, SE from their intervals)",
            "source": f"{'/'.join(map(str, spec['a']))} - {'/'.join(map(str, spec['b']))}", "side_a": da, "side_b": db}
