"""Held-out protocol and controls of attention reinforcement (paper 003, sec. 5.1, App. G).

App. G picks N (top-N key heads) and C "to achieve significant performance improvement
on the end-to-end task"; the best grid point measured on the examples it was picked on
is biased upwards. The study therefore:

1. ranks heads on ``key_samples`` in-distribution examples (App. G step 1);
2. evaluates the key-head grid N x C on a *selection* split of OOD examples and picks
   the point with the highest accuracy (ties: higher partial accuracy, fewer heads,
   smaller C: :func:`choose_setting`);
3. reports that one point on a disjoint *evaluation* split (the study's OOD examples)
   beside no intervention, the *shifted-reference* control (same heads, same C, the
   neighbouring wrong cell) and *random heads* (same N from the key heads' layer band,
   never a key head, ``random_draws`` seeded draws, mean, sd and every draw);
4. tests on the same evaluation items: exact McNemar for reinforced vs none, vs the
   shifted reference, shifted reference vs none, and vs each random draw; reinforced
   vs random heads overall is a paired bootstrap of the reinforced 0/1 against the
   per-item share of random draws that got the item right (all draws, one test).

Everything here works on the study's sample records (``exact``, ``partial``,
``generation_exact``), sorted by example index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError

#: results["paired_tests"] names (also the CLI's words).
VS_NONE = "reinforced vs none"
VS_RANDOM = "reinforced vs random heads"
VS_SHIFTED = "reinforced vs shifted reference"
SHIFTED_VS_NONE = "shifted reference vs none"


def label(source: str, n: int, c: float, mode: str, draw: int | None = None) -> str:
    """Stage label of one setting: ``key-top5-C1-standard``, ``shifted-...``, ``random3-...``."""
    head = f"random{draw}" if source == "random" else source
    return f"{head}-top{n}-C{c:g}-{mode}"


def accuracy_block(records: Sequence[Mapping[str, Any]], *, generation: bool = False) -> dict:
    """Accuracy (Wilson) and partial accuracy (bootstrap) of a list of records, with n."""
    if not records:
        raise WhiteboxError("no records to score")
    out: dict[str, Any] = {}
    if generation:
        stats.add_proportion(out, "generation_accuracy", exact_vector(records, "generation_exact"))
    else:
        stats.add_proportion(out, "accuracy", exact_vector(records))
        stats.add_mean(out, "partial_accuracy", [float(r["partial"]) for r in records])
    return out


def exact_vector(records: Sequence[Mapping[str, Any]], key: str = "exact") -> np.ndarray:
    return np.array([bool(r[key]) for r in records], dtype=bool)


def selection_table(points: Sequence[tuple[int, float, Sequence[Mapping[str, Any]]]]) -> list[dict]:
    """One row per key-head grid point (N, C, its selection-split records)."""
    return [{"n_heads": n, "value": c, **accuracy_block(recs)} for n, c, recs in points]


def choose_setting(table: Sequence[Mapping[str, Any]]) -> dict:
    """The grid point with the highest selection accuracy (ties: higher partial accuracy,
    then fewer heads, then smaller C)."""
    if not table:
        raise WhiteboxError("the reinforcement grid is empty: give --heads and --values")
    best = max(table, key=lambda r: (r["accuracy"], r["partial_accuracy"], -r["n_heads"], -r["value"]))
    return dict(best)


def evaluation_report(base: Sequence[Mapping], key: Sequence[Mapping], shifted: Sequence[Mapping],
                      randoms: Sequence[tuple[int, Sequence[tuple[int, int]], Sequence[Mapping]]],
                      results: dict) -> dict:
    """The chosen setting on the evaluation split beside its controls, with paired tests.

    ``randoms`` holds (seed, heads, records) per draw. Paired tests go to
    ``results["paired_tests"]`` under :data:`VS_NONE`, :data:`VS_RANDOM`,
    :data:`VS_SHIFTED` and :data:`SHIFTED_VS_NONE`.
    """
    n = len(base)
    if not (len(key) == len(shifted) == n) or any(len(r) != n for _, _, r in randoms):
        raise WhiteboxError("reinforcement settings were scored on different numbers of items")
    b, k, s = exact_vector(base), exact_vector(key), exact_vector(shifted)
    report: dict[str, Any] = {
        "n": n,
        "no_intervention": accuracy_block(base),
        "reinforced": accuracy_block(key),
        "shifted_reference": accuracy_block(shifted),
    }
    stats.add_paired(results, VS_NONE, stats.mcnemar(k, b))
    stats.add_paired(results, VS_SHIFTED, stats.mcnemar(k, s))
    stats.add_paired(results, SHIFTED_VS_NONE, stats.mcnemar(s, b))
    if randoms:
        vs_mean, vs_each = stats.against_draws(k, [exact_vector(recs) for _, _, recs in randoms])
        draws = [{"seed": seed, "heads": [list(h) for h in heads], **accuracy_block(recs),
                  "reinforced_vs_this_draw": test.as_dict()}
                 for (seed, heads, recs), test in zip(randoms, vs_each)]
        report["random_heads"] = {
            "draws": draws,
            "accuracy": stats.draws([d["accuracy"] for d in draws]).as_dict(),
            "partial_accuracy": stats.draws([d["partial_accuracy"] for d in draws]).as_dict(),
        }
        stats.add_paired(results, VS_RANDOM, vs_mean)
    return report


def generation_report(base: Sequence[Mapping], key: Sequence[Mapping], shifted: Sequence[Mapping],
                      results: dict) -> dict:
    """Free greedy generation under reinforcement (whole-string accuracy) on the same items,
    with McNemar tests named ``generated: <test name>``."""
    b, k, s = (exact_vector(r, "generation_exact") for r in (base, key, shifted))
    stats.add_paired(results, f"generated: {VS_NONE}", stats.mcnemar(k, b))
    stats.add_paired(results, f"generated: {VS_SHIFTED}", stats.mcnemar(k, s))
    return {"n": len(b), "no_intervention": accuracy_block(base, generation=True),
            "reinforced": accuracy_block(key, generation=True),
            "shifted_reference": accuracy_block(shifted, generation=True)}
