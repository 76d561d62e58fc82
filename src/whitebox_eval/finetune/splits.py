"""The three splits of every training: train, validation, test, none seen by the others.

Items are first deduplicated by their canonical form (:func:`canonical`: case and white space
folded, the operands of ``+`` and ``x``/``*``/``×`` sorted, so ``22 + 75`` and ``75 + 22`` are
one item); the first ``shots`` of a seeded order are the few-shot demonstration pool (prompts
of the check draw from it, training never sees it), then the test and validation shares, the
rest is training. Each split's hash is a SHA-256 of its items' canonical forms in order: the
run folder records it, and two trainings with the same hashes saw the same data.

- train: the only items the loop steps on;
- validation: the loss that chooses between recipes and stops early;
- test: the held-out check before and after, and every claim.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from whitebox_eval.errors import WhiteboxError

SPLITS = ("train", "validation", "test")
_SPACES = re.compile(r"\s+")
_COMMUTATIVE = re.compile(r"(-?\d+(?:\.\d+)?)\s*([+x×*])\s*(-?\d+(?:\.\d+)?)")


def canonical(text: str) -> str:
    """``text`` folded for deduplication: lower case, runs of white space as one space, and the
    two operands of every ``a + b`` / ``a x b`` (``*``, ``×``) in ascending numeric order."""
    folded = _SPACES.sub(" ", str(text).strip().lower())

    def ordered(m: re.Match) -> str:
        a, op, b = m.group(1), "x" if m.group(2) in "x×*" else "+", m.group(3)
        lo, hi = sorted((a, b), key=float)
        return f"{lo} {op} {hi}"

    return _COMMUTATIVE.sub(ordered, folded)


def split_hash(forms: Sequence[str]) -> str:
    """SHA-256 of a split's canonical forms in order (one per line)."""
    h = hashlib.sha256()
    for f in forms:
        h.update(f.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


@dataclass
class Splits:
    """The items of each split and the demonstration pool (each a list of the caller's items),
    how many duplicates were dropped, and the recipe of the split."""

    train: list[Any]
    validation: list[Any]
    test: list[Any]
    demos: list[Any]
    duplicates: int
    forms: dict[str, list[str]]

    def record(self, seed: int) -> dict[str, Any]:
        """What the run folder keeps: each split's size, hash and item ids, and the rule."""
        return {"rule": "deduplicated by canonical form (case and white space folded, operands of + and x "
                        "sorted); demonstration pool, test and validation drawn first from a seeded order, the rest "
                        "is training; no item is in two splits",
                "seed": seed, "duplicates_dropped": self.duplicates,
                **{name: {"n": len(getattr(self, name)), "sha256": split_hash(self.forms[name]),
                          "ids": [str(it.id) for it in getattr(self, name)]}
                   for name in (*SPLITS, "demos")}}


def make_splits(items: Sequence[Any], *, validation: float, test: float, shots: int, seed: int) -> Splits:
    """Deduplicate ``items`` (each with ``.id`` and ``.form``, its canonical form) and deal them
    into the demonstration pool (``shots`` items), test and validation (shares of what is left,
    at least one item each) and train, by one seeded shuffle."""
    if not (0 < validation < 1 and 0 < test < 1 and validation + test < 1):
        raise WhiteboxError("validation and test are shares of the items: each in (0, 1), their sum below 1")
    seen: set[str] = set()
    unique = []
    for it in items:
        if it.form not in seen:
            seen.add(it.form)
            unique.append(it)
    order = list(range(len(unique)))
    random.Random(f"finetune/splits/{seed}").shuffle(order)
    pool = [unique[i] for i in order]
    rest = len(pool) - shots
    n_test, n_val = max(1, round(rest * test)), max(1, round(rest * validation))
    if rest - n_test - n_val < 1:
        raise WhiteboxError(f"{len(unique)} distinct items ({len(items) - len(unique)} duplicates dropped) are too "
                            f"few for {shots} demonstrations, a test, a validation and a training split; give more items")
    demos, pool = pool[:shots], pool[shots:]
    test_items, val_items, train = pool[:n_test], pool[n_test:n_test + n_val], pool[n_test + n_val:]
    forms = {name: [it.form for it in part] for name, part in
             (("train", train), ("validation", val_items), ("test", test_items), ("demos", demos))}
    return Splits(train, val_items, test_items, demos, len(items) - len(unique), forms)


def context_draw(pool: Sequence[Any], k: int, key: str, exclude: int | None = None) -> list[Any]:
    """``k`` items of ``pool`` (never its ``exclude``-th) to precede one trained line, drawn from
    ``random.Random(key)`` so each line's context is fixed by its key (``finetune --train-context``)."""
    if not k:
        return []
    others = [j for j in range(len(pool)) if j != exclude]
    if len(others) < k:
        raise WhiteboxError(f"--train-context {k} needs more than {k} training items; there are {len(pool)}")
    return [pool[j] for j in random.Random(key).sample(others, k)]
