"""The within-strata twin of a pooled statistic that its claim declares ``strata`` for
(``stat: {..., strata: {field: F, strip: [...]}}``: each item's stratum is its sample's field ``F``,
as :func:`.derived.stratum_of` reads it), built from the claim's two arms and kept per item in the
evidence (``arm["strata"]``). One rule for every statistic kind (:func:`.claim_rules.stratified`
then decides within strata when the two disagree in sign or significance):

- a **correlation** of the two arms over the same items (a Pearson r): Pearson r within each
  stratum, combined by Fisher's z with inverse-variance weights n_s - 3 (strata of at least 4
  items whose two arms vary), interval tanh(z +- z_0.975 / sqrt(sum(n_s - 3)));
- **two groups of different items** (a difference of means or of rates): the CMH-weighted
  difference with its within-strata permutation p (:func:`.derived.stratified_gap`);
- **paired** arms on the same items need none: the pooled paired difference is the n-weighted mean
  of the strata's, and McNemar on pooled pairs is the Mantel-Haenszel test for matched pairs, so the
  two cannot disagree (``strata_note`` says so);
- a **clustered token statistic** is stratified by token position, and by its length bin where the
  task has one (:func:`.derived.length_bins`), in :func:`.derived.clustered` itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from whitebox_eval import stats

FISHER = "Pearson r within strata, Fisher z combined with inverse-variance weights n - 3"


def is_correlation(stat: Mapping[str, Any]) -> bool:
    """Whether the statistic is a correlation of its two arms (a Pearson r)."""
    return "pearson" in f"{stat.get('source', '')} {stat.get('test', '')}".lower()


def stratify(stat: dict[str, Any], strata: Mapping[str, Any] | None, arms: Mapping[str, dict[str, Any]],
             samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``stat`` with its ``stratified`` twin from ``arms`` (each arm gets ``strata``: item -> stratum)
    where the claim declares ``strata`` and the statistic has no twin of its own; unchanged otherwise."""
    from whitebox_eval.reproduce.claim_checks import item_id
    from whitebox_eval.reproduce.derived import stratified_gap, stratum_of

    a, b = arms.get("a") or {}, arms.get("b") or {}
    if not strata or "stratified" in stat or not a.get("items") or not b.get("items"):
        return stat
    of: dict[str, str] = {}
    for s in samples:
        if strata["field"] in s:
            of.setdefault(item_id(s), stratum_of(s, strata))
    for arm in (a, b):
        arm["strata"] = {i: of[i] for i in arm["items"] if i in of}
    field = strata["field"]
    if is_correlation(stat):
        return {**stat, "stratified": fisher_z(a["items"], b["items"], of, field)}
    if set(a["items"]) == set(b["items"]):
        return {**stat, "strata_note": f"paired on the same items: the pooled statistic is the n-weighted "
                                       f"combination within {field}, no twin can disagree with it"}
    ids_a = [i for i in a["items"] if i in of]
    ids_b = [i for i in b["items"] if i in of]
    twin = stratified_gap([{field: of[i]} for i in ids_a], [a["items"][i] for i in ids_a],
                          [{field: of[i]} for i in ids_b], [b["items"][i] for i in ids_b], {"field": field})
    return {**stat, "stratified": twin}


def fisher_z(x: Mapping[str, float], y: Mapping[str, float], of: Mapping[str, str], field: str) -> dict[str, Any]:
    """Pearson r of ``x`` and ``y`` (item -> value) within each stratum (``of``: item -> stratum), combined
    by Fisher's z = atanh(r) with weights n_s - 3; its SE 1 / sqrt(sum(n_s - 3)), a normal interval
    back-transformed by tanh. Its p is None: the interval decides against the claim's boundary
    (:func:`.verdicts.interval_p`), as for the pooled r; ``p_vs_0`` is the normal p of z against 0."""
    from scipy.stats import norm

    cells: dict[str, list[str]] = {}
    for i in x:
        if i in y and i in of:
            cells.setdefault(of[i], []).append(i)
    used, zs, ws = {}, [], []
    for name, ids in sorted(cells.items()):
        u, v = np.array([x[i] for i in ids], float), np.array([y[i] for i in ids], float)
        if u.size < 4 or np.ptp(u) == 0 or np.ptp(v) == 0:
            continue
        r = float(np.corrcoef(u, v)[0, 1])
        used[name] = [int(u.size), r]
        zs.append(float(np.arctanh(np.clip(r, -0.999999, 0.999999))))
        ws.append(u.size - 3)
    dropped = sorted(set(cells) - set(used))
    if not used:
        return {"error": f"no stratum of {field} holds 4 items whose two arms vary", "strata": field,
                "strata_dropped": dropped}
    w = np.array(ws, float)
    z = float(np.sum(w * np.array(zs)) / w.sum())
    se = float(1 / np.sqrt(w.sum()))
    q = float(norm.ppf(0.5 + stats.LEVEL / 2))
    return {"value": float(np.tanh(z)), "lo": float(np.tanh(z - q * se)), "hi": float(np.tanh(z + q * se)),
            "z": z, "se_z": se, "p_value": None, "p_vs_0": float(2 * norm.sf(abs(z) / se)), "n": int(sum(n for n, _ in used.values())),
            "test": FISHER, "strata": field, "strata_used": used, "strata_dropped": dropped}

