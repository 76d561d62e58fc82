"""Left-padded batches and the position bookkeeping every capture relies on.

Users always address tokens in *unpadded* coordinates (0 = the example's first
token, -1 = its last). A :class:`Batch` converts them to padded coordinates.

With a cached prefix (:class:`~whitebox_eval.internals.engine.Prefix`, e.g. few-shot
demonstrations shared by every example), the batch holds only the suffixes; example
coordinates still count from the first prefix token, and the key axis of attention is
laid out as [prefix | pads | suffix].

A *packed* batch (:mod:`whitebox_eval.internals.packing`) carries its own attention
pattern, :attr:`Batch.visible`: several sequences that share a beginning sit in one row
(the shared tokens once, then each sequence's own tokens), position ids restart for
each of them, and each token sees only the earlier tokens of its own sequence. Example
coordinates then index the row's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from whitebox_eval.errors import WhiteboxError

Positions = torch.Tensor | Sequence[Sequence[int]] | Sequence[int] | str | None
"""``"last"``, one list of positions per example (all of one length), a [B, P] tensor,
or ``"all"`` (every *padded* position 0..S-1: pads included, for whole-sequence work)."""


@dataclass
class Batch:
    """Token ids left-padded to a common length, with mask and position ids."""

    input_ids: torch.Tensor  # [B, S]
    attention_mask: torch.Tensor  # [B, S], 1 = real token
    position_ids: torch.Tensor  # [B, S], 0 at each example's first real token
    lengths: torch.Tensor  # [B] tokens in the batch (suffix lengths when a prefix is cached)
    prefix_len: int = 0
    visible: torch.Tensor | None = None  # [B, S, S] bool, padded: which tokens each token sees (None: causal)

    @property
    def size(self) -> int:
        return self.input_ids.shape[0]

    @property
    def seq_len(self) -> int:
        return self.input_ids.shape[1]

    @property
    def offsets(self) -> torch.Tensor:
        """Number of pad tokens before each example."""
        return self.seq_len - self.lengths

    def to(self, device: torch.device | str) -> "Batch":
        visible = None if self.visible is None else self.visible.to(device)
        return Batch(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.position_ids, self.lengths)),
                     self.prefix_len, visible)

    def with_prefix(self, prefix_len: int) -> "Batch":
        """This batch as the suffixes of examples that start with ``prefix_len`` cached tokens."""
        return Batch(self.input_ids, self.attention_mask, self.position_ids, self.lengths, prefix_len, self.visible)

    def append(self, tokens: torch.Tensor) -> "Batch":
        """This batch with one more token per example (a [B] tensor) on the right, as in generation.

        Offsets (left pads) stay the same, so a key/value cache of this batch stays valid.
        """
        if self.visible is not None:
            raise WhiteboxError("a packed batch (several sequences per row) cannot be extended token by token")
        tokens = tokens.to(self.input_ids.device, torch.long).view(-1, 1)
        if tokens.shape[0] != self.size:
            raise WhiteboxError(f"append needs one token per example ({self.size}), got {tokens.shape[0]}")
        ones = torch.ones_like(tokens, dtype=self.attention_mask.dtype)
        return Batch(torch.cat([self.input_ids, tokens], 1), torch.cat([self.attention_mask, ones], 1),
                     torch.cat([self.position_ids, self.position_ids[:, -1:] + 1], 1), self.lengths + 1, self.prefix_len)

    @property
    def example_lengths(self) -> torch.Tensor:
        return self.lengths + self.prefix_len

    def positions(self, positions: Positions) -> torch.Tensor:
        """Validate unpadded positions and return them as a [B, P] long tensor (negatives resolved)."""
        b = self.size
        if positions is None or (isinstance(positions, str) and positions == "last"):
            return (self.example_lengths - 1).unsqueeze(1)
        if isinstance(positions, str):
            raise WhiteboxError(f"positions must be 'last', a list per example or a [batch, n] tensor, not {positions!r}")
        if isinstance(positions, torch.Tensor):
            pos = positions.to(torch.long).cpu()
        else:
            rows = list(positions)
            if rows and isinstance(rows[0], int):
                rows = [rows] * b  # one list shared by every example
            if len(rows) != b:
                raise WhiteboxError(f"got positions for {len(rows)} examples but the batch has {b}")
            widths = {len(r) for r in rows}
            if len(widths) > 1:
                raise WhiteboxError(f"every example must request the same number of positions; got {sorted(widths)}")
            pos = torch.tensor([list(r) for r in rows], dtype=torch.long).reshape(b, -1)
        if pos.dim() == 1:
            pos = pos.unsqueeze(0).expand(b, -1)
        if pos.shape[0] != b:
            raise WhiteboxError(f"positions tensor has {pos.shape[0]} rows but the batch has {b} examples")
        lengths = self.example_lengths.cpu().unsqueeze(1)
        resolved = torch.where(pos < 0, pos + lengths, pos)
        bad = (resolved < 0) | (resolved >= lengths)
        if bad.any():
            i, j = [int(x) for x in bad.nonzero()[0]]
            raise WhiteboxError(
                f"position {int(pos[i, j])} is out of range for example {i}, which has {int(lengths[i])} tokens "
                f"(valid: 0..{int(lengths[i]) - 1} or -1..-{int(lengths[i])})"
            )
        return resolved

    def padded(self, positions: torch.Tensor) -> torch.Tensor:
        """Unpadded [B, P] example positions to indices into the padded (suffix) sequence."""
        if self.prefix_len and bool((positions < self.prefix_len).any()):
            raise WhiteboxError(
                f"position {int(positions.min())} lies inside the cached prefix ({self.prefix_len} tokens): "
                "only tokens after the prefix are computed in this pass"
            )
        return positions.to(self.input_ids.device) - self.prefix_len + self.offsets.to(self.input_ids.device).unsqueeze(1)

    def padded_positions(self, positions: Positions) -> torch.Tensor:
        """Validated [B, P] indices into the padded sequence (``"all"`` = every index)."""
        if isinstance(positions, str) and positions == "all":
            return torch.arange(self.seq_len, device=self.input_ids.device).expand(self.size, -1)
        return self.padded(self.positions(positions))

    def unpad_keys(self, x: torch.Tensor) -> torch.Tensor:
        """Re-index the last (key) axis of x [B, ..., K] to example coordinates, zero-filling the tail.

        K is the padded length plus the cached prefix: keys are laid out [prefix | pads | suffix].
        """
        b, s = self.size, x.shape[-1]
        p = self.prefix_len
        j = torch.arange(s, device=x.device).unsqueeze(0).expand(b, -1)
        idx = torch.where(j < p, j, j + self.offsets.to(x.device).unsqueeze(1))  # [B, K]
        valid = idx < s
        idx = idx.clamp(max=s - 1)
        shape = [b] + [1] * (x.dim() - 2) + [s]
        gathered = x.gather(-1, idx.view(shape).expand_as(x))
        return gathered * valid.view(shape).to(x.dtype)


def make_batch(tokenizer, texts: Sequence[str] | Sequence[Sequence[int]], *, add_special_tokens: bool = True) -> Batch:
    """Tokenize (or take token ids) and left-pad; position ids restart at each first real token.

    SmolLM2's tokenizer pads on the right by default and Gemma's adds ``<bos>``: we pad
    on the left ourselves and keep whatever special tokens the tokenizer adds.
    """
    if len(texts) == 0:
        raise WhiteboxError("cannot build a batch from zero examples")
    if isinstance(texts[0], str):
        ids = [tokenizer(t, add_special_tokens=add_special_tokens)["input_ids"] for t in texts]
    else:
        ids = [list(t) for t in texts]
    if any(len(x) == 0 for x in ids):
        raise WhiteboxError("an example tokenized to zero tokens; remove empty prompts")
    return batch_from_ids(ids, pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)


def batch_from_ids(ids: Sequence[Sequence[int]], pad_id: int = 0) -> Batch:
    """Left-pad lists of token ids into a :class:`Batch`."""
    lengths = torch.tensor([len(x) for x in ids], dtype=torch.long)
    s = int(lengths.max())
    input_ids = torch.full((len(ids), s), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), s), dtype=torch.long)
    for i, x in enumerate(ids):
        input_ids[i, s - len(x):] = torch.tensor(x, dtype=torch.long)
        mask[i, s - len(x):] = 1
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    return Batch(input_ids, mask, position_ids, lengths)
