"""Tests whose per-item evidence lies in a child's arrays, not in its samples: read back item by
item (no model is run) so that claims.json's evidence carries every item the test used.

- ``ablation_items``: 000 sec. 6, the key heads zeroed against random heads of the same layers:
  each test item's 0/1 with the key heads zeroed and its mean over the random draws, from the
  ablation passes' parts (:func:`whitebox_eval.mcqa.ablation.per_item`); the child's paired
  bootstrap is recomputed on them and must agree with the one it wrote;
- ``rarefied_relative``: 001 sec. 3.7, MUI of correct vs incorrect responses on rarefied subsets,
  as the relative difference its margin is stated on, with each response's key units and group
  (``arrays/key_sets.safetensors``, ``arrays/correct.npy``) as the statistic's observations.

- ``contamination_items``: 001 sec. 3.4, one task's change from step 0 to the final checkpoint of
  a contamination child, from the checkpoints' own runs (``runs/<checkpoint>-<task>/``): accuracy
  as each item's 0/1 with its gold answer, MUI as each response's key units at both checkpoints
  (the paired delete-one jackknife's observations); the child's test is recomputed on them and
  must agree with the one it wrote.

A run whose arrays cannot be read back (an older layout, a synthetic child) keeps the child's own
test, without per-item evidence; the statistic says so (``evidence``), and the recomputation
counts it as not recomputable.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce.values import Missing, TooFew, at
from whitebox_eval.reproduce.values import test as child_test

# what of a child's arrays/ the claims read back (a checkpoint carries these with the child's files):
ARRAY_FILES = ("key_sets.safetensors", "correct.npy")
PASS_PREFIXES = ("ablate_top", "ablate_random")  # arrays/parts/<pass>/ of the passes whose name starts so


def _folder(study) -> Path | None:
    folder = getattr(study, "folder", None)
    return Path(folder) if folder is not None and Path(folder).is_dir() else None


def ablation_items(study, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The child's ``paired`` test of the key heads against the mean over random draws, with both
    arms item by item (the mean over draws is a per-item share)."""
    from whitebox_eval.mcqa import ablation
    from whitebox_eval.reproduce.claim_checks import answer_key, arm_of

    results = study.results
    written = dict(child_test(results, {"paired": spec["paired"]}))
    folder = _folder(study)
    if folder is None:
        return {**written, "evidence": "the child's arrays are not readable here: no per-item values"}
    try:
        draws = len(at(results, ["ablation", "random_draws"]))
        ids, key, rand = ablation.per_item(folder, study.samples, int(study.config.get("seed", 0)), draws)
    except (Missing, WhiteboxError, KeyError) as e:
        return {**written, "evidence": f"the ablation passes could not be read back ({e}): no per-item values"}
    vs_mean, _ = stats.against_draws(key, rand)
    if abs(vs_mean.diff - written["value"]) > 1e-12 or abs(vs_mean.p_value - written["p_value"]) > 1e-12:
        raise Missing(f"the ablation read back from {folder.name}'s parts gives {vs_mean.diff:+.4f} (p = "
                      f"{vs_mean.p_value:.4g}), the child wrote {written['value']:+.4f} (p = {written['p_value']:.4g})")
    mean = np.mean(rand, axis=0)
    by_id = {str(s["id"]): s for s in study.samples}
    answers = {i: answer_key(by_id[i], {}) for i in ids}
    out = {**written, "scheme": {"resamples": stats.BOOTSTRAP_RESAMPLES, "seed": stats.SEED,
                                 "resampled": "items, paired"}}
    out["arms"] = {"a": arm_of("key heads zeroed", dict(zip(ids, map(float, key)))),
                   "b": arm_of(f"random heads zeroed (mean of {draws} draws)", dict(zip(ids, map(float, mean))))}
    if all(a is not None for a in answers.values()):
        for arm in out["arms"].values():
            arm["answers"] = answers
    return out


def rarefied_relative(study, spec: Mapping[str, Any]) -> dict[str, Any]:
    """001 sec. 3.7 on the statistic's own scale: the child's correct-vs-incorrect test on
    rarefied subsets of r responses, as ``relative_diff`` = diff / mean of the two rarefied
    MUIs, its interval and standard error divided by the same mean (held fixed)."""
    t = at(study.results, spec["at"])
    if t.get("refused"):
        raise TooFew(f"the child run did not test it: {t['refused']}",
                     {"correct": int(t.get("n_correct", 0)), "incorrect": int(t.get("n_incorrect", 0))})
    a, b = float(t["mui_correct_at_r"]), float(t["mui_incorrect_at_r"])
    mean = (a + b) / 2
    if mean <= 0:
        raise Missing("both rarefied MUIs are 0")
    lo, hi = t["diff_ci"]
    out = {"value": float(t["relative_diff"]), "lo": float(lo) / mean, "hi": float(hi) / mean,
           "se": float(t["diff_stderr"]) / mean, "p_value": float(t["p_value"]),
           "n": int(t["n_correct"]) + int(t["n_incorrect"]), "test": f"{t.get('test')}; jackknife interval / mean",
           "source": "/".join(map(str, spec["at"])) + "/relative_diff", "side_a": a, "side_b": b,
           "subset_size": int(t["subset_size"]),
           "groups": {"correct": int(t["n_correct"]), "incorrect": int(t["n_incorrect"])}}
    obs = _key_units(study, out["n"])
    if isinstance(obs, str):
        out["evidence"] = obs
    else:
        out["observations"] = obs
        out["scheme"] = {"permutations": int(t.get("permutations", 0)), "seed": int(study.config.get("seed", 0)),
                         "resampled": "group labels"}
    return out


