"""Key heads and attention reinforcement (paper 003, sec. 5.1 and App. G).

1. Key heads (App. G step 1): run in-distribution examples (typically 30), sum each
   head's post-softmax attention on the reference cells (query row predicting a target
   token x its reference key tokens) over all samples, rank heads by that sum.
2. Reinforcement (App. G step 2) during out-of-distribution inference, on the top-N
   heads only: add a constant C (0.3-2.0 in the paper) to the post-softmax attention at
   every reference cell (*standard*), or only at reference cells whose weight already
   exceeds a threshold (*conditional*). The edited weights are not re-normalised.
3. Controls (not in the paper; needed to tell a mechanism from an artefact):
   *random heads*: the same intervention on N heads drawn at random from the key
   heads' layer band, widened until it holds N non-key heads, never a key head (the
   ``"widened-band"`` rule of :mod:`whitebox_eval.controls`);
   *shifted reference*: the same key heads reinforced on the neighbouring, wrong cell
   (:func:`shifted_reference_cells`). On string reversal the reference cell holds the
   answer character, so adding attention there is an oracle pointer; if the shifted
   cell helps as much, the gain is not evidence for the reference pattern.

:func:`sweep_reinforcement` runs the grid of N x C on one set of examples (used by the
study on the selection split only; the study reports the chosen point on a disjoint
evaluation split, see :mod:`whitebox_eval.span.protocol`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from whitebox_eval.span.evaluation import (
    ExampleScores,
    batches,
    teacher_forced_pass,
)
from whitebox_eval.span.config import MODES
from whitebox_eval.span.metrics import exact_match_accuracy, partial_accuracy, rank_key_heads
from whitebox_eval.span.tokenization import TokenizedExample
from whitebox_eval.controls import Head, draw_seed, random_heads
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import EditAttention, Engine

CONTROL_RULE = "widened-band"
"""The random-head control's rule (:mod:`whitebox_eval.controls`)."""
FEWER_HEADS = "reinforce fewer heads (--heads)"


# --------------------------------------------------------------------- key heads


@dataclass
class KeyHeads:
    """App. G step 1: summed reference attention per head and the resulting ranking."""

    scores: np.ndarray  # [L, H]
    ranking: list[Head]
    n_samples: int

    def top(self, n: int) -> list[Head]:
        if not 1 <= n <= len(self.ranking):
            raise WhiteboxError(f"top-N must be in 1..{len(self.ranking)} (the model's heads); got {n}")
        return self.ranking[:n]


def find_key_heads(engine: Engine, tokenized: Sequence[TokenizedExample], *,
                   batch_size: int = 8) -> KeyHeads:
    """Rank heads by summed post-softmax attention on reference cells (App. G step 1).

    Only the prediction rows of each head are captured (never full matrices).
    """
    if not tokenized:
        raise WhiteboxError("key-head search needs in-distribution examples; give at least one")
    total = None
    for chunk in batches(tokenized, batch_size):
        for s in teacher_forced_pass(engine, chunk, head_rows=True):
            total = s.head_reference_sum if total is None else total + s.head_reference_sum
    return KeyHeads(scores=total, ranking=rank_key_heads(total), n_samples=len(tokenized))


# ----------------------------------------------------------------- the intervention


def reference_cells(tokenized: Sequence[TokenizedExample], seq_len: int | None = None) -> torch.Tensor:
    """[B, S, S] bool in unpadded coordinates: query row predicting target ``t`` x its
    reference tokens (valid rows only). ``S`` defaults to the longest example."""
    s = seq_len or max(t.seq_len for t in tokenized)
    cells = torch.zeros(len(tokenized), s, s, dtype=torch.bool)
    for i, tok in enumerate(tokenized):
        rows = tok.prediction_positions[tok.valid]
        mask = torch.from_numpy(tok.reference_mask[tok.valid][:, :s])
        cells[i, torch.from_numpy(rows), : mask.shape[1]] = mask
    return cells


def shifted_reference_cells(tokenized: Sequence[TokenizedExample], seq_len: int | None = None,
                            offset: int = 1) -> torch.Tensor:
    """The shifted-reference control's cells, like :func:`reference_cells` but each
    reference column ``k`` of a row moved to its neighbour ``k + offset``.

    The neighbour must lie in the data point and be visible to the query row
    (``context_start <= k' <= row``) and must not be a reference cell of that row;
    otherwise ``k - offset`` is tried, and a column with neither is dropped. On string
    reversal the row predicting answer character ``i`` gets the input character one to
    the right of the reference (the character answered one step earlier; ``=`` for
    ``i = 0``): the same heads, the same C, the wrong cell.
    """
    if offset < 1:
        raise WhiteboxError(f"the shift must be at least 1 token; got {offset}")
    s = seq_len or max(t.seq_len for t in tokenized)
    cells = torch.zeros(len(tokenized), s, s, dtype=torch.bool)
    for i, tok in enumerate(tokenized):
        for row, ref, ok in zip(tok.prediction_positions, tok.reference_mask, tok.valid):
            if not ok or row >= s:
                continue
            cols = set(np.flatnonzero(ref[: s]).tolist())
            for k in cols:
                for cand in (k + offset, k - offset):
                    if tok.context_start <= cand <= row and cand not in cols:
                        cells[i, int(row), cand] = True
                        break
    return cells


CELLS = {"reference": reference_cells, "shifted": shifted_reference_cells}


