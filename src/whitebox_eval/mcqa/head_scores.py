"""Per-head option scores, head accuracy tables and head selection (paper 000).

All functions are pure numpy: the engine supplies, for every item, every layer
and every head, one score per answer option (shape ``[items, layers, heads,
options]``), and the gold option index per item (shape ``[items]``).

Paper 000 = "Listening to the Wise Few: Select-and-Copy Attention Heads for
Multiple-Choice QA".

Tie conventions used throughout (the paper is silent unless noted):

* an item whose top score is shared by several options (equal within
  ``TIE_RTOL``) is *tied*; its predicted option is drawn among the tied options
  with a seeded random order (:func:`tie_break_order`), never silently the first
  option (taking the first made every constant head look like "always A");
* a head tied on more than ``DEGENERATE_TIE_SHARE`` of the selection items is
  *degenerate* (:func:`degenerate_heads`): it is reported, never ranked or selected;
* among heads with equal accuracy the head in the lower layer wins, then the
  lower head index (000 sec. 5.3 states the lower-layer rule);
* rankings of heads sort by value descending, then layer, then head ascending.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError

DEFAULT_VAL_FRACTION = 0.05
DEFAULT_MIN_VAL_ITEMS = 50

TIE_RTOL = 1e-6
"""Scores within this relative distance of an item's top score tie with it: about 8
float32 ulps (eps 1.2e-7), below the rounding noise of the scores' float32 sums."""

DEGENERATE_TIE_SHARE = 0.5
"""A head tied on more than this share of the selection items is degenerate."""


# --------------------------------------------------------------------------- checks


def _as_scores(scores: np.ndarray, name: str = "scores") -> np.ndarray:
    arr = np.asarray(scores)
    if arr.ndim != 4:
        raise WhiteboxError(
            f"{name} must have shape [items, layers, heads, options]; got shape {arr.shape}"
        )
    if arr.shape[0] == 0 or arr.shape[3] == 0:
        raise WhiteboxError(f"{name} needs at least one item and one option; got shape {arr.shape}")
    return arr


def _as_gold(gold: np.ndarray | Sequence[int], n_items: int, n_options: int) -> np.ndarray:
    arr = np.asarray(gold)
    if arr.ndim != 1 or arr.shape[0] != n_items:
        raise WhiteboxError(
            f"gold must be a 1-D array with one option index per item ({n_items}); "
            f"got shape {arr.shape}"
        )
    if not np.issubdtype(arr.dtype, np.integer):
        raise WhiteboxError("gold must hold integer option indices (0 = first option)")
    if arr.size and (arr.min() < 0 or arr.max() >= n_options):
        raise WhiteboxError(
            f"gold option indices must lie in [0, {n_options - 1}]; "
            f"got values from {arr.min()} to {arr.max()}"
        )
    return arr.astype(np.int64)


# --------------------------------------------------------------------------- eq. 3


