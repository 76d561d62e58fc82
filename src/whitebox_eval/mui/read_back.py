"""What a reproduction reads of paper 001's children beyond their samples (the records' ``statistics``).

- ``rarefied_relative`` (mui): 001 sec. 3.7, MUI of correct (right) vs incorrect (wrong) responses on
  rarefied subsets, off-format responses left out and counted (:mod:`.answer_classes`), as the relative
  difference its margin is stated on, with each response's key units and class
  (``arrays/key_sets.safetensors``, ``arrays/correct.npy``, the samples) as the statistic's observations;
- ``contamination_items`` (contamination): 001 sec. 3.4, one task's change from step 0 to the final
  checkpoint, from the checkpoints' own runs (``runs/<checkpoint>-<task>/``): accuracy as each
  item's 0/1 with its gold answer, MUI as each response's key units at both checkpoints (the paired
  delete-one jackknife's observations), on the contaminated task's tested half where a stopping
  rule read the other (``split``); the child's test is recomputed and must agree;
- ``masked_items`` (masking): 001 sec. 3.8, an item's metric under a task's key-neuron mask against
  the mean over its random masks, from the child's samples;
- ``masked_specificity`` (masking): 001 sec. 3.8's specificity, each item's relative change of the
  answer's probability under the key mask (against its random masks) on one task against another's;
- ``utility_law`` (mui, across models): ``MUI = A ln(P) + B`` over several MUI runs with the
  suite's own fit (``whitebox-eval mui law``; 001 sec. 3.2): A with its t-interval.

``kit`` is the reproduction's readers (``at``, ``test``, ``record``, ``arm``, ``arm_of``,
``answer_key``, ``Missing``, ``TooFew``), so this module imports none of it. A run whose arrays
cannot be read back keeps the child's own test, without per-item evidence, saying so (``evidence``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.answer_classes import DEFINITION
from whitebox_eval.tasks.answers import off_format_share



def _folder(study) -> Path | None:
    folder = getattr(study, "folder", None)
    return Path(folder) if folder is not None and Path(folder).is_dir() else None


def rarefied_relative(study, spec: Mapping[str, Any], kit) -> dict[str, Any]:
    """001 sec. 3.7 on the statistic's own scale: the child's right-vs-wrong test on rarefied subsets
    of r responses (off-format responses left out and counted beside, as
    :mod:`whitebox_eval.mui.answer_classes`), as ``relative_diff`` = diff / mean of the two rarefied
    MUIs, its interval and standard error divided by the same mean (held fixed). A child written
    before the class folded its off-format responses into ``incorrect``: its test stands where none
    is off-format, and is computed again from its key sets with them left out where some are.
    The off-format count and share (``off_format``) are reported whatever the verdict: a refusal
    (a floor, a child that cannot be read) carries them too, with each response's class as its
    ``observations`` where the classes are known (``Missing.beside``; moved to the evidence)."""
    classes = _classes(study, kit)
    share = _off_format_share(study, classes)
    try:
        return _relative(study, spec, kit, classes, share)
    except kit.Missing as e:
        if share is not None:  # with each response's class where known: the share's per-item evidence
            e.beside = {**e.beside, "off_format": share,
                        **({"observations": {"ids": list(classes), "class": list(classes.values())}} if classes else {})}
        raise


def _off_format_share(study, classes: dict[str, str] | None) -> dict[str, Any] | None:
    """The off-format count and share with its Wilson interval over the child's responses: from each
    response's class, else from the counts the child wrote (``answer_classes``); None when neither is known."""
    from whitebox_eval.mui.answer_classes import CLASSES

    if classes is not None:
        flags = [c == "off_format" for c in classes.values()]
    else:
        got = study.results.get("answer_classes") or {}
        if not all(isinstance(got.get(c), int) for c in CLASSES):
            return None
        flags = [True] * got["off_format"] + [False] * sum(got[c] for c in CLASSES if c != "off_format")
    return off_format_share(flags, DEFINITION) if flags else None


