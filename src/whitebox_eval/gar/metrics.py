"""GAR metrics that can move on small models, with intervals and paired tests.

The paper's rule (App. C: correct when P(target) > 1 / #choices) suits 7B-70B models
that put most next-token mass on the choices.  A small model may put a third of its
mass there, so every example is "wrong" by that rule while its predictions still
change under an intervention.  Beside the paper's rule we therefore report, each with
a 95% interval from :mod:`whitebox_eval.stats`:

* ``acc,appc``: the paper's rule (Wilson interval);
* ``acc,argmax``: the target has the highest first-token probability among the choices
  (Wilson interval);
* ``p_target``: mean first-token P(target) over the whole vocabulary (bootstrap);
* ``choice_mass``: mean total first-token probability on the choices (distinct first
  tokens counted once; bootstrap).

An intervention compares the same examples before and after: the paired change in
P(target) (paired bootstrap), in argmax accuracy and in App. C accuracy (exact McNemar),
and how many argmax predictions flipped.  :func:`effect_sentence` words it for the CLI
summary and never says "no effect" when a prediction changed.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from whitebox_eval import stats
from whitebox_eval.gar.scoring import ExampleScore

METRICS = ("acc,appc", "acc,argmax", "p_target", "choice_mass")


def score_metrics(scores: Sequence[ExampleScore]) -> dict[str, Any]:
    """The four metrics of the module doc with their intervals (stats keys)."""
    return record_metrics([s.to_dict() for s in scores])


def record_metrics(records: Sequence[dict]) -> dict[str, Any]:
    """:func:`score_metrics` from sample records (``correct``, ``correct_argmax``,
    ``target_prob``, ``choice_mass``; records written before ``choice_mass`` existed skip it)."""
    out: dict[str, Any] = {}
    if not records:
        return out
    stats.add_proportion(out, "acc,appc", [bool(r["correct"]) for r in records])
    stats.add_proportion(out, "acc,argmax", [bool(r["correct_argmax"]) for r in records])
    stats.add_mean(out, "p_target", [float(r["target_prob"]) for r in records])
    if all(r.get("choice_mass") is not None for r in records):
        stats.add_mean(out, "choice_mass", [float(r["choice_mass"]) for r in records])
    return out


def intervention_summary(before: Sequence[ExampleScore], after: Sequence[ExampleScore]) -> dict[str, Any]:
    """Before/after metrics, paired tests (after - before) and prediction flips on the same examples."""
    if len(before) != len(after):
        raise ValueError(f"{len(before)} scores before but {len(after)} after")
    n = len(before)
    res: dict[str, Any] = {"n": n, "before": score_metrics(before), "after": score_metrics(after)}
    changed = sum(a.prediction != b.prediction for a, b in zip(before, after))
    to_correct = sum(a.correct_argmax and not b.correct_argmax for b, a in zip(before, after))
    to_wrong = sum(b.correct_argmax and not a.correct_argmax for b, a in zip(before, after))
    res["predictions_changed"] = changed
    res["flips"] = {"changed": changed, "argmax_to_correct": to_correct, "argmax_to_wrong": to_wrong}
    if n:
        stats.add_paired(res, "p_target", stats.paired_bootstrap([s.target_prob for s in after],
                                                                  [s.target_prob for s in before]))
        stats.add_paired(res, "acc,argmax", stats.mcnemar([s.correct_argmax for s in after],
                                                           [s.correct_argmax for s in before]))
        stats.add_paired(res, "acc,appc", stats.mcnemar([s.correct for s in after], [s.correct for s in before]))
        res["max_abs_change_p_target"] = float(max(abs(a.target_prob - b.target_prob) for a, b in zip(after, before)))
    # flat keys (plots and older readers)
    for when, m in (("before", res["before"]), ("after", res["after"])):
        res[f"accuracy_{when}"] = m.get("acc,appc", float("nan"))
        res[f"argmax_{when}"] = m.get("acc,argmax", float("nan"))
        res[f"mean_target_prob_{when}"] = m.get("p_target", float("nan"))
        res[f"choice_mass_{when}"] = m.get("choice_mass", float("nan"))
    res["effect"] = effect_sentence(res)
    return res


def effect_sentence(summary: dict[str, Any]) -> str:
    """One line on what an intervention did: flips, then the paired tests' verdicts.

    It says "no prediction changed" only when none did, and then still gives the change
    in P(target) (an intervention can move probabilities without flipping an answer)."""
    n = summary["n"]
    fl = summary["flips"]
    tests = summary.get("paired_tests", {})
    if fl["changed"]:
        head = (f"{fl['changed']}/{n} argmax predictions changed ({fl['argmax_to_correct']} to the target, "
                f"{fl['argmax_to_wrong']} away from it)")
    else:
        head = f"no argmax prediction changed (0/{n})"
    parts = [head]
    if "acc,argmax" in tests:
        parts.append(stats.verdict(tests["acc,argmax"], "argmax accuracy after - before"))
    if "p_target" in tests:
        parts.append(stats.verdict(tests["p_target"], "P(target) after - before"))
    return "; ".join(parts)


def random_control(selected: dict[str, Any], draws: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Selected heads vs random heads of the same count: each draw's paired changes
    (mean, sd, every draw via :func:`stats.draws`) beside the selected heads' change."""
    def delta(s: dict[str, Any], key: str) -> float:
        return float(s["paired_tests"][key]["diff"])

    out: dict[str, Any] = {"n_draws": len(draws)}
    for key in ("p_target", "acc,argmax"):
        vals = [delta(d, key) for d in draws]
        out[f"delta_{key}"] = {"selected": delta(selected, key), "random": stats.draws(vals).as_dict(),
                               "random_draws_at_least_selected": int(np.sum(np.asarray(vals) >= delta(selected, key)))}
    out["flips"] = {"selected": selected["predictions_changed"], "random": stats.draws(
        [d["predictions_changed"] for d in draws]).as_dict()}
    return out


def matched_gap(examples: Sequence[Any], weights: np.ndarray) -> dict[str, Any]:
    """Fig. 4a for one class of heads: its matched attention weight (``weights``, one value
    per example: the class's mean over heads, NaN where the example lacks the pattern) on
    the easiest generation tasks (n_r = 0: same, same) vs the hardest (n_r = 2: other,
    other), separately for affirmative (A) and negative (N) tasks.  Each side gets a
    bootstrap interval and the gap (easiest - hardest) a permutation test of the group
    labels (the two groups hold different examples).  A side with fewer than two examples
    is reported without a test."""
    w = np.asarray(weights, dtype=np.float64)
    out: dict[str, Any] = {}
    for name, neg in (("A", False), ("N", True)):
        groups = {}
        for label, n_r in (("easiest", 0), ("hardest", 2)):
            groups[label] = np.array([w[i] for i, e in enumerate(examples)
                                      if not e.task.g2c and not e.task.is_kr and e.task.negate == neg
                                      and e.task.n_r == n_r and np.isfinite(w[i])])
        if not any(len(v) for v in groups.values()):
            continue
        side: dict[str, Any] = {}
        for label, v in groups.items():
            if len(v):
                stats.add_mean(side, f"matched,{label}", v)
        if all(len(v) >= 2 for v in groups.values()):
            stats.add_paired(side, "gap", stats.permutation_test(groups["easiest"], groups["hardest"]))
            side["verdict"] = stats.verdict(side["paired_tests"]["gap"], "matched weight easiest - hardest")
        out[name] = side
    return out