def qk_scores(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """QK-score of 000 eq. 3: ``S_QK(d_i) = q_N^T k_{t_i}`` per head, without RoPE.

    ``queries``: last-token query per head, shape ``[items, layers, heads, d]``.
    ``keys``: key of each option-representative token ``t_i`` per head,
    shape ``[items, layers, heads, options, d]`` (pre-RoPE, GQA already expanded
    to query heads). Returns ``[items, layers, heads, options]``. No ``1/sqrt(d)``
    scaling: eq. 3 is the plain dot product (scaling would not change the argmax).
    """
    q = np.asarray(queries, dtype=np.float64)
    k = np.asarray(keys, dtype=np.float64)
    if q.ndim != 4 or k.ndim != 5 or k.shape[:3] != q.shape[:3] or k.shape[4] != q.shape[3]:
        raise WhiteboxError(
            "queries must be [items, layers, heads, d] and keys [items, layers, heads, options, d] "
            f"with matching items/layers/heads/d; got {q.shape} and {k.shape}"
        )
    return np.einsum("ilhd,ilhod->ilho", q, k)


def tied_items(scores: np.ndarray, rtol: float = TIE_RTOL) -> np.ndarray:
    """Whether several options share the top score, ``[...]`` bool for ``[..., options]``.

    Equal within ``rtol`` of the top score's magnitude (exact equality when it is 0).
    Padded ``-inf`` options never tie with a finite top; an all ``-inf`` row is tied.
    """
    arr = np.asarray(scores, dtype=np.float64)
    top = arr.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        near = arr >= top - rtol * np.abs(top)
    near |= arr == top  # -inf == -inf
    return near.sum(axis=-1) > 1


def tie_break_order(n_items: int, n_options: int, seed: int = 0) -> np.ndarray:
    """Seeded random priority of each option per item, ``[items, options]``.

    One priority per (item, option), shared by every head: slicing heads out of the full
    array gives the same predictions as predicting on the full array.
    """
    return np.random.default_rng([seed, 11]).random((n_items, n_options))


def option_predictions(scores: np.ndarray, seed: int = 0, rtol: float = TIE_RTOL) -> np.ndarray:
    """Predicted option per item and head: ``argmax_i S^{(l,h)}(d_i)`` (000 sec. 4).

    Works for QK-scores and Attention-scores (``a_{N,t_i}``) alike; input
    ``[items, layers, heads, options]`` (or ``[items, options]``, ...), output without the
    option axis, int. Tied items (see :func:`tied_items`) get one of their tied options
    by the seeded order of :func:`tie_break_order` over the items of ``scores``: pass the
    full item array and slice the predictions, so a split sees the same draws.
    """
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim < 2 or arr.shape[0] == 0 or arr.shape[-1] == 0:
        raise WhiteboxError(f"scores must be [items, ..., options] (e.g. [items, layers, heads, options]); got shape {arr.shape}")
    pred = np.argmax(arr, axis=-1)
    tied = tied_items(arr, rtol)
    if not tied.any():
        return pred
    top = arr.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        near = (arr >= top - rtol * np.abs(top)) | (arr == top)
    prio = tie_break_order(arr.shape[0], arr.shape[-1], seed)
    prio = prio.reshape((arr.shape[0],) + (1,) * (arr.ndim - 2) + (arr.shape[-1],))
    drawn = np.argmax(np.where(near, prio, -1.0), axis=-1)
    return np.where(tied, drawn, pred)


def degenerate_heads(scores: np.ndarray, share: float = DEGENERATE_TIE_SHARE, rtol: float = TIE_RTOL) -> np.ndarray:
    """Heads whose scores tie across options on more than ``share`` of the items, ``[layers, heads]`` bool.

    Such a head carries no choice (e.g. layer-0 QK-scores: the pre-RoPE key of the same
    end-of-line token is identical for every option); its accuracy is the tie-break's.
    """
    arr = _as_scores(scores)
    return tied_items(arr, rtol).mean(axis=0) > share


def qk_predictions(qk: np.ndarray) -> np.ndarray:
    """Option predicted by the QK-score of every head (000 eq. 3, argmax)."""
    return option_predictions(qk)


def attention_predictions(attention: np.ndarray) -> np.ndarray:
    """Option predicted by the Attention-score ``a_{N,t_i}`` of every head (000 eq. 3)."""
    return option_predictions(attention)


def option_probabilities(scores: np.ndarray) -> np.ndarray:
    """Softmax of per-head option scores over options (000 sec. 4, last paragraph)."""
    arr = np.asarray(scores, dtype=np.float64)
    shifted = arr - arr.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def head_correct_counts(scores: np.ndarray, gold: np.ndarray | Sequence[int], seed: int = 0) -> np.ndarray:
    """Number of items each head answers correctly, ``[layers, heads]`` int (ties: seeded draw)."""
    arr = _as_scores(scores)
    g = _as_gold(gold, arr.shape[0], arr.shape[3])
    pred = option_predictions(arr, seed)
    return (pred == g[:, None, None]).sum(axis=0)


def head_accuracy(scores: np.ndarray, gold: np.ndarray | Sequence[int], seed: int = 0) -> np.ndarray:
    """Per-head accuracy table ``[layers, heads]`` of the argmax prediction (000 sec. 4)."""
    arr = _as_scores(scores)
    return head_correct_counts(arr, gold, seed) / arr.shape[0]


def rank_heads(table: np.ndarray, descending: bool = True, exclude: np.ndarray | None = None) -> list[Head]:
    """Heads of a ``[layers, heads]`` table sorted by value; ties: lower layer, then head.

    Heads where ``exclude`` (``[layers, heads]`` bool, e.g. :func:`degenerate_heads`) is
    true are left out of the ranking.
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2:
        raise WhiteboxError(f"a head table must have shape [layers, heads]; got {t.shape}")
    layers, heads = np.indices(t.shape)
    key = -t if descending else t
    order = np.lexsort((heads.ravel(), layers.ravel(), key.ravel()))
    keep = np.ones(t.size, bool) if exclude is None else ~np.asarray(exclude, bool).ravel()
    if keep.size != t.size:
        raise WhiteboxError(f"exclude must have the table's shape {t.shape}")
    return [(int(layers.ravel()[i]), int(heads.ravel()[i])) for i in order if keep[i]]


def best_head(table: np.ndarray) -> Head:
    """The head with the highest value; ties go to the lower layer, then the lower head."""
    return rank_heads(table)[0]


# --------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class Split:
    """A seeded validation/test partition of item indices (both sorted ascending)."""

    val: np.ndarray
    test: np.ndarray


def validation_split(
    n_items: int,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    min_val_items: int = DEFAULT_MIN_VAL_ITEMS,
    seed: int = 0,
) -> Split:
    """Random ``D = D_val ∪ D_test`` split (000 sec. 4, sec. 5.1: ``D_val`` is 5% of ``D``).

    ``|D_val| = max(ceil(val_fraction * n_items), min_val_items)``; at least one item
    must remain for ``D_test``. The default floor of 50 items is this library's
    choice (5% of a small dataset gives too few items to rank heads); pass a
    smaller ``min_val_items`` to override. The same ``n_items`` and ``seed`` always
    give the same split, so the original and option-permuted runs share it.
    """
    if not 0.0 < val_fraction < 1.0:
        raise WhiteboxError(f"val_fraction must lie strictly between 0 and 1; got {val_fraction}")
    if min_val_items < 1:
        raise WhiteboxError(f"min_val_items must be at least 1; got {min_val_items}")
    n_val = max(math.ceil(val_fraction * n_items), min_val_items)
    if n_val >= n_items:
        raise WhiteboxError(
            f"validation needs {n_val} items (val_fraction={val_fraction}, "
            f"min_val_items={min_val_items}) plus at least one test item, but only "
            f"{n_items} items were given: use more items or pass a smaller min_val_items"
        )
    perm = np.random.default_rng(seed).permutation(n_items)
    return Split(val=np.sort(perm[:n_val]), test=np.sort(perm[n_val:]))


@dataclass(frozen=True)
class HeadSelection:
    """Best head chosen on ``D_val`` and its result on ``D_test`` (000 sec. 4, 5.3)."""

    layer: int
    head: int
    val_accuracy: float
    test_accuracy: float
    val_accuracy_table: np.ndarray  # [layers, heads]
    test_accuracy_table: np.ndarray  # [layers, heads], for analysis only
    split: Split
    test_predictions: np.ndarray  # [len(split.test)] option index of the chosen head
    degenerate: np.ndarray  # [layers, heads] bool: tied on most validation items, never selected
    predictions: np.ndarray  # [items] the chosen head's prediction on every item (ties drawn)
    correct: np.ndarray  # [items] 0/1: the chosen head is right on the item

    @property
    def head_id(self) -> Head:
        return (self.layer, self.head)

    @property
    def test_correct(self) -> np.ndarray:
        """0/1 per test item (for intervals and paired tests)."""
        return self.correct[self.split.test]


def select_best_head(
    scores: np.ndarray,
    gold: np.ndarray | Sequence[int],
    val_fraction: float = DEFAULT_VAL_FRACTION,
    min_val_items: int = DEFAULT_MIN_VAL_ITEMS,
    seed: int = 0,
    split: Split | None = None,
) -> HeadSelection:
    """Pick the single best head by accuracy on ``D_val`` and apply it to ``D_test``.

    000 sec. 4 ("Choosing the predicting heads") and sec. 5.3: no aggregation over
    heads; equal validation accuracy goes to the lower layer (then lower head).
    Degenerate heads (tied on most validation items, :func:`degenerate_heads`) are never
    chosen. Tied items are drawn with ``seed`` (:func:`option_predictions`).
    ``scores`` are QK- or Attention-scores ``[items, layers, heads, options]``.
    Pass ``split`` to reuse a partition (e.g. the one PriDe estimates its prior on).
    """
    arr = _as_scores(scores)
    g = _as_gold(gold, arr.shape[0], arr.shape[3])
    if split is None:
        split = validation_split(arr.shape[0], val_fraction, min_val_items, seed)
    elif len(split.val) == 0 or len(split.test) == 0:
        raise WhiteboxError("the given split needs at least one validation and one test item")
    pred = option_predictions(arr, seed)  # on every item, then split: the same draws either way
    correct = pred == g[:, None, None]
    degenerate = degenerate_heads(arr[split.val])
    val_counts = correct[split.val].sum(axis=0)
    test_counts = correct[split.test].sum(axis=0)
    ranked = rank_heads(val_counts, exclude=degenerate)  # integer counts make ties exact
    if not ranked:
        raise WhiteboxError("every head's scores tie across the options on most validation items; "
                            "no head can be selected (try another --representative)")
    layer, head = ranked[0]
    return HeadSelection(
        layer=layer,
        head=head,
        val_accuracy=float(val_counts[layer, head] / len(split.val)),
        test_accuracy=float(test_counts[layer, head] / len(split.test)),
        val_accuracy_table=val_counts / len(split.val),
        test_accuracy_table=test_counts / len(split.test),
        split=split,
        test_predictions=pred[split.test, layer, head],
        degenerate=degenerate,
        predictions=pred[:, layer, head],
        correct=correct[:, layer, head].astype(np.int64),
    )


# --------------------------------------------------------------------------- App. I


def head_score(attention: np.ndarray, seed: int = 0) -> np.ndarray:
    """Label-free HeadScore of 000 App. I, one value per head, ``[layers, heads]``.

    ``HeadScore = (1/|D| Σ_D Σ_{i=1..n} a_{N,t_i}) · (1/|D| Σ_D 1{argmax_i a_{N,t_i} ≠ î})``

    where ``a_{N,t_i}`` is the attention of the last token on option-representative
    token ``t_i`` (input ``[items, layers, heads, options]``) and ``î`` is the option
    the head picks most often over the dataset. The left factor is the mean total
    attention on the option tokens; the right is the share of items whose
    top-attended option is not ``î``, i.e. ``1 - (count of î)/|D|``. (The printed
    formula drops the Σ in the right factor; the prose defines it as a frequency.)
    Which mode is ``î`` when two options tie for most frequent does not change the value.
    Items whose attention ties across options count for a seeded random option
    (:func:`option_predictions`); callers exclude :func:`degenerate_heads` from rankings.
    """
    arr = _as_scores(attention, "attention")
    n_items, n_options = arr.shape[0], arr.shape[3]
    mass = arr.sum(axis=-1).mean(axis=0)
    picks = option_predictions(arr, seed)  # [items, layers, heads]; ties drawn, not "always the first"
    counts = np.stack([(picks == i).sum(axis=0) for i in range(n_options)], axis=-1)
    share_not_mode = 1.0 - counts.max(axis=-1) / n_items
    return mass * share_not_mode


# --------------------------------------------------------------------------- sec. 6 / App. D, E


def top_fraction_count(n_heads_total: int, fraction: float) -> int:
    """How many heads make the "top p%": ``max(1, floor(p · n_heads_total))``.

    The paper (sec. 6, App. D) does not say how to round; flooring keeps the set
    within p% (LLaMA2-7B: 1% of 1024 heads = 10 heads, as in its Table (a)).
    """
    if not 0.0 < fraction <= 1.0:
        raise WhiteboxError(f"fraction must lie in (0, 1]; got {fraction}")
    return max(1, math.floor(fraction * n_heads_total + 1e-9))


def top_heads(table: np.ndarray, fraction: float = 0.01) -> list[Head]:
    """The top ``fraction`` of heads of a ``[layers, heads]`` accuracy table, best first."""
    t = np.asarray(table)
    return rank_heads(t)[: top_fraction_count(t.size, fraction)]


def _stack_tables(tables: Sequence[np.ndarray] | Mapping[object, np.ndarray]) -> np.ndarray:
    items = list(tables.values()) if isinstance(tables, Mapping) else list(tables)
    if not items:
        raise WhiteboxError("need at least one accuracy table")
    shapes = {np.shape(t) for t in items}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise WhiteboxError(f"accuracy tables must all be [layers, heads] of one shape; got {shapes}")
    return np.stack([np.asarray(t, dtype=np.float64) for t in items])


def intersect_top_heads(
    tables: Sequence[np.ndarray] | Mapping[object, np.ndarray], fraction: float = 0.01
) -> list[Head]:
    """Heads in the top ``fraction`` of every table (000 App. D, Fig. 10b), sorted by (layer, head)."""
    stacked = _stack_tables(tables)
    sets = [set(top_heads(t, fraction)) for t in stacked]
    return sorted(set.intersection(*sets))


def union_top_heads(
    tables: Sequence[np.ndarray] | Mapping[object, np.ndarray], fraction: float = 0.01
) -> list[Head]:
    """Heads in the top ``fraction`` of at least one table, sorted by (layer, head)."""
    stacked = _stack_tables(tables)
    return sorted(set().union(*(set(top_heads(t, fraction)) for t in stacked)))


def mixed_top_heads(
    tables: Sequence[np.ndarray] | Mapping[object, np.ndarray], fraction: float = 0.05
) -> list[Head]:
    """Top ``fraction`` of heads by mean accuracy over a mix of setups (000 sec. 6, Fig. 5a)."""
    return top_heads(_stack_tables(tables).mean(axis=0), fraction)


def universal_heads(
    tables: Mapping[int, Sequence[np.ndarray] | Mapping[object, np.ndarray]],
    fraction: float = 0.01,
) -> list[Head]:
    """Heads good for every shot count (000 App. D, Listing 9).

    ``tables[shots]`` holds one accuracy table per dataset. For each shot count the
    top ``fraction`` heads of each dataset are pooled (union), then the pools are
    intersected over shot counts. Result sorted by (layer, head).
    """
    if not tables:
        raise WhiteboxError("need accuracy tables for at least one shot count")
    pools = [set(union_top_heads(per_dataset, fraction)) for per_dataset in tables.values()]
    return sorted(set.intersection(*pools))


def percentile_table(table: np.ndarray) -> np.ndarray:
    """Share of the *other* heads each head beats strictly: ``#{a' < a} / (n - 1)`` (000 App. E).

    Fig. 11: "k-th minimum of percentiles means that the head is better than k share
    of all heads". Excluding the head itself is this library's choice, so the best
    head of a table scores 1 and the worst 0.
    """
    t = np.asarray(table, dtype=np.float64)
    flat = t.ravel()
    n = flat.size
    if n < 2:
        raise WhiteboxError("percentiles need a table with at least two heads")
    below = np.searchsorted(np.sort(flat), flat, side="left")
    return (below / (n - 1)).reshape(t.shape)


def min_percentile(tables: Sequence[np.ndarray] | Mapping[object, np.ndarray]) -> np.ndarray:
    """Minimum over tasks of each head's accuracy percentile, ``[layers, heads]`` (000 App. E)."""
    stacked = _stack_tables(tables)
    return np.min(np.stack([percentile_table(t) for t in stacked]), axis=0)