def _relative(study, spec: Mapping[str, Any], kit, classes: dict[str, str] | None,
              share: dict[str, Any] | None) -> dict[str, Any]:
    """:func:`rarefied_relative` once the responses' classes and the off-format share are known."""
    t = kit.at(study.results, spec["at"])
    t, how = _class_apart(study, t, classes, kit)
    if t.get("refused"):
        raise kit.TooFew(f"the child run did not test it: {t['refused']}",
                         {"correct": int(t.get("n_correct", 0)), "incorrect": int(t.get("n_incorrect", 0))})
    a, b = float(t["mui_correct_at_r"]), float(t["mui_incorrect_at_r"])
    mean = (a + b) / 2
    if mean <= 0:
        raise kit.Missing("both rarefied MUIs are 0")
    lo, hi = t["diff_ci"]
    n_off = int(t["n_off_format"])
    out = {"value": float(t["relative_diff"]), "lo": float(lo) / mean, "hi": float(hi) / mean,
           "se": float(t["diff_stderr"]) / mean, "p_value": float(t["p_value"]),
           "n": int(t["n_correct"]) + int(t["n_incorrect"]), "test": f"{t.get('test')}; jackknife interval / mean",
           "source": "/".join(map(str, spec["at"])) + f"/relative_diff, right vs wrong ({how})",
           "side_a": a, "side_b": b, "subset_size": int(t["subset_size"]),
           "groups": {"correct": int(t["n_correct"]), "incorrect": int(t["n_incorrect"])}}
    if share is not None:
        if share["n"] != n_off:
            raise kit.Missing(f"the child's test left out {n_off} off-format responses, its classes count {share['n']}")
        out["off_format"] = share
        out["source"] += f"; {n_off} of {share['of']} responses off-format, left out"
    obs = (_key_units(study, out["n"] + n_off, classes, kit) if classes is not None or not n_off
           else "no samples tell the off-format responses apart: no per-response classes")
    if isinstance(obs, str):
        out["evidence"] = obs
    else:
        out["observations"] = obs
        out["scheme"] = {"permutations": int(t.get("permutations", 0)), "seed": int(study.config.get("seed", 0)),
                         "resampled": "group labels"}
    return out


def _classes(study, kit) -> dict[str, str] | None:
    """Each response's class by sample id (written by the child, or read back from its texts by the
    suite's record); None for a child that keeps no samples (the written test's own counts stand)."""
    got = study.results.get("answer_classes") or {}
    if "not_classified" in got:
        raise kit.Missing(f"the responses cannot be classified right / wrong / off-format: {got['not_classified']}")
    samples = getattr(study, "samples", None) or []
    if not samples:
        return None
    if not all("class" in s for s in samples):
        from whitebox_eval.mui.answer_classes import classes_of_samples

        try:
            return dict(zip((str(s["id"]) for s in samples), classes_of_samples(samples, study.config)))
        except WhiteboxError as e:
            raise kit.Missing(f"the responses cannot be classified right / wrong / off-format: {e}") from None
    return {str(s["id"]): str(s["class"]) for s in samples}


def _class_apart(study, t: Mapping[str, Any], classes: dict[str, str] | None, kit) -> tuple[Mapping[str, Any], str]:
    """The right-vs-wrong test: the child's (written with the class, or before it with no response
    off-format), else computed again from its key sets with the off-format responses left out."""
    if "n_off_format" in t:  # written with the class
        if classes is not None and sum(c == "off_format" for c in classes.values()) != int(t["n_off_format"]):
            raise kit.Missing(f"the child counted {t['n_off_format']} off-format responses, its samples "
                              f"{sum(c == 'off_format' for c in classes.values())}")
        return t, "the child's test"
    if classes is None and t.get("refused"):  # a group too small, or all alike: fewer responses cannot lift it
        return t, "the child's refusal"
    if classes is None:
        raise kit.Missing("the child wrote correct vs incorrect before the off-format class and keeps no samples "
                          "to classify")
    n_off = sum(c == "off_format" for c in classes.values())
    if n_off == 0 or t.get("refused"):  # nothing folded; or a refusal that leaving responses out cannot lift
        counts = {"n_correct": sum(c == "right" for c in classes.values()),
                  "n_incorrect": sum(c == "wrong" for c in classes.values())}
        return {**t, **counts, "n_off_format": n_off}, ("the child's test, written before the class: no response "
                                                        "is off-format" if n_off == 0 else "the child's refusal")
    from whitebox_eval.mui.statistics import correct_vs_incorrect

    ks = _load_key_sets(study)
    if isinstance(ks, str):
        raise kit.Missing(f"the child folded {n_off} off-format responses into incorrect and {ks}")
    missing = [i for i in map(str, ks.sample_ids) if i not in classes]
    if missing:
        raise kit.Missing(f"{len(missing)} key sets have no sample to classify (e.g. {missing[0]})")
    cls = np.array([classes[str(i)] for i in ks.sample_ids])
    again = correct_vs_incorrect(ks, cls == "right", off_format=cls == "off_format",
                                 seed=int(study.config.get("seed", 0)), permutations=int(t.get("permutations", 1000)))
    return again, (f"computed again from the key sets: the child, written before the class, folded {n_off} "
                   "off-format responses into incorrect")


