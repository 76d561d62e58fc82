"""Sequences that share their beginning, packed into one row: the shared tokens computed once.

A *group* is a list of token sequences, e.g. the (context + continuation) requests of
one multiple-choice item. Its sequences share a *trunk* (their longest common token
prefix) and go on in their own *branches*. :func:`pack` puts each group in one row of a
batch::

    [trunk | branch 1 | branch 2 | ...]

Position ids count 0.. along the trunk and go on from the trunk's end in every branch;
the batch's attention pattern (:attr:`~whitebox_eval.internals.batching.Batch.visible`)
lets a trunk token see the trunk tokens before it and a branch token the whole trunk and
the tokens of its own branch before it. Every token so computes what it computes when
its sequence runs alone (the same tokens at the same positions; float rounding of the
other shapes aside), and the trunk is computed once for the whole group: an item's
context once for all its choices, or, where each choice has its own context (lm-eval's
partial evaluation, winogrande), the contexts' longest common token prefix once.

Rows are left padded; a pad token sees only itself (no attention row is empty) and no
real token sees a pad.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.batching import Batch
from whitebox_eval.internals.prefixes import common_prefix_length


@dataclass
class Packed:
    """A packed batch and where each sequence's tokens sit in it.

    ``where[g][i][p]``: the example coordinate (index in its row, counted from the row's
    first token) of token ``p`` of sequence ``i`` of group ``g``. ``batch`` row ``g``
    holds group ``g``.
    """

    batch: Batch
    where: list[list[list[int]]]

    @property
    def tokens(self) -> int:
        """Token columns one pass over the batch computes, pads included."""
        return self.batch.size * self.batch.seq_len


def packed_length(seqs: Sequence[Sequence[int]]) -> int:
    """Tokens a group's packed row holds: the trunk once, then every branch."""
    trunk = common_prefix_length(seqs)
    return trunk + sum(len(s) - trunk for s in seqs)


def pack(groups: Sequence[Sequence[Sequence[int]]], pad_id: int = 0) -> Packed:
    """Each group of token sequences as one left-padded row: trunk once, then every branch."""
    if not groups or any(not g for g in groups) or any(len(s) == 0 for g in groups for s in g):
        raise WhiteboxError("packing needs at least one group, and no empty group or sequence")
    rows, positions, branches, where = [], [], [], []
    for seqs in groups:
        trunk = common_prefix_length(seqs)
        ids, pos, branch = list(seqs[0][:trunk]), list(range(trunk)), [-1] * trunk
        at = []
        for i, s in enumerate(seqs):
            start = len(ids)
            ids += s[trunk:]
            pos += range(trunk, len(s))
            branch += [i] * (len(s) - trunk)
            at.append(list(range(trunk)) + list(range(start, start + len(s) - trunk)))
        rows.append(ids)
        positions.append(pos)
        branches.append(branch)
        where.append(at)
    s = max(len(r) for r in rows)
    pad = [s - len(r) for r in rows]  # built in Python, one tensor each, the pattern for the whole batch at once
    input_ids = torch.tensor([[pad_id] * p + r for r, p in zip(rows, pad)], dtype=torch.long)
    mask = torch.tensor([[0] * p + [1] * len(r) for r, p in zip(rows, pad)], dtype=torch.long)
    position_ids = torch.tensor([[0] * p + q for q, p in zip(positions, pad)], dtype=torch.long)
    br = torch.tensor([[-2] * p + q for q, p in zip(branches, pad)], dtype=torch.long)  # -2: pad, -1: trunk
    real = br != -2
    causal = torch.ones(s, s, dtype=torch.bool).tril()
    # a real token sees the real tokens before it in the trunk or in its own branch; a pad sees itself only
    same = (br[:, None, :] == -1) | (br[:, None, :] == br[:, :, None])
    visible = torch.where(real[:, :, None], causal & same & real[:, None, :], torch.eye(s, dtype=torch.bool))
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    return Packed(Batch(input_ids, mask, position_ids, lengths, visible=visible, host_lengths=lengths), where)
