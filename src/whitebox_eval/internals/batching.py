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

from dataclasses import dataclass, field
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
    host_lengths: torch.Tensor | None = field(default=None, repr=False, compare=False)
    """``lengths`` on the host (kept from the batch's construction, so positions are resolved without
    reading the device: a GPU batch answers ``"last"`` with no device-to-host copy)."""
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.host_lengths is None:
            self.host_lengths = self.lengths if self.lengths.device.type == "cpu" else self.lengths.cpu()

    @property
    def size(self) -> int:
        return self.input_ids.shape[0]

    @property
    def seq_len(self) -> int:
        return self.input_ids.shape[1]

    @property
    def offsets(self) -> torch.Tensor:
        """Number of pad tokens before each example (on the batch's device; computed once)."""
        if "offsets" not in self._memo:
            host = self.host_offsets
            self._memo["offsets"] = host if self.lengths.device.type == "cpu" else host.to(self.lengths.device)
        return self._memo["offsets"]

    @property
    def host_offsets(self) -> torch.Tensor:
        """:attr:`offsets` on the host (computed once)."""
        if "host_offsets" not in self._memo:
            self._memo["host_offsets"] = self.seq_len - self.host_lengths
        return self._memo["host_offsets"]

    @property
    def padded_anywhere(self) -> bool:
        """Whether any example has pad tokens before it (host-side, computed once)."""
        if "padded_anywhere" not in self._memo:
            self._memo["padded_anywhere"] = bool(int(self.host_lengths.min()) < self.seq_len)
        return self._memo["padded_anywhere"]

    def to(self, device: torch.device | str) -> "Batch":
        visible = None if self.visible is None else self.visible.to(device)
        return Batch(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.position_ids, self.lengths)),
                     self.prefix_len, visible, self.host_lengths)

    def with_prefix(self, prefix_len: int) -> "Batch":
        """This batch as the suffixes of examples that start with ``prefix_len`` cached tokens."""
        return Batch(self.input_ids, self.attention_mask, self.position_ids, self.lengths, prefix_len, self.visible,
                     self.host_lengths)

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
                     torch.cat([self.position_ids, self.position_ids[:, -1:] + 1], 1), self.lengths + 1, self.prefix_len,
                     None, self.host_lengths + 1)

    @property
    def example_lengths(self) -> torch.Tensor:
        return self.lengths + self.prefix_len

    @property
    def host_example_lengths(self) -> torch.Tensor:
        """Example lengths (prefix included) on the host, computed once."""
        if "host_example_lengths" not in self._memo:
            self._memo["host_example_lengths"] = self.host_lengths + self.prefix_len
        return self._memo["host_example_lengths"]

    def positions(self, positions: Positions) -> torch.Tensor:
        """Validate unpadded positions and return them as a [B, P] long tensor (negatives resolved)."""
        b = self.size
        if positions is None or (isinstance(positions, str) and positions == "last"):
            if "last" not in self._memo:
                self._memo["last"] = (self.host_example_lengths - 1).unsqueeze(1)
            return self._memo["last"]
        if isinstance(positions, str):
            raise WhiteboxError(f"positions must be 'last', a list per example or a [batch, n] tensor, not {positions!r}")
        if not isinstance(positions, torch.Tensor):  # lists: resolved and checked in Python, one tensor made
            rows = list(positions)
            if rows and not isinstance(rows[0], (list, tuple, range)) and not hasattr(rows[0], "__len__"):
                rows = [rows] * b  # one list shared by every example
            if len(rows) != b:
                raise WhiteboxError(f"got positions for {len(rows)} examples but the batch has {b}")
            widths = {len(r) for r in rows}
            if len(widths) > 1:
                raise WhiteboxError(f"every example must request the same number of positions; got {sorted(widths)}")
            lengths = self._lengths_list()
            out = []
            for i, r in enumerate(rows):
                n = lengths[i]
                for p in r:
                    p = int(p)
                    q = p + n if p < 0 else p
                    if not 0 <= q < n:
                        self._out_of_range(p, i, n)
                    out.append(q)
            return torch.tensor(out, dtype=torch.long).view(b, -1)
        pos = positions.to(torch.long).cpu()
        if pos.dim() == 1:
            pos = pos.unsqueeze(0).expand(b, -1)
        if pos.shape[0] != b:
            raise WhiteboxError(f"positions tensor has {pos.shape[0]} rows but the batch has {b} examples")
        lengths = self.host_example_lengths.unsqueeze(1)
        resolved = torch.where(pos < 0, pos + lengths, pos)
        bad = (resolved < 0) | (resolved >= lengths)
        if bad.any():
            i, j = [int(x) for x in bad.nonzero()[0]]
            self._out_of_range(int(pos[i, j]), i, int(lengths[i]))
        return resolved

    def _lengths_list(self) -> list[int]:
        if "lengths_list" not in self._memo:
            self._memo["lengths_list"] = self.host_example_lengths.tolist()
        return self._memo["lengths_list"]

    @staticmethod
    def _out_of_range(p: int, i: int, n: int):
        raise WhiteboxError(f"position {p} is out of range for example {i}, which has {n} tokens "
                            f"(valid: 0..{n - 1} or -1..-{n})")

    def padded(self, positions: torch.Tensor) -> torch.Tensor:
        """Unpadded [B, P] example positions to indices into the padded (suffix) sequence (on the batch's device)."""
        return self.host_padded(positions).to(self.input_ids.device)

    def host_padded(self, positions: torch.Tensor) -> torch.Tensor:
        """:meth:`padded` on the host (``positions`` on the host: what :meth:`positions` returns)."""
        positions = positions.cpu()
        if self.prefix_len and bool((positions < self.prefix_len).any()):
            raise WhiteboxError(
                f"position {int(positions.min())} lies inside the cached prefix ({self.prefix_len} tokens): "
                "only tokens after the prefix are computed in this pass"
            )
        if "shift" not in self._memo:
            self._memo["shift"] = self.host_offsets.unsqueeze(1) - self.prefix_len
        return positions + self._memo["shift"]

    def padded_positions(self, positions: Positions) -> torch.Tensor:
        """Validated [B, P] indices into the padded sequence (``"all"`` = every index)."""
        return self.host_padded_positions(positions).to(self.input_ids.device)

    def host_padded_positions(self, positions: Positions) -> torch.Tensor:
        """:meth:`padded_positions` on the host."""
        if isinstance(positions, str) and positions == "all":
            return torch.arange(self.seq_len).expand(self.size, -1)
        if positions is None or (isinstance(positions, str) and positions == "last"):
            if "padded_last" not in self._memo:
                self._memo["padded_last"] = self.host_padded(self.positions("last"))
            return self._memo["padded_last"]
        return self.host_padded(self.positions(positions))

    def key_unpad_index(self, k_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Host [B, K] (index, valid) that re-index a padded key axis of length ``k_len`` ([prefix | pads |
        suffix]) to example coordinates: ``x.gather(-1, index) * valid`` (zero-filled tail). Computed once."""
        key = ("key_unpad", k_len)
        if key not in self._memo:
            p = self.prefix_len
            j = torch.arange(k_len).unsqueeze(0).expand(self.size, -1)
            idx = torch.where(j < p, j, j + self.host_offsets.unsqueeze(1))
            valid = idx < k_len
            self._memo[key] = (idx.clamp(max=k_len - 1), valid)
        return self._memo[key]

    def unpad(self, x: torch.Tensor, dim: int = 1) -> torch.Tensor:
        """Re-index the padded sequence axis ``dim`` of x [B, ...] to example coordinates: token ``j``
        of example ``i`` at ``[i, ..., j]``, zeros after its last token (a right-padded layout).
        Without a cached prefix; with one, the suffix tokens come first."""
        if not self.padded_anywhere:
            return x
        dim = dim % x.dim()
        s = x.shape[dim]
        if s != self.seq_len:
            raise WhiteboxError(f"axis {dim} has {s} entries; the batch's padded length is {self.seq_len}")
        j = torch.arange(s).unsqueeze(0)
        idx = (j + self.host_offsets.unsqueeze(1)).clamp(max=s - 1)
        valid = j < self.host_lengths.unsqueeze(1)
        shape = [self.size] + [1] * (x.dim() - 1)
        shape[dim] = s
        idx, valid = idx.to(x.device).view(shape), valid.to(x.device).view(shape)
        return x.gather(dim, idx.expand_as(x)) * valid

    def unpad_keys(self, x: torch.Tensor) -> torch.Tensor:
        """Re-index the last (key) axis of x [B, ..., K] to example coordinates, zero-filling the tail.

        K is the padded length plus the cached prefix: keys are laid out [prefix | pads | suffix].
        """
        b, s = self.size, x.shape[-1]
        idx, valid = (t.to(x.device) for t in self.key_unpad_index(s))
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
    """Left-pad lists of token ids into a :class:`Batch` (built in Python, one tensor each)."""
    rows = [list(x) for x in ids]
    s = max(len(x) for x in rows)
    input_ids = torch.tensor([[pad_id] * (s - len(x)) + x for x in rows], dtype=torch.long)
    mask = torch.tensor([[0] * (s - len(x)) + [1] * len(x) for x in rows], dtype=torch.long)
    position_ids = torch.tensor([[0] * (s - len(x)) + list(range(len(x))) for x in rows], dtype=torch.long)
    lengths = torch.tensor([len(x) for x in rows], dtype=torch.long)
    return Batch(input_ids, mask, position_ids, lengths, host_lengths=lengths)


def to_device(tensors: Sequence[torch.Tensor], device) -> list[torch.Tensor]:
    """Host tensors onto ``device`` in one copy per dtype (none on the CPU).

    Suites build their index and weight tensors on the host and upload them with this
    before the forward: a copy from pageable host memory waits for the device's queue, so
    an upload after the forward would wait for the whole pass."""
    if torch.device(device).type == "cpu":
        return list(tensors)
    out: list[torch.Tensor | None] = [None] * len(tensors)
    groups: dict[torch.dtype, list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)
    for dtype, idx in groups.items():
        flat = torch.cat([tensors[i].reshape(-1) for i in idx]).to(device, non_blocking=True)
        at = 0
        for i in idx:
            n = tensors[i].numel()
            out[i] = flat[at:at + n].view(tensors[i].shape)
            at += n
    return out  # type: ignore[return-value]
