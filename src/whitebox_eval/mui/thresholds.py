"""Threshold functions that turn one sample's scores into its key set (paper 001 App. A.4).

Input: the scores of one sample, ``[n_positions, n_layers, width]`` (token-level,
eq. 2 / 5 / 13 / 14) or ``[n_layers, width]`` (response-level, eq. 15; treated as a
single position). ``width`` is ``d_ff`` for neurons or ``D`` for SAE features.
Output: a boolean ``[n_layers, width]`` mask, the sample's key set ``N(t)``
(eq. 3, 6, 8-12): unit ``(l, i)`` is key when it is selected at *any* position.

What ``k`` counts (``unit``):

* ``"pair"`` (default; the paper's eq. 8 / 10, also what the authors' code does):
  ``V_l`` pools the scores of all (response token, unit) pairs of layer ``l`` and the
  threshold is its k-th largest value; the selected pairs are projected onto units,
  so a sample yields between 1 and ``k`` units per layer.
* ``"neuron"`` (not the paper's): ``k`` unique units per layer per sample. Each unit
  is ranked by its best score over the response positions, ``max_j f(i, l, y_j)``, and
  the ``k`` best are kept, so a sample contributes exactly ``k`` units per layer
  (more only with ties, see below); this inflates MUI against the paper's rule.

Ties (``ties``): ``"include"`` (default) is eq. 10's ``f >= V^{topk}``: every value
equal to the k-th largest is kept, so ties can give more than ``k``. ``"index"``
keeps exactly ``k`` (pairs or units), breaking ties by the lower flat index
(position, then layer, then unit), as a stable sort would.

``min_score``: when set, only values strictly greater than it may be selected (use
0.0 for SAE features, whose zero activations mean "inactive"). With ``ties="include"``
many exactly-equal scores at the cut (e.g. the zeros of a ReLU MLP when fewer than
``k`` units are positive) are all kept; pass ``min_score=0.0`` or ``ties="index"`` there.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError

Unit = Literal["neuron", "pair"]
Ties = Literal["include", "index"]

DEFAULT_TOP_FRACTION = 1e-3
"""Paper's main setting: top 1 per mille of d_ff per layer (sec. 3.8, App. A.3 eq. 8)."""

DEFAULT_SAE_TOPK = 50
"""Paper's SAE setting: top 50 features per layer (App. A.3 eq. 9)."""


def _as_scores(scores: torch.Tensor | np.ndarray) -> torch.Tensor:
    s = torch.as_tensor(scores)
    if s.ndim == 2:
        s = s.unsqueeze(0)
    if s.ndim != 3:
        raise WhiteboxError(
            f"scores must be [n_positions, n_layers, width] or [n_layers, width], got shape {tuple(s.shape)}"
        )
    if s.shape[0] == 0:
        raise WhiteboxError("scores have no positions: the sample has no response tokens to score")
    s = s.float()
    if torch.isnan(s).any():
        raise WhiteboxError("scores contain NaN; check the captured activations (fp16 overflow?)")
    return s


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise WhiteboxError(f"{name} must be one of {allowed}, got {value!r}")


def _select_rows(values: torch.Tensor, k: int, ties: Ties, min_score: float | None) -> torch.Tensor:
    """Per row of ``values [G, M]``: bool mask of its top-``k`` entries."""
    g, m = values.shape
    k = min(k, m)
    if ties == "include":
        kth = torch.topk(values, k, dim=1).values[:, -1:]
        sel = values >= kth
    else:
        order = torch.argsort(-values, dim=1, stable=True)[:, :k]
        sel = torch.zeros_like(values, dtype=torch.bool)
        sel.scatter_(1, order, True)
    if min_score is not None:
        sel &= values > min_score
    return sel


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise WhiteboxError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _topk_args(scores, k: int, unit: str, ties: str) -> tuple[int, torch.Tensor]:
    """The checks every top-k rule makes: ``k``, ``unit``, ``ties`` and the scores."""
    k = _check_k(k)
    _check_choice("unit", unit, ("neuron", "pair"))
    _check_choice("ties", ties, ("include", "index"))
    return k, _as_scores(scores)


def layer_topk_mask(
    scores: torch.Tensor | np.ndarray,
    k: int,
    *,
    unit: Unit = "pair",
    ties: Ties = "include",
    min_score: float | None = None,
) -> torch.Tensor:
    """Layer-level top-k (App. A.4 eq. 10): per layer, the ``k`` highest-scoring units."""
    k, s = _topk_args(scores, k, unit, ties)
    n_pos, n_layers, width = s.shape
    if unit == "neuron":
        return _select_rows(s.amax(dim=0), k, ties, min_score)
    pooled = s.permute(1, 0, 2).reshape(n_layers, n_pos * width)  # per layer, position-major
    sel = _select_rows(pooled, k, ties, min_score)
    return sel.reshape(n_layers, n_pos, width).any(dim=1)


