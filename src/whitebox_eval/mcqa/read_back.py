"""What a reproduction reads back of an mcqa child beyond its samples (the record's ``statistics``).

``ablation_items``: 000 sec. 6, the key heads zeroed against random heads of the same layers: each
test item's 0/1 with the key heads zeroed and its mean over the random draws, from the ablation
passes' parts (:func:`whitebox_eval.mcqa.ablation.per_item`); the child's paired bootstrap is
recomputed on them and must agree with the one it wrote. ``kit`` is the reproduction's readers
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
