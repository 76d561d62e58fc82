"""PriDe: prior debiasing of option-letter probabilities (000 eq. 5; Zheng et al. 2024).

Zheng et al. ("Large Language Models Are Not Robust Multiple Choice Selectors",
ICLR 2024) factor the observed probability of option letter ``d_i`` as

    P_obs(d_i | q, x) = Z⁻¹ · P_prior(d_i) · P_debiased(o_i | q, x),

a content-independent prior over letters times a position-independent preference
for the content ``o_i`` shown at that letter. Under the ``n`` cyclic permutations
``I_p`` (position ``j`` shows content ``(j + p) mod n``, 000 sec. 5.2) every content
visits every position exactly once, so averaging log probabilities over the
permutations makes the content term the same for every letter, and

    P_prior(d_i | q) = softmax_i( (1/n) Σ_p log P_obs^{(p)}(d_i | q) )            (prior)

i.e. the normalised geometric mean over permutations of the probability observed at
letter ``i`` (each permutation's probabilities are first renormalised over the
option letters; that common factor cancels in the softmax anyway). The dataset
prior is the arithmetic mean of the per-item priors over the estimation subset
``D_e`` (default 5% of the items, 000 sec. 5.2), and every other item is debiased
with one forward pass in the original order:

    P_debiased(o_i | q, x) ∝ P_obs(d_i | q, x) / P_prior(d_i),  prediction = argmax_i. (debias)

Items of ``D_e`` were already seen under all permutations; their prediction is the
permutation average of 000 eq. 5 over contents,
``P̃(o_k) = softmax_k( (1/n) Σ_p log P_obs^{(p)}(letter showing o_k) )``.
Zheng et al.'s released code averages probabilities instead of log probabilities for
this step; ``aggregate="mean"`` selects that variant.

Orders: an ``order`` array ``[n]`` says which original option content is shown at
each letter position (``order[j] = k``). Custom order sets (e.g. rotating A–D while
"I don't know"/"None of the above" stay fixed, as 000 does) are accepted; the prior
of a fixed position then also absorbs its fixed content's preference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mcqa.head_scores import Split, validation_split

DEFAULT_ESTIMATION_FRACTION = 0.05
DEFAULT_EPS = 1e-10

Aggregate = Literal["log_mean", "mean"]


def cyclic_orders(n_options: int) -> np.ndarray:
    """The ``n`` cyclic permutations of 000 sec. 5.2: ``orders[p, j] = (j + p) mod n``."""
    if n_options < 2:
        raise WhiteboxError(f"PriDe needs at least two options; got {n_options}")
    j = np.arange(n_options)
    return (j[None, :] + j[:, None]) % n_options


def _check_orders(orders: np.ndarray, n_options: int) -> np.ndarray:
    o = np.asarray(orders)
    if o.ndim != 2 or o.shape[1] != n_options or o.shape[0] < 1:
        raise WhiteboxError(f"orders must have shape [permutations, {n_options}]; got {o.shape}")
    target = np.arange(n_options)
    for row in o:
        if not np.array_equal(np.sort(row), target):
            raise WhiteboxError(f"each order must be a permutation of 0..{n_options - 1}; got {row}")
    return o.astype(np.int64)


def _normalised(probs: np.ndarray) -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64)
    if np.any(~np.isfinite(p)) or np.any(p < 0):
        raise WhiteboxError("option-letter probabilities must be finite and non-negative")
    total = p.sum(axis=-1, keepdims=True)
    if np.any(total <= 0):
        raise WhiteboxError("every row of option-letter probabilities needs a positive sum")
    return p / total


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _check_perm_probs(perm_probs: np.ndarray) -> np.ndarray:
    p = np.asarray(perm_probs, dtype=np.float64)
    if p.ndim != 3 or p.shape[0] < 1:
        raise WhiteboxError(
            "permutation probabilities must have shape [items, permutations, options] "
            f"with at least one item; got {p.shape}"
        )
    return _normalised(p)


def item_priors(perm_probs: np.ndarray, eps: float = DEFAULT_EPS) -> np.ndarray:
    """Per-item letter prior ``softmax_i(mean_p log P_obs^{(p)}(d_i))``, ``[items, options]``.

    ``perm_probs``: ``[items, permutations, options]`` probabilities by letter position.
    """
    p = _check_perm_probs(perm_probs)
    return _softmax(np.log(p + eps).mean(axis=1))


def estimate_prior(perm_probs: np.ndarray, eps: float = DEFAULT_EPS) -> np.ndarray:
    """Dataset prior over letters: the mean of the per-item priors over ``D_e`` (Zheng et al.)."""
    return item_priors(perm_probs, eps).mean(axis=0)


def permutation_average(
    perm_probs: np.ndarray,
    orders: np.ndarray | None = None,
    aggregate: Aggregate = "log_mean",
    eps: float = DEFAULT_EPS,
) -> np.ndarray:
    """Permutation-averaged probability per original option content, ``[items, options]`` (000 eq. 5).

    ``log_mean``: ``softmax_k((1/|I|) Σ_I log P(π_I(d_k) | q, d, π_I(o)))`` as in eq. 5;
    ``mean``: the arithmetic mean of those probabilities (renormalised).
    """
    p = _check_perm_probs(perm_probs)
    n_perm, n_opt = p.shape[1], p.shape[2]
    o = cyclic_orders(n_opt) if orders is None else _check_orders(orders, n_opt)
    if o.shape[0] != n_perm:
        raise WhiteboxError(f"got {n_perm} permutations of probabilities but {o.shape[0]} orders")
    # by_content[e, p, k] = probability at the letter that shows content k in permutation p
    position_of = np.argsort(o, axis=1)  # position_of[p, k] = j with o[p, j] == k
    by_content = np.take_along_axis(p, position_of[None, :, :], axis=2)
    if aggregate == "log_mean":
        return _softmax(np.log(by_content + eps).mean(axis=1))
    if aggregate == "mean":
        m = by_content.mean(axis=1)
        return m / m.sum(axis=-1, keepdims=True)
    raise WhiteboxError(f"aggregate must be 'log_mean' or 'mean'; got {aggregate!r}")


def debias(probs: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """``P_debiased(o_i) ∝ P_obs(d_i) / P_prior(d_i)``, renormalised over options (Zheng et al.)."""
    p = _normalised(probs)
    pr = np.asarray(prior, dtype=np.float64)
    if pr.shape != (p.shape[-1],) or np.any(pr <= 0):
        raise WhiteboxError(
            f"prior must be a positive vector of length {p.shape[-1]}; got shape {pr.shape}"
        )
    out = p / pr
    return out / out.sum(axis=-1, keepdims=True)


def estimation_split(
    n_items: int,
    fraction: float = DEFAULT_ESTIMATION_FRACTION,
    seed: int = 0,
    min_items: int = 1,
) -> Split:
    """Seeded split into the prior-estimation subset ``D_e`` (``val``) and the rest (``test``).

    Same rule as :func:`~whitebox_eval.mcqa.head_scores.validation_split`, so with
    equal arguments PriDe estimates on exactly the items used to choose the best
    head (000 sec. 5.2: "The test set is the same as we use for the best heads selection").
    """
    return validation_split(n_items, fraction, min_items, seed)


@dataclass(frozen=True)
class PriDeResult:
    """Output of PriDe over a whole dataset."""

    prior: np.ndarray  # [options] estimated letter prior
    split: Split  # val = D_e (estimation items), test = debiased items
    debiased_probs: np.ndarray  # [items, options] over original contents
    predictions: np.ndarray  # [items] option index (original order)

    def test_predictions(self) -> np.ndarray:
        """Predictions on the items outside ``D_e`` (the ones accuracy is reported on)."""
        return self.predictions[self.split.test]


def pride(
    probs: np.ndarray,
    estimation_perm_probs: np.ndarray,
    split: Split,
    orders: np.ndarray | None = None,
    aggregate: Aggregate = "log_mean",
    eps: float = DEFAULT_EPS,
) -> PriDeResult:
    """PriDe from precomputed arrays.

    ``probs``: ``[items, options]`` letter probabilities in the original order, all items.
    ``estimation_perm_probs``: ``[len(split.val), permutations, options]`` letter
    probabilities of the ``D_e`` items under ``orders`` (default cyclic), row ``e``
    belonging to item ``split.val[e]``.
    """
    p = _normalised(probs)
    if p.ndim != 2:
        raise WhiteboxError(f"probs must have shape [items, options]; got {p.shape}")
    ep = _check_perm_probs(estimation_perm_probs)
    if ep.shape[0] != len(split.val) or ep.shape[2] != p.shape[1]:
        raise WhiteboxError(
            f"estimation_perm_probs must be [{len(split.val)}, permutations, {p.shape[1]}] "
            f"(one row per estimation item); got {ep.shape}"
        )
    prior = estimate_prior(ep, eps)
    debiased = debias(p, prior)
    debiased[split.val] = permutation_average(ep, orders, aggregate, eps)
    return PriDeResult(
        prior=prior,
        split=split,
        debiased_probs=debiased,
        predictions=np.argmax(debiased, axis=-1),
    )


def pride_from_callable(
    observe: Callable[[int, np.ndarray], Sequence[float] | np.ndarray],
    n_items: int,
    n_options: int,
    estimation_fraction: float = DEFAULT_ESTIMATION_FRACTION,
    seed: int = 0,
    min_estimation_items: int = 1,
    split: Split | None = None,
    orders: np.ndarray | None = None,
    aggregate: Aggregate = "log_mean",
    eps: float = DEFAULT_EPS,
) -> PriDeResult:
    """PriDe with a scorer: ``observe(item, order)`` returns the letter probabilities of
    ``item`` with option content ``order[j]`` shown at letter ``j``.

    Costs ``|orders|`` calls per estimation item and one call (identity order) per
    other item, as in Zheng et al.
    """
    o = cyclic_orders(n_options) if orders is None else _check_orders(orders, n_options)
    if split is None:
        split = estimation_split(n_items, estimation_fraction, seed, min_estimation_items)
    identity = np.arange(n_options)

    def call(item: int, order: np.ndarray) -> np.ndarray:
        out = np.asarray(observe(item, order), dtype=np.float64)
        if out.shape != (n_options,):
            raise WhiteboxError(
                f"observe({item}, order) must return {n_options} letter probabilities; "
                f"got shape {out.shape}"
            )
        return out

    est_pos = {int(item): e for e, item in enumerate(split.val)}
    est = np.empty((len(split.val), o.shape[0], n_options))
    probs = np.empty((n_items, n_options))
    for item in range(n_items):
        if item in est_pos:
            for pi, order in enumerate(o):
                est[est_pos[item], pi] = call(item, order)
            ident = [pi for pi, order in enumerate(o) if np.array_equal(order, identity)]
            probs[item] = est[est_pos[item], ident[0]] if ident else call(item, identity)
        else:
            probs[item] = call(item, identity)
    return pride(probs, est, split, o, aggregate, eps)


@dataclass(frozen=True)
class CountPriDe:
    """PriDe over items with different option counts: one prior per count (its cyclic
    permutations are its own), estimated on that count's estimation items."""

    predictions: np.ndarray  # [items] option index (original order)
    priors: dict[int, np.ndarray]  # option count -> its letter prior (counts with estimation items)
    estimation_items: dict[int, int]  # option count -> estimation items of that count (0: not debiased)


