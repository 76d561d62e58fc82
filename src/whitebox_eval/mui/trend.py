"""A trend over the checkpoints of one training (paper 001 sec. 3.3): Kendall's tau of a measure
against the training step.

Each checkpoint answered the same items, and a measure is computed per checkpoint from them (MUI:
the union of their key units over the model's units; accuracy and response length: their mean).
The trend must pass two tests, and its p-value is the larger of the two (an intersection-union
test: each is a level-alpha test of its own null, so requiring both keeps the level):

- the checkpoints' order (the Mann-Kendall trend test): tau against its exact distribution over
  every order of the checkpoints' values (:func:`order_p`; random orders above
  :data:`MAX_EXACT_ORDER` checkpoints), where no trend makes every order equally likely;
- the items: a delete-one jackknife over the items, each item dropped from every checkpoint at
  once (the checkpoints stay paired), gives tau's standard error, its 95% interval (clipped to [-1, 1]) and a normal p
  (a tau no single item moves has standard error 0: the items do not limit it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError

MAX_EXACT_ORDER = 8
"""Checkpoints up to which :func:`order_p` enumerates every order (8! = 40,320)."""
RANDOM_ORDERS = 20_000
"""Random orders above that (seeded)."""


def kendall_tau(x: Sequence[float], y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of ``x`` (distinct steps) against each row of ``y`` (``[k]`` or ``[R, k]``):
    concordant minus discordant pairs over ``sqrt(n0 (n0 - ties in y))``; 0 where ``y`` is constant."""
    x = np.asarray(x, float)
    y2 = np.atleast_2d(np.asarray(y, float))
    i, j = np.triu_indices(x.size, 1)
    sx = np.sign(x[j] - x[i])
    if np.any(sx == 0):
        raise WhiteboxError("a trend over checkpoints needs distinct steps")
    sy = np.sign(y2[:, j] - y2[:, i])
    n0 = i.size
    denom = np.sqrt(n0 * (n0 - (sy == 0).sum(axis=1)))
    tau = np.divide(sy @ sx, denom, out=np.zeros(y2.shape[0]), where=denom > 0)
    return tau if np.ndim(y) > 1 else tau[0]


def order_p(x: Sequence[float], y: Sequence[float], seed: int = stats.SEED) -> float:
    """Two-sided p of Kendall's tau over the orders of the ``y`` values: every order up to
    :data:`MAX_EXACT_ORDER` values, else :data:`RANDOM_ORDERS` seeded ones (with the observed)."""
    y = np.asarray(y, float)
    observed = abs(float(kendall_tau(x, y))) - 1e-12
    if y.size <= MAX_EXACT_ORDER:
        taus = kendall_tau(x, np.array([y[list(p)] for p in itertools.permutations(range(y.size))]))
        return float(np.mean(np.abs(taus) >= observed))
    rng = np.random.default_rng(seed)
    taus = kendall_tau(x, np.array([rng.permutation(y) for _ in range(RANDOM_ORDERS)]))
    return float((np.sum(np.abs(taus) >= observed) + 1) / (RANDOM_ORDERS + 1))


@dataclass(frozen=True)
class Trend:
    """Kendall's tau of a measure against the step over ``n`` checkpoints and ``n_items`` items:
    ``value``, its item-jackknife interval ``lo``-``hi`` and standard error ``se``, the order
    test's p (``order_p``), the items' (``item_p``) and the larger of the two (``p_value``)."""

    value: float
    lo: float
    hi: float
    se: float
    p_value: float
    order_p: float
    item_p: float
    n: int
    n_items: int
    test: str = ("Kendall tau-b vs step: the larger p of the Mann-Kendall order test and the items' "
                 "delete-one jackknife")

    def as_dict(self) -> dict:
        return asdict(self)


def trend(steps: Sequence[int], observed: Sequence[float], left_one_out: np.ndarray) -> Trend:
    """:class:`Trend` from each checkpoint's measure (``observed``, ``[k]``) and the measure with
    each item left out (``left_one_out``, ``[k, n]``)."""
    k = len(steps)
    if k < 3:
        raise WhiteboxError(f"a trend needs at least 3 checkpoints; {k} given")
    loo = np.asarray(left_one_out, float)
    n = loo.shape[1]
    if loo.shape[0] != k or n < 2:
        raise WhiteboxError("a trend needs each checkpoint's measure with each of >= 2 items left out")
    tau = float(kendall_tau(steps, np.asarray(observed, float)))
    taus = kendall_tau(steps, loo.T)  # [n]
    se = float(math.sqrt((n - 1) / n * np.sum((taus - taus.mean()) ** 2)))
    z = 1.959963984540054
    if se > 0:
        item_p = math.erfc(abs(tau) / se / math.sqrt(2))
    else:
        item_p = 0.0 if tau != 0 else 1.0
    p_order = order_p(steps, observed)
    return Trend(tau, max(-1.0, tau - z * se), min(1.0, tau + z * se), se, max(p_order, item_p), p_order, item_p, k, n)


def union_left_out(units: Sequence[Sequence[int]], total: int) -> tuple[float, np.ndarray]:
    """The share of ``total`` units in the union of the items' ``units`` (MUI) and, per item, that
    share with the item left out (it loses the units no other item has)."""
    counts: dict[int, int] = {}
    for us in units:
        for u in set(map(int, us)):
            counts[u] = counts.get(u, 0) + 1
    own = np.array([sum(1 for u in set(map(int, us)) if counts[u] == 1) for us in units], float)
    return len(counts) / float(total), (len(counts) - own) / float(total)


def mui_trend(steps: Sequence[int], units: Sequence[Sequence[Sequence[int]]], total: int) -> Trend:
    """MUI's trend: ``units[c][i]`` the key units of item ``i`` at checkpoint ``c`` (every checkpoint
    the same items, in one order), ``total`` the model's units."""
    if len({len(u) for u in units}) != 1:
        raise WhiteboxError("every checkpoint must hold the same items")
    parts = [union_left_out(u, total) for u in units]
    return trend(steps, [p[0] for p in parts], np.stack([p[1] for p in parts]))


def mean_trend(steps: Sequence[int], values: Sequence[Sequence[float]]) -> Trend:
    """The trend of a per-item mean (accuracy as 0/1, response length): ``values[c][i]``."""
    v = np.asarray(values, float)  # [k, n]
    n = v.shape[1]
    return trend(steps, v.mean(axis=1), (v.sum(axis=1, keepdims=True) - v) / max(n - 1, 1))