def _key_units(study, n: int) -> dict[str, Any] | str:
    """Each response's key units (flat indices over layers x width), its group and the units' total."""
    folder = _folder(study)
    if folder is None:
        return "the child's arrays are not readable here: no per-response key sets"
    from whitebox_eval.mui.study import KEY_SETS_FILE
    from whitebox_eval.mui.utilization import KeySets

    try:
        ks = KeySets.load(folder / "arrays" / KEY_SETS_FILE)
        correct = np.asarray(study.arrays["correct"]).astype(bool)
    except (WhiteboxError, KeyError, OSError) as e:
        return f"the key sets could not be read back ({e})"
    if len(ks) != n or correct.shape != (n,):
        raise Missing(f"{folder.name}: {len(ks)} key sets and {correct.size} correct flags for the test's {n} responses")
    return {"ids": list(map(str, ks.sample_ids)), "correct": [bool(x) for x in correct],
            "units": [[int(u) for u in ks.flat_indices(i)] for i in range(n)], "total_units": int(ks.total_units)}


def contamination_items(study, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The child's ``paired`` test (``accuracy,<task>``: exact McNemar; ``mui,<task>``: paired
    jackknife), after fine-tuning minus before, with its per-item evidence read back from the two
    checkpoints' runs: ``arms`` for accuracy, ``observations`` (each response's key units) for MUI."""
    from whitebox_eval.mui.finished import load_key_sets
    from whitebox_eval.mui.statistics import jackknife_mui_difference
    from whitebox_eval.reproduce.claim_checks import answer_key, arm, arm_of
    from whitebox_eval.runs.folder import RunFolder

    results = study.results
    measure, task = str(spec["paired"]).split(",", 1)
    written = dict(child_test(results, {"paired": spec["paired"]}))

    def unread(why: str) -> dict[str, Any]:  # the child's test, and its accuracies as arms, without items
        out = {**written, "evidence": f"{why}: no per-item values"}
        if measure == "accuracy":
            out["arms"] = {side: arm(results, [], {"label": label, "key": f"accuracy,{task},{which}"})
                           for side, label, which in (("a", "after fine-tuning", "final"), ("b", "before", "base"))}
        return out

    folder = _folder(study)
    if folder is None:
        return unread("the child's checkpoint runs are not readable here")
    try:
        names = at(results, ["tasks", task, "runs"])
        base, final = results["checkpoints"][0], results["final"]
        before, after = (RunFolder.open(folder / "runs" / names[k]) for k in (base, final))
        kb, ka = load_key_sets(before), load_key_sets(after)
        sb, sa = ({str(s["id"]): s for s in r.read_samples()} for r in (before, after))
    except (Missing, WhiteboxError, KeyError, OSError) as e:
        return unread(f"the checkpoint runs could not be read back ({e})")
    ids = list(kb.sample_ids)
    if ids != list(ka.sample_ids) or set(ids) - set(sb) or set(ids) - set(sa):
        raise Missing(f"{folder.name}: the {base} and {final} runs of {task} do not hold the same items")
    if measure == "accuracy":
        x = np.array([bool(sa[i]["correct"]) for i in ids])  # as the child reads them (mui.over_runs.paired_tests)
        y = np.array([bool(sb[i]["correct"]) for i in ids])
        again = stats.mcnemar(x, y)
    else:
        again = jackknife_mui_difference(kb, ka)
    if abs(again.diff - written["value"]) > 1e-12 or abs(again.p_value - written["p_value"]) > 1e-12:
        raise Missing(f"{spec['paired']} read back from {folder.name}'s checkpoint runs gives {again.diff:+.6f} "
                      f"(p = {again.p_value:.4g}), the child wrote {written['value']:+.6f} (p = {written['p_value']:.4g})")
    out = {**written, "runs": {"before": before.path.name, "after": after.path.name}}
    if measure == "accuracy":
        gold = {"answers": "free", "gold": "gold"}
        answers = {i: answer_key(sb[i], gold) for i in ids}
        out["arms"] = {"a": arm_of("after fine-tuning", dict(zip(ids, map(float, x)))),
                       "b": arm_of("before", dict(zip(ids, map(float, y))))}
        if all(a is not None for a in answers.values()):
            for side in out["arms"].values():
                side["answers"] = answers
    else:
        out["observations"] = {"ids": ids, "total_units": int(kb.total_units),
                               "before": [[int(u) for u in kb.flat_indices(i)] for i in range(len(ids))],
                               "after": [[int(u) for u in ka.flat_indices(i)] for i in range(len(ids))]}
    return out


STUDY_DERIVED = {"ablation_items": ablation_items, "rarefied_relative": rarefied_relative,
                 "contamination_items": contamination_items}