@dataclass(frozen=True)
class Reinforcement:
    """Add ``value`` (C) to the post-softmax attention of ``heads`` at reference cells.

    ``mode="standard"``: every reference cell (App. G, string reversal);
    ``mode="conditional"``: only where the weight already exceeds ``threshold``
    (App. G, value assignment). ``cells="shifted"`` moves every cell to its wrong
    neighbour (:func:`shifted_reference_cells`, the control). Use :meth:`edits` as
    ``edits_for`` of the evaluation.
    """

    heads: tuple[Head, ...]
    value: float
    mode: str = "standard"
    threshold: float = 0.0
    label: str = ""
    cells: str = "reference"
    shift: int = 1
    """Tokens by which ``cells="shifted"`` moves each reference column."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise WhiteboxError(f"reinforcement mode must be one of {MODES}; got {self.mode!r}")
        if self.cells not in CELLS:
            raise WhiteboxError(f"reinforcement cells must be one of {sorted(CELLS)}; got {self.cells!r}")
        if not self.heads:
            raise WhiteboxError("reinforcement needs at least one head")

    def edits(self, tokenized: Sequence[TokenizedExample]) -> list[EditAttention]:
        """One :class:`EditAttention` per layer holding selected heads, for this batch."""
        cells = (shifted_reference_cells(tokenized, offset=self.shift) if self.cells == "shifted"
                 else reference_cells(tokenized))
        per_layer: dict[int, list[int]] = defaultdict(list)
        for layer, head in self.heads:
            per_layer[int(layer)].append(int(head))
        mode = "add" if self.mode == "standard" else "add_above"
        return [EditAttention(layer, tuple(heads), cells, mode=mode, value=float(self.value),
                              threshold=float(self.threshold))
                for layer, heads in sorted(per_layer.items())]


# ------------------------------------------------------------------------- sweeps


@dataclass
class SweepPoint:
    """One intervention setting evaluated on the OOD examples."""

    label: str
    heads_from: str  # "none", "key" or "random"
    n_heads: int
    value: float
    mode: str
    threshold: float
    seed: int | None
    accuracy: float
    partial_accuracy: float
    correct: list[np.ndarray] = field(repr=False, default_factory=list)

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "correct"}


def sweep_settings(key_heads: KeyHeads, n_layers: int, n_heads_per_layer: int, *,
                   n_values: Sequence[int], c_values: Sequence[float], mode: str = "standard",
                   threshold: float = 0.0, random_draws: int = 3, seed: int = 0,
                   ) -> list[tuple[str, str, int | None, Reinforcement | None]]:
    """The grid of sec. 5.1: baseline, top-N key heads x C, and random N heads x C.

    Returns ``(label, heads_from, seed, reinforcement)``; the baseline has ``None``.
    Random draws never include the top-N key heads (:data:`CONTROL_RULE`).
    """
    settings: list[tuple[str, str, int | None, Reinforcement | None]] = [("baseline", "none", None, None)]
    for n in n_values:
        key = key_heads.top(n)
        drawn = random_heads(key, (n_layers, n_heads_per_layer), random_draws, seed, CONTROL_RULE, fix=FEWER_HEADS)
        for c in c_values:
            label = f"key-top{n}-C{c:g}-{mode}"
            settings.append((label, "key", None, Reinforcement(tuple(key), c, mode, threshold, label)))
            for d, heads in enumerate(drawn):
                rlabel = f"random{d}-top{n}-C{c:g}-{mode}"
                settings.append((rlabel, "random", draw_seed(seed, d),
                                 Reinforcement(tuple(heads), c, mode, threshold, rlabel)))
    return settings


def evaluate_setting(engine: Engine, tokenized: Sequence[TokenizedExample],
                     reinforcement: Reinforcement | None, *, batch_size: int = 8) -> list[ExampleScores]:
    """Teacher-forced scores of the examples under one reinforcement (or none)."""
    out: list[ExampleScores] = []
    edits_for = reinforcement.edits if reinforcement is not None else None
    for chunk in batches(tokenized, batch_size):
        out += teacher_forced_pass(engine, chunk, edits_for=edits_for)
    return out


def sweep_reinforcement(engine: Engine, ood: Sequence[TokenizedExample], key_heads: KeyHeads, *,
                        n_values: Sequence[int], c_values: Sequence[float], mode: str = "standard",
                        threshold: float = 0.0, random_draws: int = 3, seed: int = 0,
                        batch_size: int = 8) -> list[SweepPoint]:
    """OOD accuracy with no intervention, with reinforcement of the top-N key heads and
    with the same reinforcement of N random heads, for every N in ``n_values`` and C in
    ``c_values`` (sec. 5.1, fig. 2)."""
    arch = engine.arch
    out = []
    for label, source, setting_seed, r in sweep_settings(
            key_heads, arch.n_layers, arch.n_heads, n_values=n_values, c_values=c_values,
            mode=mode, threshold=threshold, random_draws=random_draws, seed=seed):
        scores = evaluate_setting(engine, ood, r, batch_size=batch_size)
        correct = [s.correct for s in scores]
        out.append(SweepPoint(label, source, len(r.heads) if r else 0, r.value if r else 0.0,
                              r.mode if r else "none", r.threshold if r else 0.0, setting_seed,
                              exact_match_accuracy(correct), partial_accuracy(correct), correct))
    return out


def best_key_setting(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The key-head setting with the highest accuracy (ties: higher partial accuracy,
    then fewer heads, then smaller C), as App. G tunes N and C on the end task."""
    keyed = [p for p in points if p.heads_from == "key"]
    if not keyed:
        return None
    return max(keyed, key=lambda p: (p.accuracy, p.partial_accuracy, -p.n_heads, -p.value))


def random_matched(points: Sequence[SweepPoint], n_heads: int, value: float) -> list[SweepPoint]:
    """The random-head controls with the same N and C."""
    return [p for p in points if p.heads_from == "random" and p.n_heads == n_heads and p.value == value]
