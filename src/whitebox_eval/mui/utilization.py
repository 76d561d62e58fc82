"""Per-sample key sets and the Model Utilization Index (paper 001 sec. 2.2).

``MUI = |union_t N(t)| / N_total`` with ``N_total = n_layers x width`` (``width`` =
d_ff neurons per layer, or D SAE features per layer for eq. 9's feature MUI).

Key sets are stored sparsely: one sorted array of flat indices ``l * width + i`` per
sample (a CSR layout on disk: ``indices`` + ``offsets``). The paper's key sets hold
about ``k x n_layers`` units per sample, far fewer than ``n_layers x width`` bits,
so sparse indices beat packed bits. The MUI of any subset of samples is then a
union of small index arrays, with no model run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.key_set_file import FORMAT, read_key_set_file

Kind = Literal["neuron", "feature"]


def _to_numpy_mask(mask: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(mask, torch.Tensor):
        mask = mask.detach().cpu().numpy()
    return np.asarray(mask, dtype=bool)


@dataclass(eq=False)
class KeySets:
    """Key sets ``N(t)`` of a dataset's samples for one model (eq. 3 / 6)."""

    n_layers: int
    width: int
    kind: Kind = "neuron"
    sample_ids: list[str] = field(default_factory=list, init=False)
    _flat: list[np.ndarray] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.n_layers < 1 or self.width < 1:
            raise WhiteboxError(f"n_layers and width must be positive, got {self.n_layers} x {self.width}")
        if self.kind not in ("neuron", "feature"):
            raise WhiteboxError(f"kind must be 'neuron' or 'feature', got {self.kind!r}")

    # ------------------------------------------------------------------ building
    @property
    def total_units(self) -> int:
        """``N_total``: ``n_layers x width`` (neurons, or SAE features)."""
        return self.n_layers * self.width

    def add(self, mask: torch.Tensor | np.ndarray, sample_id: str | None = None) -> None:
        """Append one sample's key set, a boolean ``[n_layers, width]`` mask."""
        m = _to_numpy_mask(mask)
        if m.shape != (self.n_layers, self.width):
            raise WhiteboxError(
                f"key mask must have shape ({self.n_layers}, {self.width}), got {m.shape}"
            )
        self._append_flat(np.flatnonzero(m.reshape(-1)).astype(np.int64), sample_id)

    def add_indices(self, layers: Sequence[int], units: Sequence[int], sample_id: str | None = None) -> None:
        """Append one sample's key set given as ``(layer, unit)`` pairs."""
        la = np.asarray(layers, dtype=np.int64)
        ua = np.asarray(units, dtype=np.int64)
        if la.shape != ua.shape:
            raise WhiteboxError("layers and units must have the same length")
        if la.size and (la.min() < 0 or la.max() >= self.n_layers or ua.min() < 0 or ua.max() >= self.width):
            raise WhiteboxError(
                f"(layer, unit) pairs must lie in [0, {self.n_layers}) x [0, {self.width})"
            )
        self._append_flat(np.unique(la * self.width + ua), sample_id)

    def _append_flat(self, flat: np.ndarray, sample_id: str | None) -> None:
        if sample_id is None:
            sample_id = str(len(self._flat))
        self._flat.append(flat)
        self.sample_ids.append(str(sample_id))

    @classmethod
    def from_masks(
        cls, masks: Iterable[torch.Tensor | np.ndarray], *, kind: Kind = "neuron",
        sample_ids: Sequence[str] | None = None,
    ) -> KeySets:
        """Build from an iterable of ``[n_layers, width]`` boolean masks."""
        masks = [_to_numpy_mask(m) for m in masks]
        if not masks:
            raise WhiteboxError("from_masks needs at least one mask")
        if masks[0].ndim != 2:
            raise WhiteboxError(f"each mask must be [n_layers, width], got shape {masks[0].shape}")
        ks = cls(n_layers=masks[0].shape[0], width=masks[0].shape[1], kind=kind)
        ids = list(sample_ids) if sample_ids is not None else [None] * len(masks)
        if len(ids) != len(masks):
            raise WhiteboxError(f"got {len(ids)} sample_ids for {len(masks)} masks")
        for m, sid in zip(masks, ids):
            ks.add(m, sid)
        return ks

    def positions(self, ids: Sequence[str]) -> list[int]:
        """The indices of the samples ``ids``, in that order (for :meth:`subset`)."""
        pos = {sid: j for j, sid in enumerate(self.sample_ids)}
        unknown = [str(i) for i in ids if str(i) not in pos]
        if unknown:
            raise WhiteboxError(f"no key set for sample(s) {', '.join(unknown[:5])}")
        return [pos[str(i)] for i in ids]

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._flat)

    def _resolve(self, samples: Sequence[int] | np.ndarray | None) -> list[int]:
        n = len(self._flat)
        if samples is None:
            return list(range(n))
        arr = np.asarray(samples)
        if arr.dtype == bool:
            if arr.shape != (n,):
                raise WhiteboxError(f"a boolean sample selector must have length {n}, got {arr.shape}")
            return list(np.flatnonzero(arr))
        idx = [int(i) for i in arr.reshape(-1)]
        for i in idx:
            if not -n <= i < n:
                raise WhiteboxError(f"sample index {i} out of range for {n} samples")
        return idx

    def flat_indices(self, sample: int) -> np.ndarray:
        """Sorted flat indices ``l * width + i`` of one sample's key units."""
        return self._flat[self._resolve([sample])[0]]

    def mask(self, sample: int) -> np.ndarray:
        """One sample's key set as a boolean ``[n_layers, width]`` mask."""
        out = np.zeros(self.total_units, dtype=bool)
        out[self.flat_indices(sample)] = True
        return out.reshape(self.n_layers, self.width)

    def counts(self) -> np.ndarray:
        """``|N(t)|`` per sample."""
        return np.array([f.size for f in self._flat], dtype=np.int64)

    def union_mask(self, samples: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """``union_t N(t)`` over the chosen samples (all by default), ``[n_layers, width]``."""
        out = np.zeros(self.total_units, dtype=bool)
        for i in self._resolve(samples):
            out[self._flat[i]] = True
        return out.reshape(self.n_layers, self.width)

    def n_activated(self, samples: Sequence[int] | np.ndarray | None = None) -> int:
        """``N_activated(T) = |union_t N(t)|`` (sec. 2.2)."""
        return int(self.union_mask(samples).sum())

    def mui(self, samples: Sequence[int] | np.ndarray | None = None) -> float:
        """MUI of the chosen samples: ``|union_t N(t)| / (n_layers x width)`` (sec. 2.2, eq. for MUI_neuron / MUI_feature)."""
        if len(self._resolve(samples)) == 0:
            raise WhiteboxError("cannot compute MUI of an empty set of samples")
        return self.n_activated(samples) / self.total_units

    def layer_mui(self, samples: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Per-layer share of activated units, ``[n_layers]`` (a breakdown, not in the paper)."""
        return self.union_mask(samples).mean(axis=1)

    def subset(self, samples: Sequence[int] | np.ndarray) -> KeySets:
        """A new ``KeySets`` holding only the chosen samples."""
        idx = self._resolve(samples)
        out = KeySets(self.n_layers, self.width, self.kind)
        for i in idx:
            out._append_flat(self._flat[i], self.sample_ids[i])
        return out

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Save as ``.safetensors`` or ``.npz`` (chosen by suffix) in CSR layout."""
        path = Path(path)
        offsets = np.zeros(len(self._flat) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(self.counts())
        indices = np.concatenate(self._flat) if self._flat else np.zeros(0, dtype=np.int64)
        meta = {
            "format": FORMAT, "n_layers": self.n_layers, "width": self.width,
            "kind": self.kind, "sample_ids": self.sample_ids,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".safetensors":
            from safetensors.numpy import save_file

            save_file({"indices": indices, "offsets": offsets}, str(path),
                      metadata={"whitebox_eval": json.dumps(meta)})
        elif path.suffix == ".npz":
            np.savez_compressed(path, indices=indices, offsets=offsets, meta=np.array(json.dumps(meta)))
        else:
            raise WhiteboxError(f"key-set file must end in .safetensors or .npz, got {path.name!r}")
        return path

    @classmethod
    def load(cls, path: str | Path) -> KeySets:
        """Load a file written by :meth:`save`."""
        indices, offsets, meta = read_key_set_file(path)
        out = cls(int(meta["n_layers"]), int(meta["width"]), meta["kind"])
        ids = meta["sample_ids"]
        for i in range(len(offsets) - 1):
            out._append_flat(np.asarray(indices[offsets[i]:offsets[i + 1]], dtype=np.int64), ids[i])
        return out


def mui_from_masks(masks: Iterable[torch.Tensor | np.ndarray]) -> float:
    """MUI straight from per-sample boolean masks: ``|OR_t mask_t| / mask.size`` (sec. 2.2)."""
    union: np.ndarray | None = None
    for m in masks:
        a = _to_numpy_mask(m)
        if union is None:
            union = a.copy()
        elif a.shape != union.shape:
            raise WhiteboxError(f"all masks must have the same shape, got {a.shape} and {union.shape}")
        else:
            union |= a
    if union is None:
        raise WhiteboxError("cannot compute MUI of an empty set of samples")
    return float(union.sum()) / union.size


def mui_by_group(key_sets: KeySets, groups: Mapping[str, Sequence[int] | np.ndarray]) -> dict[str, float]:
    """MUI of each named group of samples (domains, abilities, correct vs incorrect; sec. 3.6-3.7)."""
    return {name: key_sets.mui(idx) for name, idx in groups.items()}


def random_subset_mui(
    key_sets: KeySets, size: int, *, draws: int = 1, seed: int = 0,
    pool: Sequence[int] | np.ndarray | None = None,
) -> np.ndarray:
    """MUI of ``draws`` random subsets of ``size`` samples from ``pool`` (sec. 3.6: fixed-size draws)."""
    candidates = np.asarray(key_sets._resolve(pool))
    if not 1 <= size <= candidates.size:
        raise WhiteboxError(f"size must be in [1, {candidates.size}], got {size}")
    rng = np.random.default_rng(seed)
    return np.array([
        key_sets.mui(rng.choice(candidates, size=size, replace=False)) for _ in range(draws)
    ])


def matched_random_mask(
    key_mask: np.ndarray | torch.Tensor, *, seed: int = 0, per_layer: bool = True,
    exclude_key: bool = True,
) -> np.ndarray:
    """Random units, as many as in ``key_mask``, for the masking control of sec. 3.8.

    ``per_layer``: match the count layer by layer (else over the whole model).
    ``exclude_key``: draw only among units outside ``key_mask``.
    """
    km = _to_numpy_mask(key_mask)
    if km.ndim != 2:
        raise WhiteboxError(f"key_mask must be [n_layers, width], got shape {km.shape}")
    rng = np.random.default_rng(seed)
    out = np.zeros_like(km)
    rows = [(l, km[l]) for l in range(km.shape[0])] if per_layer else [(None, km.reshape(-1))]
    for l, row in rows:
        n = int(row.sum())
        allowed = np.flatnonzero(~row) if exclude_key else np.arange(row.size)
        if n > allowed.size:
            raise WhiteboxError("not enough non-key units to draw a matched random set; set exclude_key=False")
        pick = rng.choice(allowed, size=n, replace=False)
        if l is None:
            out.reshape(-1)[pick] = True
        else:
            out[l, pick] = True
    return out
