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
(greater); an arm of per-item values in [0, 1] (a probability of the correct answer) with an exact
sign test of ``value - level`` (ties dropped). An arm without answers (MUI, a log-probability, an
attention share) has no uninformed level: ``level`` is None, ``applies`` False, and the text says so.
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
        d = x - level
        pos, neg = int(np.sum(d > 0)), int(np.sum(d < 0))
        p = stats.binomial_p(pos, pos + neg, 0.5, "greater") if pos + neg else 1.0
        test = f"exact sign test (greater; {pos} items above, {neg} below, {int(x.size) - pos - neg} tied)"
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