def _load_key_sets(study):
    """The child's key sets, or why they cannot be read."""
    folder = _folder(study)
    if folder is None:
        return "the child's arrays are not readable here: no per-response key sets"
    from whitebox_eval.mui.study import KEY_SETS_FILE
    from whitebox_eval.mui.utilization import KeySets

    try:
        return KeySets.load(folder / "arrays" / KEY_SETS_FILE)
    except (WhiteboxError, OSError) as e:
        return f"the key sets could not be read back ({e})"


def _key_units(study, n: int, classes: dict[str, str] | None, kit) -> dict[str, Any] | str:
    """Each response's key units (flat indices over layers x width), its class and the units' total."""
    ks = _load_key_sets(study)
    if isinstance(ks, str):
        return ks
    try:
        correct = np.asarray(study.arrays["correct"]).astype(bool)
    except (WhiteboxError, KeyError, OSError) as e:
        return f"the key sets could not be read back ({e})"
    if len(ks) != n or correct.shape != (n,):
        raise kit.Missing(f"{_folder(study).name}: {len(ks)} key sets and {correct.size} correct flags for the "
                          f"test's {n} responses")
    ids = list(map(str, ks.sample_ids))
    cls = [classes[i] for i in ids] if classes is not None else ["right" if c else "wrong" for c in correct]
    if [c == "right" for c in cls] != [bool(x) for x in correct]:
        raise kit.Missing(f"{_folder(study).name}: arrays/correct.npy disagrees with the samples' classes")
    return {"ids": ids, "correct": [bool(x) for x in correct], "class": cls,
            "units": [[int(u) for u in ks.flat_indices(i)] for i in range(n)], "total_units": int(ks.total_units)}


