"""What a reproduction reads back of an mcqa child beyond its samples (the record's ``statistics``).

``ablation_items``: 000 sec. 6, the key heads zeroed against random heads of the same layers: each
test item's 0/1 with the key heads zeroed and its mean over the random draws, from the ablation
passes' parts (:func:`whitebox_eval.mcqa.ablation.per_item`); the child's paired bootstrap is
recomputed on them and must agree with the one it wrote. ``pa_stability``: 000 sec. 5.4, the
relative PA drop of a head against the baseline's, from each test item's accuracy and PA in the
child's samples, with the four per-item columns as its observations. ``kit`` is the reproduction's readers
(``at``, ``test``, ``arm_of``, ``answer_key``, ``Missing``), so this module imports none of it.
A run whose parts cannot be read back keeps the child's own test, saying so (``evidence``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError



def readable(study) -> Path | None:
    """The child's folder when it is on this machine."""
    folder = getattr(study, "folder", None)
    return Path(folder) if folder is not None and Path(folder).is_dir() else None


def ablation_items(study, spec: Mapping[str, Any], kit) -> dict[str, Any]:
    """The child's ``paired`` test of the key heads against the mean over random draws, with both
    arms item by item (the mean over draws is a per-item share)."""
    from whitebox_eval.mcqa import ablation

    results = study.results
    written = dict(kit.test(results, {"paired": spec["paired"]}))
    folder = readable(study)
    if folder is None:
        return {**written, "evidence": "the child's arrays are not readable here: no per-item values"}
    try:
        draws = len(kit.at(results, ["ablation", "random_draws"]))
        ids, key, rand = ablation.per_item(folder, study.samples, int(study.config.get("seed", 0)), draws)
    except (kit.Missing, WhiteboxError, KeyError) as e:
        return {**written, "evidence": f"the ablation passes could not be read back ({e}): no per-item values"}
    vs_mean, _ = stats.against_draws(key, rand)
    if abs(vs_mean.diff - written["value"]) > 1e-12 or abs(vs_mean.p_value - written["p_value"]) > 1e-12:
        raise kit.Missing(f"the ablation read back from {folder.name}'s parts gives {vs_mean.diff:+.4f} (p = "
                          f"{vs_mean.p_value:.4g}), the child wrote {written['value']:+.4f} (p = {written['p_value']:.4g})")
    mean = np.mean(rand, axis=0)
    by_id = {str(s["id"]): s for s in study.samples}
    answers = {i: kit.answer_key(by_id[i], {}) for i in ids}
    out = {**written, "scheme": {"resamples": stats.BOOTSTRAP_RESAMPLES, "seed": stats.SEED,
                                 "resampled": "items, paired"}}
    out["arms"] = {"a": kit.arm_of("key heads zeroed", dict(zip(ids, map(float, key)))),
                   "b": kit.arm_of(f"random heads zeroed (mean of {draws} draws)", dict(zip(ids, map(float, mean))))}
    if all(a is not None for a in answers.values()):
        for arm in out["arms"].values():
            arm["answers"] = answers
    return out


def relative_pa_drops(acc_head, pa_head, acc_base, pa_base) -> float:
    """The baseline's relative PA drop minus the head's, ``(1 - PA_b / acc_b) - (1 - PA_h / acc_h)``
    (positive: the head loses relatively less to option permutations); NaN where an accuracy is 0."""
    ah, ab = float(np.mean(acc_head)), float(np.mean(acc_base))
    if ah == 0 or ab == 0:
        return float("nan")
    return float(np.mean(pa_head)) / ah - float(np.mean(pa_base)) / ab


def pa_stability(study, spec: Mapping[str, Any], kit) -> dict[str, Any]:
    """000 sec. 5.4, PA's stability: on the test items, each item right or not (``acc,<arm>``) and
    right on it and on its option-permuted copy (``pa,<arm>``, the child's samples), for the
    ``method`` head (default ``qk_head``) and the baseline; :func:`relative_pa_drops`, with a paired
    percentile bootstrap over items (resamples where an accuracy is 0 dropped; p twice the smaller
    tail), every item's four values as the statistic's observations."""
    from whitebox_eval.stats.intervals import bootstrap_indices

    method = str(spec.get("method", "qk_head"))
    cols = (f"acc,{method}", f"pa,{method}", "acc,baseline", "pa,baseline")
    rows = [s for s in study.samples if all(s.get(c) is not None for c in cols)]
    if len(rows) < 2:
        raise kit.Missing(f"{len(rows)} items carry {', '.join(cols)}: the child wrote no per-item PA")
    x = np.array([[float(s[c]) for c in cols] for s in rows])
    value = relative_pa_drops(*x.T)
    if not np.isfinite(value):
        raise kit.Missing(f"the {method} or the baseline is right on no test item: no relative PA drop")
    boots = np.array([relative_pa_drops(*x[i].T) for i in bootstrap_indices(len(rows), stats.BOOTSTRAP_RESAMPLES,
                                                                                   stats.SEED)])
    boots = boots[np.isfinite(boots)]
    lo, hi = (float(q) for q in np.quantile(boots, [(1 - stats.LEVEL) / 2, (1 + stats.LEVEL) / 2]))
    p = max(1.0 / stats.BOOTSTRAP_RESAMPLES, min(1.0, 2 * min(np.mean(boots <= 0), np.mean(boots >= 0))))
    return {"value": value, "lo": lo, "hi": hi, "p_value": float(p), "n": len(rows),
            "test": "paired bootstrap of the relative PA drops", "ci_method": "percentile bootstrap",
            "source": f"samples.jsonl {', '.join(cols)} of the test items",
            "scheme": {"resamples": stats.BOOTSTRAP_RESAMPLES, "seed": stats.SEED, "resampled": "items, paired"},
            "side_a": 1 - float(x[:, 1].mean()) / float(x[:, 0].mean()),
            "side_b": 1 - float(x[:, 3].mean()) / float(x[:, 2].mean()),
            "observations": {"ids": [str(s.get("id")) for s in rows],
                             **{c: [int(v) for v in x[:, j]] for j, c in enumerate(("acc_head", "pa_head", "acc_base",
                                                                                      "pa_base"))}}}
