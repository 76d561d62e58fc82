"""What an uninformed answerer scores on an arm's own items, and whether the arm beats it.

Every arm read from a child's samples carries its items (``items``: id -> value) and, where
the format has answers, each item's options and gold answer (``answers``: id -> ``[K, gold,
gold position]``). Two uninformed answerers are scored on those items:

- **constant answer**: the same answer every time -- the same option position (letter), or the
  same answer text -- at its best: the largest share of items whose gold is that position or
  that text;
- **uniform guess**: one of the K options drawn at random: mean 1/K over the items (0 for free
  text, where nothing is offered to guess from).

The level is the higher of the two. A 0/1 arm is tested against it with an exact binomial test
(greater); an arm of per-item values in [0, 1] (a probability of the correct answer) with a
one-sample t-test of its mean against the level (greater; the level is itself a mean over the
items), since the claims are about means. An arm without answers (MUI, a log-probability, an
attention share) has no uninformed level: ``level`` is None, ``applies`` False, and the text says so.

:func:`room` is the room-to-move antecedent of a claim that a manipulation lowers (raises) a
measure: the unedited arm away from the floor (ceiling) it would move toward.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from whitebox_eval import stats


def levels(answers: Mapping[str, Any], ids: list[str]) -> dict[str, float] | None:
    """``{constant, constant_answer, uniform, level}`` over ``ids`` from ``answers[id] = [K, gold,
    position]`` (K None: free text; position None: no options)."""
    rows = [answers[i] for i in ids if i in answers]
    if not rows:
        return None
    n = len(rows)
    by_text = Counter(str(r[1]) for r in rows)
    by_pos = Counter(r[2] for r in rows if r[2] is not None)
    text, k_text = by_text.most_common(1)[0]
    best = ("always", repr(text), k_text)
    if by_pos:
        pos, k_pos = by_pos.most_common(1)[0]
        if k_pos > k_text:
            best = ("always option", int(pos) + 1, k_pos)
    uniform = float(np.mean([1.0 / r[0] if r[0] else 0.0 for r in rows]))
    constant = best[2] / n
    return {"constant": constant, "constant_answer": f"{best[0]} {best[1]}", "uniform": uniform,
            "level": max(constant, uniform)}


def above(arm: Mapping[str, Any]) -> dict[str, Any]:
    """The arm against its uninformed level: ``{level, constant, uniform, test, p_value, above, text}``
    (``above`` None where the arm has no level or no per-item values)."""
    label = arm.get("label", "")
    items = arm.get("items")
    answers = arm.get("answers")
    if answers == {} or (items and not answers):  # declared ``answers: none``, or items without answer keys
        return {"above": None, "level": None, "applies": False,
                "text": f"{label}: a measure without answers, no uninformed level"}
    if not items:
        return {"above": None, "level": None,
                "text": f"{label}: no per-item values in the child run, its uninformed level is not computed"}
    ids = sorted(items)
    lv = levels(answers, ids)
    if lv is None:
        return {"above": None, "level": None, "text": f"{label}: no item with an answer key"}
    x = np.array([float(items[i]) for i in ids])
    level = lv["level"]
    binary = bool(np.all((x == 0) | (x == 1)))
    if binary:
        k, n = int(x.sum()), int(x.size)
        p = stats.binomial_p(k, n, level, "greater") if level < 1 else 1.0
        test = "exact binomial (greater)"
        shown = f"{k}/{n} = {100 * k / n:.1f}%"
    else:
        p = mean_p(x, level, "greater")
        test = "one-sample t-test of the mean (greater)"
        shown = f"mean {x.mean():.3f} over {x.size} items"
    ok = bool(p < stats.ALPHA)
    offered = any(answers[i][0] for i in ids if i in answers)
    uniform = f"uniform guess {100 * lv['uniform']:.1f}%" if offered else "no options offered to guess from"
    return {**lv, "above": ok, "p_value": float(p), "test": test.split(" (")[0], "n": int(x.size),
            "text": f"{label} {shown} vs its uninformed level {100 * level:.1f}% (constant answer "
                    f"{100 * lv['constant']:.1f}% [{lv['constant_answer']}], {uniform}): "
                    f"{test} {stats.fmt_p(p)}" + ("" if ok else " -- at chance")}


def variance(arm: Mapping[str, Any]) -> bool | None:
    """Whether the arm's per-item values vary (None: no per-item values)."""
    items = arm.get("items")
    if not items:
        return None
    return len({float(v) for v in items.values()}) > 1