def contamination_items(study, spec: Mapping[str, Any], kit) -> dict[str, Any]:
    """The child's ``paired`` test (``accuracy,<task>``: exact McNemar; ``mui,<task>``: paired
    jackknife), after fine-tuning minus before, with its per-item evidence read back from the two
    checkpoints' runs: ``arms`` for accuracy, ``observations`` (each response's key units) for MUI."""
    from whitebox_eval.mui.finished import load_key_sets
    from whitebox_eval.mui.statistics import jackknife_mui_difference
    from whitebox_eval.runs.folder import RunFolder

    results = study.results
    measure, task = str(spec["paired"]).split(",", 1)
    written = dict(kit.test(results, {"paired": spec["paired"]}))

    def unread(why: str) -> dict[str, Any]:  # the child's test, and its accuracies as arms, without items
        out = {**written, "evidence": f"{why}: no per-item values"}
        if measure == "accuracy":
            out["arms"] = {side: kit.arm(results, [], {"label": label, "key": f"accuracy,{task},{which}"})
                           for side, label, which in (("a", "after fine-tuning", "final"), ("b", "before", "base"))}
        return out

    folder = _folder(study)
    if folder is None:
        return unread("the child's checkpoint runs are not readable here")
    try:
        names = kit.at(results, ["tasks", task, "runs"])
        base, final = results["checkpoints"][0], results["final"]
        before, after = (RunFolder.open(folder / "runs" / names[k]) for k in (base, final))
        kb, ka = load_key_sets(before), load_key_sets(after)
        sb, sa = ({str(s["id"]): s for s in r.read_samples()} for r in (before, after))
    except (kit.Missing, WhiteboxError, KeyError, OSError) as e:
        return unread(f"the checkpoint runs could not be read back ({e})")
    ids = list(kb.sample_ids)
    if ids != list(ka.sample_ids) or set(ids) - set(sb) or set(ids) - set(sa):
        raise kit.Missing(f"{folder.name}: the {base} and {final} runs of {task} do not hold the same items")
    split = results.get("split") if task == results.get("task") else None
    if split:  # trained until a stopping rule: its items are not the tested ones
        tested = [str(i) for i in split["tested"]]
        if set(tested) - set(ids) or set(tested) & set(map(str, split["stop"])):
            raise kit.Missing(f"{folder.name}: the tested half of {task} is not a disjoint part of its items")
        kb, ka, ids = kb.subset(kb.positions(tested)), ka.subset(ka.positions(tested)), tested
    if measure == "accuracy":
        x = np.array([bool(sa[i]["correct"]) for i in ids])  # as the child reads them (mui.over_runs.paired_tests)
        y = np.array([bool(sb[i]["correct"]) for i in ids])
        again = stats.mcnemar(x, y)
    else:
        again = jackknife_mui_difference(kb, ka)
    if abs(again.diff - written["value"]) > 1e-12 or abs(again.p_value - written["p_value"]) > 1e-12:
        raise kit.Missing(f"{spec['paired']} read back from {folder.name}'s checkpoint runs gives {again.diff:+.6f} "
                          f"(p = {again.p_value:.4g}), the child wrote {written['value']:+.6f} "
                          f"(p = {written['p_value']:.4g})")
    out = {**written, "runs": {"before": before.path.name, "after": after.path.name}}
    if split:
        out["items"] = f"the tested half ({len(ids)} items; the stopping rule read the other {len(split['stop'])})"
    if measure == "accuracy":
        gold = {"answers": "free", "gold": "gold"}
        answers = {i: kit.answer_key(sb[i], gold) for i in ids}
        out["arms"] = {"a": kit.arm_of("after fine-tuning", dict(zip(ids, map(float, x)))),
                       "b": kit.arm_of("before", dict(zip(ids, map(float, y))))}
        if all(a is not None for a in answers.values()):
            for side in out["arms"].values():
                side["answers"] = answers
    else:
        out["observations"] = {"ids": ids, "total_units": int(kb.total_units),
                               "before": [[int(u) for u in kb.flat_indices(i)] for i in range(len(ids))],
                               "after": [[int(u) for u in ka.flat_indices(i)] for i in range(len(ids))]}
    return out


def _masked(samples, task: str, k: int, field: str, kit) -> tuple[np.ndarray, np.ndarray]:
    """Per item of ``task``, ``field`` under the key-neuron mask of size ``k`` and under each random
    mask of that size (draws x items)."""
    rows = [s for s in samples if s.get("task") == task and s.get("k") == k and s.get(field) is not None]
    key = [s for s in rows if s.get("masking") == "key"]
    rnd = sorted((s for s in rows if s.get("masking") == "random"), key=lambda s: s.get("draw", 0))
    if len(key) != 1 or not rnd:
        raise kit.Missing(f"masking samples of {task} at k={k}: {len(key)} key row(s), {len(rnd)} random")
    return np.asarray(key[0][field], float), np.asarray([r[field] for r in rnd], float)


def masked_items(study, spec: Mapping[str, Any], kit) -> dict[str, Any]:
    """A masking child's per-item ``metric`` (``item_<metric>``) under the ``task``'s key-neuron mask
    of size ``k`` against the mean over its random masks of the same size: the paired bootstrap the
    child reports (001 sec. 3.8), with both sides as arms keyed ``task#index``."""
    task, k, field = spec["task"], int(spec["k"]), f"item_{spec.get('metric', 'answer_logprob')}"
    x, rnd = _masked(study.samples, task, k, field, kit)
    y = rnd.mean(axis=0)
    out = dict(kit.record(stats.paired_bootstrap(x, y), f"samples.jsonl {field} of {task}, k={k}: key mask - "
                                                        f"mean of {len(rnd)} random masks"))
    out["arms"] = {side: kit.arm_of(label, {f"{task}#{i}": float(u) for i, u in enumerate(v)})
                   for side, label, v in (("a", "key-neuron mask", x), ("b", f"mean of {len(rnd)} random masks", y))}
    return out