def _letter_probs(logits: np.ndarray) -> np.ndarray:
    x = np.nan_to_num(np.asarray(logits), nan=-np.inf)  # in the logits' own dtype, as every run before
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def pride_by_option_count(
    logits: np.ndarray,
    counts: Sequence[int],
    perm_logits: np.ndarray,
    perm_pairs: Sequence[tuple[int, int]],
    split: Split,
    aggregate: Aggregate = "log_mean",
    eps: float = DEFAULT_EPS,
) -> CountPriDe:
    """PriDe (:func:`pride`) run separately on the items of each option count ``n``.

    ``logits``: ``[items, >= max n]`` letter logits in the original order (the first
    ``counts[i]`` columns are item ``i``'s essential options); ``perm_logits[k]``: the
    letters of item ``perm_pairs[k] = (i, p)`` under cyclic shift ``p`` (position ``j``
    shows content ``(j + p) mod n``), for every estimation item ``i`` in ``split.val`` and
    ``p = 0..n-1``. A count without estimation items keeps its observed predictions (a
    uniform prior: there is nothing to estimate one from); ``estimation_items`` says which.
    With one count this is :func:`pride` on the whole split.
    """
    counts = np.asarray(counts, dtype=np.int64)
    logits = np.asarray(logits)
    rows = {(int(i), int(p)): k for k, (i, p) in enumerate(perm_pairs)}
    predictions = np.zeros(len(counts), dtype=np.int64)
    priors: dict[int, np.ndarray] = {}
    estimation: dict[int, int] = {}
    for n in sorted(set(counts.tolist())):
        idx = np.flatnonzero(counts == n)
        val = [int(i) for i in split.val if counts[i] == n]
        probs = _letter_probs(logits[idx, :n])
        estimation[n] = len(val)
        if not val:
            predictions[idx] = np.argmax(probs, axis=-1)
            continue
        missing = [(i, p) for i in val for p in range(n) if (i, p) not in rows]
        if missing:
            raise WhiteboxError(f"PriDe: no permuted letters for item {missing[0][0]} shift {missing[0][1]}")
        est = np.stack([_letter_probs(np.stack([perm_logits[rows[(i, p)], :n] for p in range(n)])) for i in val])
        position = {int(i): k for k, i in enumerate(idx)}
        val_pos = np.array([position[i] for i in val], dtype=np.int64)
        sub = Split(val=val_pos, test=np.setdiff1d(np.arange(len(idx)), val_pos))
        res = pride(probs, est, sub, aggregate=aggregate, eps=eps)
        predictions[idx] = res.predictions
        priors[n] = res.prior
    return CountPriDe(predictions, priors, estimation)
