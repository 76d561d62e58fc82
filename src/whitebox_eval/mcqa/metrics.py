"""MCQA metrics of paper 000 (accuracy, Permutation Accuracy, selection bias, chance and
accuracy per option count).

000 = "Listening to the Wise Few: Select-and-Copy Attention Heads for MCQA".
Option indices are 0-based (0 = "A").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.stats.intervals import as_indices


def _pair(
    pred: np.ndarray | Sequence[int], gold: np.ndarray | Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    p, g = as_indices(pred, "predictions"), as_indices(gold, "gold")
    if p.shape != g.shape:
        raise WhiteboxError(f"predictions ({p.shape[0]}) and gold ({g.shape[0]}) differ in length")
    if p.size == 0:
        raise WhiteboxError("need at least one item to score")
    return p, g


# --------------------------------------------------------------------------- paper 000


def accuracy(predictions: np.ndarray | Sequence[int], gold: np.ndarray | Sequence[int]) -> float:
    """Share of items whose predicted option equals the gold option."""
    p, g = _pair(predictions, gold)
    return float(np.mean(p == g))


def per_layer_accuracy(option_scores: np.ndarray, gold: np.ndarray | Sequence[int]) -> np.ndarray:
    """Accuracy of ``argmax_i`` per layer for ``[items, layers, options]`` scores, ``[layers]``.

    For the logit lens of 000 App. F eq. 6 (``P_l(d_i) = softmax(W_U · LN(h^(l)))_{d_i}``);
    the argmax of the logits equals the argmax of the softmax.
    """
    s = np.asarray(option_scores)
    if s.ndim != 3:
        raise WhiteboxError(f"option_scores must be [items, layers, options]; got {s.shape}")
    g = as_indices(gold, "gold")
    if g.shape[0] != s.shape[0]:
        raise WhiteboxError(f"gold has {g.shape[0]} items but option_scores has {s.shape[0]}")
    return (np.argmax(s, axis=-1) == g[:, None]).mean(axis=0)


def permutation_accuracy(
    predictions: np.ndarray | Sequence[int],
    gold: np.ndarray | Sequence[int],
    permuted_predictions: np.ndarray | Sequence[int],
    permuted_gold: np.ndarray | Sequence[int],
) -> float:
    """Permutation Accuracy ``PA = (1/N) Σ_i I_i · I_i^p`` (000 sec. 5.3, after Gupta et al. 2024).

    ``I_i``: correct on the original item; ``I_i^p``: correct on the same item after its
    option contents (not letters) were shuffled; ``permuted_gold`` is the index of
    the correct content in the shuffled item.
    """
    p, g = _pair(predictions, gold)
    pp, pg = _pair(permuted_predictions, permuted_gold)
    if p.shape != pp.shape:
        raise WhiteboxError("original and permuted runs must cover the same items in the same order")
    return float(np.mean((p == g) & (pp == pg)))


@dataclass(frozen=True)
class SelectionBias:
    """Selection bias of 000 App. J (Fig. 28, Table 3).

    ``prediction_distribution[i]``: share of all predictions that are letter ``i``.
    ``recall[i]``: accuracy on the items whose gold letter is ``i`` (NaN if none).
    ``recall_std``: population standard deviation of ``recall`` over the letters that
    occur as gold — the RStd of Zheng et al. 2024; 0 means no selection bias.
    """

    prediction_distribution: np.ndarray
    recall: np.ndarray
    gold_counts: np.ndarray
    recall_std: float


def selection_bias(
    predictions: np.ndarray | Sequence[int], gold: np.ndarray | Sequence[int], n_options: int
) -> SelectionBias:
    """Prediction distribution, per-gold-letter recall and their spread (000 App. J)."""
    p, g = _pair(predictions, gold)
    if p.max() >= n_options or g.max() >= n_options or min(p.min(), g.min()) < 0:
        raise WhiteboxError(f"option indices must lie in [0, {n_options - 1}]")
    dist = np.bincount(p, minlength=n_options) / p.size
    gold_counts = np.bincount(g, minlength=n_options)
    hits = np.bincount(g[p == g], minlength=n_options)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(gold_counts > 0, hits / np.maximum(gold_counts, 1), np.nan)
    present = recall[gold_counts > 0]
    return SelectionBias(
        prediction_distribution=dist,
        recall=recall,
        gold_counts=gold_counts,
        recall_std=float(np.std(present)),
    )


# --------------------------------------------------------------------------- mixed option counts


def chance_accuracy(option_counts: np.ndarray | Sequence[int]) -> float:
    """Expected accuracy of a uniform random pick: the mean of ``1 / n_i`` over the items."""
    counts = np.asarray(option_counts, dtype=np.float64)
    if counts.size == 0 or np.any(counts < 1):
        raise WhiteboxError("chance needs at least one item, each with at least one option")
    if np.all(counts == counts[0]):
        return 1.0 / counts[0]  # exactly 1 / n for one count
    return float(np.mean(1.0 / counts))


def by_option_count(option_counts: np.ndarray | Sequence[int],
                    correct: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, dict]:
    """Per number of options ``n``: its items, chance ``1 / n`` and each method's accuracy on
    that method's items with ``n`` options. ``correct``: name -> (item indices, 0/1 per
    index), e.g. the baseline on every item and a selected head on the test items."""
    counts = np.asarray(option_counts, dtype=np.int64)
    table: dict[str, dict] = {}
    for n in sorted(set(counts.tolist())):
        row: dict = {"n_items": int((counts == n).sum()), "chance": 1.0 / n}
        for name, (items, hits) in correct.items():
            mask = counts[np.asarray(items, dtype=np.int64)] == n
            row[f"{name}_n"] = int(mask.sum())
            row[name] = float(np.asarray(hits)[mask].mean()) if mask.any() else None
        table[str(n)] = row
    return table