def mean_p(x: np.ndarray, bound: float, alternative: str) -> float:
    """One-sample t-test of the mean of ``x`` against ``bound`` (``greater`` or ``less``; scipy's
    ``ttest_1samp``); values that do not vary give 0 when they all lie beyond the bound that way, else 1."""
    from scipy.stats import ttest_1samp

    x = np.asarray(x, dtype=float)
    beyond = (x > bound) if alternative == "greater" else (x < bound)
    if x.size < 2 or np.ptp(x) == 0:
        return 0.0 if x.size and bool(np.all(beyond)) else 1.0
    return float(ttest_1samp(x, bound, alternative=alternative).pvalue)


MEASURES = ("accuracy", "share", "unbounded")
"""What a moved measure is, for its bounds: an accuracy (floor: its uninformed level, ceiling 1), a
probability or share (0 and 1), an unbounded measure (a log-probability: no bound)."""


def measure_of(arm: Mapping[str, Any]) -> str:
    """The arm's declared ``measure``, else: 0/1 per-item values with answer keys an accuracy,
    values in [0, 1] a share, anything else unbounded."""
    if arm.get("measure"):
        return str(arm["measure"])
    vals = [float(v) for v in (arm.get("items") or {}).values()] or ([float(arm["value"])] if "value" in arm else [])
    if vals and all(v in (0.0, 1.0) for v in vals) and arm.get("answers"):
        return "accuracy"
    return "share" if vals and all(0.0 <= v <= 1.0 for v in vals) else "unbounded"


def room(arm: Mapping[str, Any], moves: str) -> dict[str, Any]:
    """Room to move: the unedited ``arm`` of a claim that a manipulation ``lowers`` (``raises``) the
    measure, significantly away from the floor (ceiling) it moves toward. The floor is the uninformed
    level for an accuracy (:func:`above`), 0 for a share; the ceiling 1 for both; an unbounded
    measure has none. A 0/1 arm is away from 0 or 1 when one item is (exact: one such item rejects
    the bound); per-item values by :func:`mean_p`. ``room`` None where it cannot be computed."""
    label, kind = arm.get("label", "unedited"), measure_of(arm)
    toward = "floor" if moves == "lowers" else "ceiling"
    head = f"{label} (unedited, {kind}; the claim {moves} it, toward its {toward})"
    if kind == "unbounded":
        return {"room": True, "measure": kind, "bound": None, "text": f"{head}: no {toward}, room to move"}
    if kind == "accuracy" and moves == "lowers":
        lv = above(arm)
        return {"room": lv["above"], "measure": kind, "bound": lv.get("level"), "test": lv.get("test"),
                "p_value": lv.get("p_value"), "text": f"{head}: {lv['text']}"
                + (" -- no room to move" if lv["above"] is False else "")}
    bound = 0.0 if moves == "lowers" else 1.0
    items = arm.get("items")
    x = np.array([float(v) for v in items.values()]) if items else None
    if x is None and kind == "accuracy" and arm.get("n") and "k" in arm:
        x = np.array([1.0] * int(arm["k"]) + [0.0] * (int(arm["n"]) - int(arm["k"])))
    if x is None or not x.size:
        return {"room": None, "measure": kind, "bound": bound, "text": f"{head}: no per-item values, not computed"}
    alternative = "greater" if moves == "lowers" else "less"
    binary = bool(np.all((x == 0) | (x == 1)))
    if binary:
        k = int(x.sum())
        p = 0.0 if (k > 0 if moves == "lowers" else k < x.size) else 1.0
        shown, test = f"{k}/{x.size}", f"exact ({'no item above 0' if moves == 'lowers' else 'every item at 1'} "\
                                        "is the only way to sit at the bound)"
    else:
        p, shown, test = mean_p(x, bound, alternative), f"mean {x.mean():.3g} over {x.size} items", \
            f"one-sample t-test of the mean ({alternative})"
    ok = bool(p < stats.ALPHA)
    return {"room": ok, "measure": kind, "bound": bound, "test": test, "p_value": float(p),
            "text": f"{head}: {shown} vs {bound:g}, {test} {stats.fmt_p(p)}" + ("" if ok else " -- no room to move")}