def relative_change(key_logprob: np.ndarray, random_logprobs: np.ndarray) -> np.ndarray:
    """Per item, the relative change of the answer's probability (per token: the exponent of the
    mean log-probability per token) under the key-neuron mask against the mean probability under
    the random masks (draws x items): ``P_key / mean_d P_random,d - 1``; -1 is all of it lost,
    whatever the task's unmasked probability, so two tasks' changes are on one scale."""
    return np.exp(key_logprob) / np.exp(random_logprobs).mean(axis=0) - 1.0


def masked_specificity(study, spec: Mapping[str, Any], kit) -> dict[str, Any]:
    """001 sec. 3.8's specificity on a scale-free measure: :func:`relative_change` of each item of
    ``task`` against that of each item of ``other`` (the same key-neuron mask of size ``k``, each task
    against its own random masks), the difference of means by a permutation test over the two
    tasks' disjoint items, with every item's relative change as the arms (``task#index``)."""
    k, field = int(spec["k"]), "item_answer_logprob"
    sides = []
    for name in (spec["task"], spec["other"]):
        x, draws = _masked(study.samples, name, k, field, kit)
        sides.append((name, relative_change(x, draws), draws.shape[0]))
    (ta, va, da), (tb, vb, db) = sides
    t = stats.permutation_test(va, vb)
    out = dict(kit.record(t, f"samples.jsonl {field}, k={k}: relative change of the answer's probability "
                             f"(key mask / mean of random masks - 1), {ta} ({da} draws) - {tb} ({db} draws)"))
    out["scheme"] = {"test": "permutation of task labels over items", "permutations": stats.BOOTSTRAP_RESAMPLES,
                     "seed": stats.SEED}
    out["arms"] = {}
    for side, (name, v, _) in zip("ab", sides):
        arm = kit.arm_of(f"{name}: relative change of the answer's probability",
                         {f"{name}#{i}": float(u) for i, u in enumerate(v)})
        arm["answers"] = {}  # a change, not an answer: no uninformed level
        out["arms"][side] = arm
    return out


def utility_law(studies: Sequence, labels: Sequence[str], kit) -> dict[str, Any]:
    """A of the Utility Law fitted over ``folders`` (percent units, as the paper and
    ``mui law``), with its t-interval; also B, R^2 and the points. MUI is a union that grows
    with the items and tokens, so only runs of equal MUI settings are comparable: the fit takes
    the largest such group, and each run outside it is listed as left out with the settings
    that differ (a task run with more items or a longer budget than the rest). ``studies``: the
    children as the reproduction read them (each folder read once)."""
    from whitebox_eval.mui.over_runs import comparable_groups, fit_runs, mixed_settings

    kept, *others = comparable_groups(studies)
    left = [f"{labels[i]} (settings differ from the fit's runs: "
            + "; ".join(mixed_settings([studies[kept[0]], studies[i]])) + ")"
            for g in others for i in g]
    try:
        fit = fit_runs([studies[i] for i in kept], labels=[labels[i] for i in kept])
    except WhiteboxError as e:
        raise kit.Missing(str(e) + (f"; left out: {'; '.join(left)}" if left else "")) from None
    f = fit.fit
    if f.a_ci is None:
        raise kit.Missing(f"{f.n_points} points: the interval of A needs at least 3")
    return {"value": f.a, "lo": f.a_ci[0], "hi": f.a_ci[1], "p_value": None, "n": f.n_points,
            "test": "OLS t-interval of A (MUI = A ln(P) + B, percent units)", "source": "mui law over the runs",
            "b": f.b, "r2": f.r2, "points": [{"label": lab, "performance": p, "mui": m}
                                             for lab, p, m in zip(fit.labels, fit.performance, fit.mui)],
            "skipped": list(fit.skipped) + left}