def top_fraction_k(width: int, fraction: float = DEFAULT_TOP_FRACTION) -> int:
    """``k`` for the top-k% rule: ``max(1, floor(fraction * width))``.

    Floor as in the authors' code (``int(1/1000 * 14336) = 14``); at least one unit.
    """
    if not 0.0 < fraction <= 1.0:
        raise WhiteboxError(f"fraction must be in (0, 1], got {fraction} (1 per mille is 0.001)")
    return max(1, math.floor(fraction * width))


def layer_top_fraction_mask(
    scores: torch.Tensor | np.ndarray,
    fraction: float = DEFAULT_TOP_FRACTION,
    *,
    unit: Unit = "pair",
    ties: Ties = "include",
    min_score: float | None = None,
) -> torch.Tensor:
    """Layer-level top-k% (sec. 2.2, 3.8, App. A.3 eq. 8): ``k = top_fraction_k(width, fraction)``.

    The default 0.001 (1 per mille of d_ff) is the paper's main setting.
    """
    s = _as_scores(scores)
    return layer_topk_mask(s, top_fraction_k(s.shape[2], fraction), unit=unit, ties=ties, min_score=min_score)


def global_topk_mask(
    scores: torch.Tensor | np.ndarray,
    k: int,
    *,
    unit: Unit = "pair",
    ties: Ties = "include",
    min_score: float | None = None,
) -> torch.Tensor:
    """Global top-k (App. A.4 eq. 11): the ``k`` highest-scoring units over all layers."""
    k, s = _topk_args(scores, k, unit, ties)
    n_pos, n_layers, width = s.shape
    if unit == "neuron":
        return _select_rows(s.amax(dim=0).reshape(1, -1), k, ties, min_score).reshape(n_layers, width)
    sel = _select_rows(s.reshape(1, -1), k, ties, min_score).reshape(n_pos, n_layers, width)
    return sel.any(dim=0)


def top_score_mask(
    scores: torch.Tensor | np.ndarray,
    ratio: float,
    *,
    min_score: float | None = None,
) -> torch.Tensor:
    """Top-score (App. A.4 eq. 12): per layer, units with ``f >= ratio * V_l^max``.

    ``V_l^max`` is the layer's maximum over all positions and units, so ``unit`` makes
    no difference here. A layer whose maximum is <= 0 selects nothing (a fraction of a
    non-positive maximum is not a meaningful bar; the paper does not say).
    """
    if not 0.0 < ratio <= 1.0:
        raise WhiteboxError(f"ratio must be in (0, 1], got {ratio}")
    s = _as_scores(scores)
    best = s.amax(dim=0)  # [L, W]
    layer_max = best.amax(dim=1, keepdim=True)  # [L, 1]
    sel = (best >= ratio * layer_max) & (layer_max > 0)
    if min_score is not None:
        sel &= best > min_score
    return sel


ThresholdMethod = Literal["topk", "top_fraction", "global_topk", "topscore"]


def key_mask(
    scores: torch.Tensor | np.ndarray,
    method: ThresholdMethod = "top_fraction",
    value: float | None = None,
    *,
    unit: Unit = "pair",
    ties: Ties = "include",
    min_score: float | None = None,
) -> torch.Tensor:
    """Dispatch to a threshold function by name (the names of App. B.6.2).

    ``value`` is ``k`` for ``topk`` / ``global_topk``, the fraction for
    ``top_fraction`` (default 0.001) and the ratio for ``topscore``.
    """
    if method == "top_fraction":
        return layer_top_fraction_mask(
            scores, DEFAULT_TOP_FRACTION if value is None else float(value),
            unit=unit, ties=ties, min_score=min_score,
        )
    if value is None:
        raise WhiteboxError(f"threshold method {method!r} needs a value (k or ratio)")
    if method == "topk":
        return layer_topk_mask(scores, _int_value(value), unit=unit, ties=ties, min_score=min_score)
    if method == "global_topk":
        return global_topk_mask(scores, _int_value(value), unit=unit, ties=ties, min_score=min_score)
    if method == "topscore":
        return top_score_mask(scores, float(value), min_score=min_score)
    raise WhiteboxError(
        f"unknown threshold method {method!r}; choose topk, top_fraction, global_topk or topscore"
    )


def _int_value(value: float) -> int:
    if float(value) != int(value):
        raise WhiteboxError(f"k must be an integer, got {value}")
    return int(value)


def feature_key_mask(
    feature_scores: torch.Tensor, method: ThresholdMethod = "topk", value: float | None = DEFAULT_SAE_TOPK,
    *, unit: Unit = "pair",
) -> torch.Tensor:
    """A sample's key features (eq. 6 / 9): default top-50 per layer; inactive (zero) features never count."""
    return key_mask(feature_scores, method, value, unit=unit, min_score=0.0)
