"""The plan of one pass: every site, capture and edit it serves, indexed by layer, and the
host tensors it uploads once.

The work per layer is what a GPU pays for most at small batches (every dispatched op costs ~10
microseconds of launch, whatever its size), so a pass does per layer only what cannot be done
once per pass (``tests/internals/test_op_counts.py`` holds the line): every index, row mask and
edit tensor is built once per pass, on the host, and uploaded in one copy per dtype before the
forward; no hook reads the device. A *small* pass on an accelerator (:data:`KEEP_BYTES`) keeps
references to the tensors its captures read (no op in the layer) and gathers once after the pass
(:mod:`.pass_results`); a larger one, or any pass on the CPU, gathers each layer's rows in its hook
(one ``gather`` per read) and keeps only those.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.batching import Batch
from whitebox_eval.internals.host_tensors import Host, Pos, device_key
from whitebox_eval.internals.pass_attention import AttentionWork, AttnNeeds
from whitebox_eval.internals.pass_results import Collection
from whitebox_eval.internals.requests import Capture
from whitebox_eval.internals.sites import SITES, SiteSpec


KEEP_BYTES = 2 * 2**30
"""The memory a pass may hold to gather its captures once after the forward (2 GiB).

Estimated before the pass: every tensor a capture reads, kept by reference for each of its
layers, twice (the stacked copy made after the pass), plus float32 copies of the keys that
attention rows need. Under it the hooks only keep references (no op per layer); above it
each hook gathers its rows at once and the layer's tensors are freed as the model frees
them. gpu_check's 7-9B shapes at batch 8 with mcqa's four captures keep 0.4-1.7 GiB at
0-shot (72 tokens), so the first figure users meet is the cheap one; at batch 32 or
5-shot lengths the pass is compute-bound and gathers per layer. A pass on the CPU gathers per
layer whatever its size (:func:`keep_bytes_for`): no launch to save there, and the layers'
tensors are freed as the model frees them. ``Engine.keep_bytes`` overrides it per engine
(0: always per layer)."""


def keep_bytes_for(device) -> int:
    """The memory a pass on ``device`` may keep by reference: :data:`KEEP_BYTES` on an accelerator
    (fewer launches), 0 on the CPU, where an op costs no launch and gathering each layer's rows in
    its hook measures lighter (``benchmarks/results/engine_ops.md``)."""
    return 0 if torch.device(device).type == "cpu" else KEEP_BYTES


class Site:
    """One (module, hook kind) of one layer, serving every capture and edit that reads or writes it."""

    def __init__(self, spec: SiteSpec, point: str, layer: int):
        self.module, self.kind, self.seq_dim, self.width, self.view = spec.module, spec.kind, spec.seq_dim, spec.width, spec.view
        self.point, self.layer = point, layer
        self.reads: dict[int, Pos | None] = {}  # id -> positions (None: every computed column)
        self.grad_reads: list[tuple[str, Pos | None]] = []
        self.writes: list[Callable[[torch.Tensor], None]] = []


class Plan(AttentionWork, Collection):
    """Everything one pass has to do, indexed by layer; holds the results as they arrive."""

    def __init__(self, engine, batch: Batch, past: int = 0, key_shift: int = 0):
        self.engine, self.arch, self.batch = engine, engine.arch, batch
        self.past = past  # leading padded columns already in a key/value cache: this pass computes the rest
        self.key_shift = key_shift  # key columns before this pass's first computed column (cache or prefix)
        self.computed_len = batch.seq_len - past
        self.sites: dict[tuple, Site] = {}
        self.attn: dict[int, AttnNeeds] = defaultdict(AttnNeeds)
        self.captures: list[tuple[Capture, list[int], str, Pos | None]] = []  # (capture, layers, source, positions)
        self.grads: dict[str, dict[int, torch.Tensor]] = {}
        self.keep = False  # references kept, gathered after the pass (decided by :meth:`decide`)
        self.chunked = False  # SDPA by query chunks (attention.by_query_chunks): a packed pass on the CPU
        self.kept: dict[str, dict[int, torch.Tensor]] = defaultdict(dict)  # point -> layer -> what the hook saw
        self.kept_qk: dict[int, tuple] = {}  # layer -> (query, key, mask, scaling, softcap)
        self.gathered: dict[tuple, dict[int, torch.Tensor]] = defaultdict(dict)  # (source, id) -> layer -> rows
        self._positions: dict[tuple, Pos] = {}
        self._hosts: list[Host] = []
        self._memo: dict[tuple, object] = {}  # masks, buffers, indices: built once per pass
        self._slots: dict[tuple, tuple[dict[int, int], tuple[torch.Tensor, ...], torch.Tensor]] = {}  # key -> (layer -> slot, slots, buffer)
        self.unnormalised: dict[tuple, list[int]] = defaultdict(list)  # rows key -> layers whose slot holds scores

    def host(self, t: torch.Tensor) -> Host:
        h = Host(t)
        self._hosts.append(h)
        return h

    def pos(self, host: torch.Tensor) -> Pos:
        """The one :class:`Pos` of these positions in this pass (captures at the same positions share it)."""
        if host.dtype != torch.long:
            host = host.to(torch.long)
        key = (tuple(host.shape), str(host.tolist()))
        p = self._positions.get(key)
        if p is None:
            p = self._positions[key] = Pos(host)
            self._hosts.append(p)
        return p

    def computed(self, ppos: torch.Tensor, what: str) -> torch.Tensor:
        """Padded positions [B, P] (host) -> indices into the columns this pass computes (after a cache)."""
        if not self.past:
            return ppos
        if bool((ppos < self.past).any()):
            raise WhiteboxError(
                f"{what} asks for a position already in the key/value cache (the first {self.past} padded "
                "columns): only the tokens this pass computes can be read"
            )
        return ppos - self.past

    def memo(self, key: tuple, make):
        """``make()`` once per pass for ``key``."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def computed_or_cut(self, ppos: torch.Tensor) -> torch.Tensor:
        """Padded positions (host) as indices into the computed columns; those in a cache become negative."""
        return ppos - self.past if self.past else ppos

    def upload(self, device) -> None:
        """Every host tensor of the pass onto ``device``: one copy per dtype (none on the CPU)."""
        if torch.device(device).type == "cpu":
            return
        by_dtype: dict[torch.dtype, list[Host]] = defaultdict(list)
        for h in self._hosts:
            by_dtype[h.host.dtype].append(h)
        for group in by_dtype.values():
            flat = torch.cat([h.host.reshape(-1) for h in group]).to(device, non_blocking=True)
            at = 0
            for h in group:
                n = h.host.numel()
                h.on_device[device_key(device)] = flat[at:at + n].view(h.host.shape)
                at += n

    def decide(self, keep_bytes: int, itemsize: int) -> None:
        """References kept (and gathered once after the pass) when what they hold fits ``keep_bytes``."""
        b, sq = self.batch.size, self.computed_len
        k_len = self.key_shift + sq
        arch = self.arch
        elements = sum(b * sq * s.width for s in self.sites.values() if any(p is not None for p in s.reads.values()))
        keys = 0
        for need in self.attn.values():
            if need.rot or need.rows:
                elements += b * arch.n_heads * sq * arch.head_dim + b * arch.n_kv_heads * k_len * arch.head_dim
                keys += b * arch.n_kv_heads * k_len * arch.head_dim
        self.keep = 2 * elements * itemsize + 4 * keys <= keep_bytes

    def slot(self, key: tuple, layer: int, shape, dtype, device) -> torch.Tensor | None:
        """Where ``layer``'s rows of a per-layer read (``key`` of :attr:`gathered`) are written: a slot of
        one buffer holding every layer of that read, made at its first layer; None where autograd records
        the pass (an ``out=`` op has no gradient) or the layer's rows differ from the buffer's (another
        device under a device map). The rows of 30 layers written into one block, instead of 30 small
        tensors made between a layer's large temporaries, leave the CPU heap unfragmented: a pass's peak
        memory is then what plain transformers' is (``benchmarks/results/engine_ops.md``)."""
        if torch.is_grad_enabled():
            return None
        got = self._slots.get(key)
        if got is None:
            layers = self._slot_layers(key)
            buffer = torch.empty((len(layers), *shape), dtype=dtype, device=device)
            got = self._slots[key] = ({l: i for i, l in enumerate(layers)}, buffer.unbind(0), buffer)
        at, slots, _ = got
        i = at.get(layer)
        if i is None:
            return None
        out = slots[i]
        return out if tuple(out.shape) == tuple(shape) and out.dtype == dtype and out.device == device else None

    def _slot_layers(self, key: tuple) -> list[int]:
        """The layers whose hooks or attention function gather the per-layer read ``key``."""
        if key[0] == "site":
            return sorted(l for (point, l), s in self.sites.items() if point == key[1] and key[2] in s.reads)
        if key[0] == "rot":
            return sorted(l for l, need in self.attn.items() if any(r[0] == key[1] for r in need.rot))
        return sorted(l for l, need in self.attn.items() if key[1] in need.rows and not (need.full or need.edits))

    def site(self, point: str, layer: int) -> Site:
        """The hook site that exposes ``point`` of ``layer`` as a canonical view."""
        key = (point, layer)
        if key not in self.sites:
            if point not in SITES:  # pragma: no cover - guarded by CAPTURE_POINTS / PATCH_POINTS
                raise WhiteboxError(f"no hook site for {point}")
            self.sites[key] = Site(SITES[point](self.arch, layer), point, layer)
        return self.sites[key]
