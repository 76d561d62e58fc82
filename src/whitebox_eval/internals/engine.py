"""The engine: one forward pass of the Hugging Face model with captures and edits.

It works on the model's own modules: forward (pre-)hooks on projections, norms,
o_proj, the down projection and the decoder blocks, plus the registered attention
function of :mod:`whitebox_eval.internals.attention`. Hooks are installed for one
pass and removed after it, only on the modules the request needs.

    engine = Engine(load_model("smollm2-135m"))
    batch = engine.batch(["Question ... Answer:"])
    trace = engine.run(batch, captures=[Capture("q", "last"), Capture("attn", "last")])
    trace.logits            # [B, vocab] at the last position
    trace["q"]              # [B, n_layers, 1, n_heads, head_dim]

The work per layer is what a GPU pays for most at small batches (every dispatched op
costs ~10 microseconds of launch, whatever its size), so the engine does per layer only
what cannot be done once per pass (``tests/internals/test_op_counts.py`` holds the line):

- every index, row mask and edit tensor is built once per pass, on the host, and
  uploaded in one copy per dtype before the forward; no hook reads the device;
- a *small* pass on an accelerator (:data:`KEEP_BYTES`) keeps references to the tensors its
  captures read (no op in the layer) and gathers once after the pass, every layer at once; a
  larger one, or any pass on the CPU, gathers each layer's rows in its hook (one ``gather`` per
  read) and keeps only those;
- captured attention rows are one fused product per layer (``baddbmm``: scale and mask
  inside the product, the mask built once per pass and mask kind) into float32 buffers
  made once per pass, or one product for every layer after a small pass; rows stay padded
  during the pass and are un-padded once, on the stacked result.

:func:`registry` lists every capture point and edit the engine serves (the op-count test
iterates it, so a point added later is held to the same budget).
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import attention as attn_impl
from whitebox_eval.internals.batching import Batch, Positions, make_batch
from whitebox_eval.internals.hook_points import capture_alias, patch_alias, point_width
from whitebox_eval.internals.requests import (
    ATTENTION_MODES,
    CAPTURE_POINTS,
    PATCH_POINTS,
    AddVector,
    Capture,
    CellRule,
    ClampFeature,
    Edit,
    EditAttention,
    MaskNeurons,
    Patch,
    Replace,
    ScaleHeads,
    Trace,
)
from whitebox_eval.models.architectures import Architecture
from whitebox_eval.models.loading import LoadedModel

PER_HEAD_POINTS = {"q_proj": "q", "k_proj": "kv", "q": "q", "k": "kv", "v": "kv", "head_out": "q"}

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


class _Stop(Exception):
    """Raised by the hook on block ``stop_after``: the blocks above are never run."""

    def __init__(self, hidden: torch.Tensor):
        super().__init__()
        self.hidden = hidden


# ---- the registry: every capture point, where it is read, and every edit ---------------------

@dataclass(frozen=True)
class SiteSpec:
    """Where a capture point lives in one layer and how to read it.

    ``kind``: a forward hook on ``module``'s output (``"out"``), a pre-hook on its first input
    (``"pre"``) or on a decoder block's hidden states (``"pre_block"``). ``seq_dim``: the token
    axis of the tensor the hook sees (1 for [B, S, ...], 2 for [B, H, S, D]). ``width``: its
    elements per token. ``view``: that tensor -> the canonical [B, S, ...] of the point, written
    with negative dimensions only, so it also serves a stack of layers ([B, L, S, ...]).
    """

    module: torch.nn.Module
    kind: str
    seq_dim: int
    width: int
    view: Callable[[torch.Tensor], torch.Tensor]


def _projection(which: str) -> Callable[[Architecture, int], SiteSpec]:
    """q_proj / k_proj / v (and q / k where the family has no q/k norm): a projection's output."""

    def site(arch: Architecture, layer: int) -> SiteSpec:
        D = arch.head_dim
        n = arch.n_heads if which == "q" else arch.n_kv_heads
        if arch.family.qkv_proj is None:
            return SiteSpec(arch.attn_part(layer, f"{which}_proj"), "out", 1, n * D, lambda t: t.unflatten(-1, (n, D)))
        if arch.family.qkv_interleaved:  # gpt_neox: [.., H, (q k v) * D] per head
            s0 = "qkv".index(which) * D
            return SiteSpec(arch.attn_part(layer, "qkv_proj"), "out", 1, 3 * n * D,
                            lambda t: t.unflatten(-1, (n, 3 * D))[..., s0:s0 + D])
        q, k, v = arch.qkv_sizes()
        start, width = {"q": (0, q), "k": (q, k), "v": (q + k, v)}[which]
        return SiteSpec(arch.attn_part(layer, "qkv_proj"), "out", 1, q + k + v,
                        lambda t: t[..., start:start + width].unflatten(-1, (n, D)))

    return site


def _pre_rope(which: str) -> Callable[[Architecture, int], SiteSpec]:
    """q / k: pre-RoPE, after the family's q/k norm where it has one."""

    def site(arch: Architecture, layer: int) -> SiteSpec:
        fam = arch.family
        if fam.q_norm is None:
            return _projection(which)(arch, layer)
        n, D = (arch.n_heads if which == "q" else arch.n_kv_heads), arch.head_dim
        module = arch.attn_part(layer, f"{which}_norm")
        if fam.qk_norm_layout == "bshd":
            return SiteSpec(module, "out", 1, n * D, lambda t: t)
        if fam.qk_norm_layout == "bhsd":
            return SiteSpec(module, "out", 2, n * D, lambda t: t.transpose(-3, -2))
        return SiteSpec(module, "out", 1, n * D, lambda t: t.unflatten(-1, (n, D)))

    return site


SITES: dict[str, Callable[[Architecture, int], SiteSpec]] = {
    "q_proj": _projection("q"),
    "k_proj": _projection("k"),
    "v": _projection("v"),
    "q": _pre_rope("q"),
    "k": _pre_rope("k"),
    "head_out": lambda a, l: SiteSpec(a.attn_part(l, "o_proj"), "pre", 1, a.n_heads * a.head_dim,
                                      lambda t: t.unflatten(-1, (a.n_heads, a.head_dim))),
    "mlp_act": lambda a, l: SiteSpec(a.mlp_down(l), "pre", 1, a.d_ff, lambda t: t),
    "mlp_gate_act": lambda a, l: SiteSpec(a.mlp_act_fn(l), "out", 1, a.d_ff, lambda t: t),
    "resid_pre": lambda a, l: SiteSpec(a.blocks[l], "pre_block", 1, a.d_model, lambda t: t),
    "resid": lambda a, l: SiteSpec(a.blocks[l], "out", 1, a.d_model, lambda t: t),
    # what a branch adds to the residual (after the family's post-norm, where it has one)
    "mlp_out": lambda a, l: SiteSpec(a.block_part(l, "mlp_out"), "out", 1, a.d_model, lambda t: t),
    "attn_out": lambda a, l: SiteSpec(a.block_part(l, "attn_out"), "out", 1, a.d_model, lambda t: t),
    # the input of the module that reads the residual between attention and MLP
    "resid_mid": lambda a, l: SiteSpec(a.block_part(l, "resid_mid"), "pre", 1, a.d_model, lambda t: t),
}
"""Capture points read by a hook on a module: point -> its :class:`SiteSpec` in a layer. A new
point is one entry here (and its name in ``requests.CAPTURE_POINTS``)."""

ATTENTION_POINTS = ("q_rot", "k_rot", "attn", "attn_full", "attn_mean")
"""Capture points read inside the registered attention function (post-RoPE q/k, probabilities)."""

EDIT_KINDS = (ScaleHeads, MaskNeurons, EditAttention, Patch, Replace, AddVector, ClampFeature)

if set(SITES) | set(ATTENTION_POINTS) != set(CAPTURE_POINTS):  # pragma: no cover - a registry out of step
    raise ImportError("the engine's SITES and ATTENTION_POINTS must serve exactly requests.CAPTURE_POINTS")


def registry() -> dict[str, tuple]:
    """Everything the engine serves: capture points, patchable points, edit kinds and attention-edit
    modes (``tests/internals/test_op_counts.py`` holds each of them to the op budget)."""
    return {"captures": tuple(CAPTURE_POINTS), "patch_points": tuple(PATCH_POINTS), "edits": EDIT_KINDS,
            "attention_modes": tuple(ATTENTION_MODES)}


@dataclass
class Prefix:
    """Key/value cache of a token prefix shared by every example (e.g. few-shot demonstrations).

    Made by :meth:`Engine.prefix`; pass it to :meth:`Engine.run` with a batch of the
    suffixes (``batch.with_prefix(prefix.length)`` is done for you). The suffix pass
    then costs what the suffix costs, whatever the prefix length.
    """

    ids: list[int]
    keys: list[torch.Tensor]  # per layer [1, Hkv, P, D]
    values: list[torch.Tensor]

    @property
    def length(self) -> int:
        return len(self.ids)

    def cache_for(self, batch_size: int):
        from transformers import DynamicCache

        cache = DynamicCache()
        for layer, (k, v) in enumerate(zip(self.keys, self.values)):
            cache.update(k.expand(batch_size, -1, -1, -1), v.expand(batch_size, -1, -1, -1), layer)
        return cache


def _full_precision(x: torch.Tensor) -> torch.Tensor:
    """bf16/fp16 results handed out as float32, so every score computed from them (softmax,
    log-likelihoods, q.k products, lens) accumulates in float32 whatever the weights are."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def _handed_out(x: torch.Tensor) -> torch.Tensor:
    """A capture as the trace holds it: float32 (from bf16/fp16) and contiguous, in one copy at most."""
    if x.dtype in (torch.bfloat16, torch.float16):
        return x.to(torch.float32, memory_format=torch.contiguous_format)
    return x.contiguous()


def _dev(device) -> str:
    return str(device)


class _Host:
    """A tensor built on the host while planning; on the pass's device after :meth:`_Plan.upload`
    (one copy per dtype for all of them), and on any other device a layer sits on (device map) on
    first use."""

    def __init__(self, host: torch.Tensor):
        self.host = host
        self.on_device: dict[str, torch.Tensor] = {}

    def on(self, device) -> torch.Tensor:
        key = _dev(device)
        t = self.on_device.get(key)
        if t is None:
            t = self.on_device[key] = self.host if torch.device(device).type == "cpu" else self.host.to(device)
        return t


    def unbound(self, device) -> tuple[torch.Tensor, ...]:
        """The rows of this [K, ...] tensor on ``device`` as a tuple (index_put's indices), made once."""
        key = "unbound@" + _dev(device)
        t = self.on_device.get(key)
        if t is None:
            t = self.on_device[key] = tuple(self.on(device).unbind(0))
        return t


def _positions_key(positions) -> tuple:
    """A key for memoising what a pass derives from ``positions`` (edits at the same positions share it)."""
    if positions is None or isinstance(positions, str):
        return ("named", positions)
    if isinstance(positions, torch.Tensor):
        return ("tensor", id(positions))
    return ("list", repr(positions))


class _Pos(_Host):
    """[B, P] positions of one pass (columns this pass computes, padded), with the gather index
    each tensor shape needs, built once per pass and device."""

    def __init__(self, host: torch.Tensor):
        super().__init__(host)
        self.n = host.shape[1]
        self._index: dict[tuple, torch.Tensor] = {}

    def index(self, shape: Sequence[int], dim: int, device) -> torch.Tensor:
        """The index that gathers these positions along ``dim`` of a tensor whose dim 0 is the batch:
        ``shape`` is the result's ([..., P at dim, ...])."""
        key = (tuple(shape), dim, _dev(device))
        idx = self._index.get(key)
        if idx is None:
            view = [self.host.shape[0]] + [1] * (len(shape) - 1)
            view[dim] = self.n
            idx = self._index[key] = self.on(device).view(view).expand(*shape)
        return idx


def _with(shape: Sequence[int], dim: int, n: int) -> list[int]:
    out = list(shape)
    out[dim] = n
    return out


class _Site:
    """One (module, hook kind) of one layer, serving every capture and edit that reads or writes it."""

    def __init__(self, spec: SiteSpec, point: str, layer: int):
        self.module, self.kind, self.seq_dim, self.width, self.view = spec.module, spec.kind, spec.seq_dim, spec.width, spec.view
        self.point, self.layer = point, layer
        self.reads: dict[int, _Pos | None] = {}  # id -> positions (None: every computed column)
        self.grad_reads: list[tuple[str, _Pos | None]] = []
        self.writes: list[Callable[[torch.Tensor], None]] = []


class _AttnNeeds:
    """What one layer's attention function has to do besides computing attention."""

    def __init__(self):
        self.rot: list[tuple[str, str, _Pos]] = []  # (capture key, "q"|"k", positions in the query|key axis)
        self.rows: dict[int, _Pos] = {}  # attention rows at these query positions
        self.full: list[tuple[str, bool]] = []  # (capture key, head mean)
        self.edits: list[_AttnEdit] = []


class _Cells:
    """The tensors of one set of attention-edit cells, shared by every edit that uses them (one set of
    cells edited in many layers is built once per pass): [B, 1, S, K] on the device."""

    def __init__(self, cells: _Host, target: _Host | None):
        self.cells, self.target = cells, target  # [B, 1, S, K] bool; force's normalised pattern
        self._memo: dict[tuple, torch.Tensor] = {}

    def get(self, name: str, device, make) -> torch.Tensor:
        key = (name, _dev(device))
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]


class _AttnEdit:
    """One :class:`EditAttention`: its cells' shared tensors and its own heads ([1, H, 1, 1])."""

    def __init__(self, e: EditAttention, cells: _Cells, heads: _Host, source: _Host | None):
        self.e, self.cells, self.heads, self.source = e, cells, heads, source

    def apply(self, p: torch.Tensor) -> torch.Tensor:
        """Edit the probabilities ``p`` [B, H, Sq, K] (float32); returns the edited tensor (maybe ``p``)."""
        e, c, dev = self.e, self.cells, p.device
        heads = self.heads.on(dev)
        rows = c.get("rows", dev, lambda: c.cells.on(dev).any(-1, keepdim=True))  # [B, 1, S, 1]
        rows_h = None
        if e.mode == "add":  # (value at the cells) x (1 for the edited heads, 0 for the others)
            p.add_(c.get(("add", e.value), dev, lambda: c.cells.on(dev).to(p.dtype) * e.value) * heads.to(p.dtype))
        elif e.mode == "add_above":
            above = c.get(("above", e.threshold), dev,
                          lambda: torch.where(c.cells.on(dev), e.threshold, float("inf")).to(p.dtype))
            p = torch.where((p > above) & heads, p + e.value, p)
        else:
            rows_h = rows & heads
            if e.mode == "force":
                p = torch.where(rows_h, c.target.on(dev).to(p.dtype), p)
            elif e.mode == "copy_head":
                p = torch.where(rows_h, p.index_select(1, self.source.on(dev)), p)
        if e.renormalize:
            rows_h = rows & heads if rows_h is None else rows_h
            p = torch.where(rows_h, p / p.sum(-1, keepdim=True), p)
        return p


class _Plan:
    """Everything one pass has to do, indexed by layer; holds the results as they arrive."""

    def __init__(self, engine: "Engine", batch: Batch, past: int = 0, key_shift: int = 0):
        self.engine, self.arch, self.batch = engine, engine.arch, batch
        self.past = past  # leading padded columns already in a key/value cache: this pass computes the rest
        self.key_shift = key_shift  # key columns before this pass's first computed column (cache or prefix)
        self.computed_len = batch.seq_len - past
        self.sites: dict[tuple, _Site] = {}
        self.attn: dict[int, _AttnNeeds] = defaultdict(_AttnNeeds)
        self.captures: list[tuple[Capture, list[int], str, _Pos | None]] = []  # (capture, layers, source, positions)
        self.grads: dict[str, dict[int, torch.Tensor]] = {}
        self.keep = False  # references kept, gathered after the pass (decided by :meth:`decide`)
        self.kept: dict[str, dict[int, torch.Tensor]] = defaultdict(dict)  # point -> layer -> what the hook saw
        self.kept_qk: dict[int, tuple] = {}  # layer -> (query, key, mask, scaling, softcap)
        self.gathered: dict[tuple, dict[int, torch.Tensor]] = defaultdict(dict)  # (source, id) -> layer -> rows
        self._positions: dict[tuple, _Pos] = {}
        self._hosts: list[_Host] = []
        self._memo: dict[tuple, object] = {}  # masks, buffers, indices: built once per pass

    # ---- host-side inputs ---------------------------------------------------
    def host(self, t: torch.Tensor) -> _Host:
        h = _Host(t)
        self._hosts.append(h)
        return h

    def pos(self, host: torch.Tensor) -> _Pos:
        """The one :class:`_Pos` of these positions in this pass (captures at the same positions share it)."""
        if host.dtype != torch.long:
            host = host.to(torch.long)
        key = (tuple(host.shape), str(host.tolist()))
        p = self._positions.get(key)
        if p is None:
            p = self._positions[key] = _Pos(host)
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
        by_dtype: dict[torch.dtype, list[_Host]] = defaultdict(list)
        for h in self._hosts:
            by_dtype[h.host.dtype].append(h)
        for group in by_dtype.values():
            flat = torch.cat([h.host.reshape(-1) for h in group]).to(device, non_blocking=True)
            at = 0
            for h in group:
                n = h.host.numel()
                h.on_device[_dev(device)] = flat[at:at + n].view(h.host.shape)
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

    # ---- attention -----------------------------------------------------------
    def touches_attention(self, layer: int) -> bool:
        return layer in self.attn

    def attention(self, layer, module, query, key, value, mask, scaling, softcap, base, dropout, kwargs):
        need = self.attn[layer]
        full = bool(need.full or need.edits)
        if self.keep and (need.rot or (need.rows and not full)):
            self.kept_qk[layer] = (query, key, mask, scaling, softcap)
        elif need.rot:
            for name, which, pos in need.rot:
                x = query if which == "q" else key
                self.gathered[("rot", name)][layer] = x.gather(2, pos.index(_with(x.shape, 2, pos.n), 2, x.device))
        if full:
            b, h, sq, _ = query.shape
            k_len = key.shape[2]
            probs = self._probs(query, key, self._mask3(mask, None, sq, k_len, key.shape[1], query.device),
                                scaling, softcap, None).view(b, h, sq, k_len)
            for edit in need.edits:
                probs = edit.apply(probs)
            if need.edits:  # edited layers run the attention from the edited probabilities
                if dropout and module.training:
                    probs = torch.nn.functional.dropout(probs, p=dropout)
                out, weights = self._weighted_values(probs, value), probs
            else:
                out, weights = self._original(base, module, query, key, value, mask, scaling, dropout, kwargs)
            for name, mean in need.full:  # the head mean is taken padded: one [B, S, K] kept per layer
                self.gathered[("full", name)][layer] = probs.mean(1) if mean else probs
            for i, pos in need.rows.items():
                rows = probs.gather(2, pos.index((b, h, pos.n, k_len), 2, probs.device))
                self.gathered[("rows", i)][layer] = rows.view(b * key.shape[1], -1, k_len)
            return out, weights
        out, weights = self._original(base, module, query, key, value, mask, scaling, dropout, kwargs)
        if need.rows and not self.keep:  # only the requested query rows: [B*Hkv, g*P, K], never the full matrix
            for i, pos in need.rows.items():
                m3 = self._mask3(mask, pos, query.shape[2], key.shape[2], key.shape[1], query.device)
                self.gathered[("rows", i)][layer] = self._probs(query, key, m3, scaling, softcap, pos)
        return out, weights

    @staticmethod
    def _original(base, module, query, key, value, mask, scaling, dropout, kwargs):
        if base == "sdpa":
            return attn_impl.sdpa_attention_forward(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)
        return attn_impl._family_eager(module)(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)

    def _buffer(self, name: str, shape: tuple, dtype, device) -> torch.Tensor:
        key = ("buffer", name, shape, dtype, _dev(device))
        buf = self._memo.get(key)
        if buf is None:
            buf = self._memo[key] = torch.empty(shape, dtype=dtype, device=device)
        return buf

    def _view(self, buf: torch.Tensor, name: str, make) -> torch.Tensor:
        """A view of a per-pass buffer, made once."""
        key = (name, id(buf))
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def _probs(self, query, key, m3, scaling, softcap, pos: _Pos | None) -> torch.Tensor:
        """Post-softmax probabilities [B*Hkv, g*P, K] in float32 of the query rows at ``pos`` (None: all)
        against every key: one fused product (scale and mask inside it; softcap: tanh between the
        scaled product and the mask), GQA without repeating keys (a kv group's query heads are rows)."""
        b, h, sq, d = query.shape
        hkv, k_len = key.shape[1], key.shape[2]
        p = sq if pos is None else pos.n
        dev = query.device
        if torch.is_grad_enabled():  # autograd: no buffer reused across layers
            q = query if pos is None else query.gather(2, pos.index((b, h, p, d), 2, dev))
            q3 = q.float().reshape(b * hkv, (h // hkv) * p, d)
            k3t = key.float().reshape(b * hkv, k_len, d).mT
        else:  # float32 copies into buffers made once per pass (their 3D views too)
            qb = self._buffer("q", (b, h, p, d), torch.float32, dev)
            kb = self._buffer("k", (b, hkv, k_len, d), torch.float32, dev)
            q3 = self._view(qb, "q3", lambda: qb.view(b * hkv, (h // hkv) * p, d))
            k3t = self._view(kb, "k3t", lambda: kb.view(b * hkv, k_len, d).mT)
            if pos is None:
                qb.copy_(query)
            elif query.dtype == torch.float32:
                torch.gather(query, 2, pos.index((b, h, p, d), 2, dev), out=qb)
            else:
                qb.copy_(query.gather(2, pos.index((b, h, p, d), 2, dev)))
            kb.copy_(key)
        return torch.softmax(_scores(q3, k3t, m3, scaling, softcap), dim=-1)

    def _row_mask(self, mask, pos: _Pos | None, q_len: int, k_len: int, device) -> torch.Tensor:
        """The float32 additive mask [B|1, 1, P|q, K] of ``mask``'s rows at ``pos`` (None: all rows), built
        once per pass, mask kind (layers of one kind receive the same object) and device."""
        key = ("rowmask", id(mask), None if pos is None else id(pos), q_len, k_len, _dev(device))
        if key not in self._memo:  # the entry keeps the mask alive, so its id is not reused
            rows = None if pos is None else pos.on(device)
            self._memo[key] = (mask, attn_impl.additive_mask(mask, q_len, k_len, device, rows=rows))
        return self._memo[key][1]

    def _mask3(self, mask, pos: _Pos | None, q_len: int, k_len: int, hkv: int, device) -> torch.Tensor:
        """:meth:`_row_mask` laid out as the fused product's rows: [B*Hkv, g*P, K] (once per pass and kind)."""
        key = ("mask3", id(mask), None if pos is None else id(pos), q_len, k_len, hkv, _dev(device))
        if key not in self._memo:
            m = self._row_mask(mask, pos, q_len, k_len, device)
            b, h = self.batch.size, self.arch.n_heads
            p = m.shape[2]
            m3 = m.expand(b, 1, p, k_len).unsqueeze(2).expand(b, hkv, h // hkv, p, k_len).reshape(b * hkv, -1, k_len)
            self._memo[key] = (mask, m3)
        return self._memo[key][1]

    def _weighted_values(self, probs: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """probs [B, H, Q, K] @ value [B, Hkv, K, D] -> output [B, Q, H, D] (the interface's layout);
        probabilities in the model's dtype, as eager attention multiplies them."""
        b, h, q_len, k_len = probs.shape
        hkv, d = value.shape[1], value.shape[-1]
        if torch.is_grad_enabled():
            p3 = probs.to(value.dtype).reshape(b * hkv, (h // hkv) * q_len, k_len)
            v3 = value.reshape(b * hkv, k_len, d)
        else:
            pb = self._buffer("p", (b, h, q_len, k_len), value.dtype, probs.device)
            vb = self._buffer("v", (b, hkv, k_len, d), value.dtype, value.device)
            pb.copy_(probs)
            vb.copy_(value)
            p3 = self._view(pb, "p3", lambda: pb.view(b * hkv, -1, k_len))
            v3 = self._view(vb, "v3", lambda: vb.view(b * hkv, k_len, d))
        return torch.bmm(p3, v3).view(b, h, q_len, d).transpose(1, 2).contiguous()

    # ---- after the pass ---------------------------------------------------------
    def collect(self, trace: Trace, device) -> None:
        """Every capture, stacked over its layers on ``device`` (the final hidden state's)."""
        for c, layers, source, pos in self.captures:
            if source == "site":
                x = self._site_capture(c.point, layers, pos, device)
            elif source == "rot":
                x = self._rot_capture(c, layers, pos, device)
            elif source == "rows":
                x = self._unpad_keys(self._rows_capture(layers, pos, device))
            else:  # attn_full / attn_mean: both axes un-padded once, on the stack
                x = torch.stack([self.gathered[("full", c.key)][l].to(device) for l in layers], dim=1)
                x = self._unpad_keys(self._unpad_keys(x.transpose(-1, -2)).transpose(-1, -2))
            trace.captures[c.key] = _handed_out(x)

    def _site_capture(self, point: str, layers: list[int], pos: _Pos | None, device) -> torch.Tensor:
        view = self.sites[(point, layers[0])].view
        if self.keep or pos is None:  # references: one stack of what the hooks saw, one gather
            key = ("stacked", point, tuple(layers), _dev(device))
            if key not in self._memo:
                self._memo[key] = view(torch.stack([self.kept[point][l].to(device) for l in layers], dim=1))
            x = self._memo[key]
            return x if pos is None else x.gather(2, pos.index(_with(x.shape, 2, pos.n), 2, device))
        rows = self.gathered[("site", point, id(pos))]
        return view(torch.stack([rows[l].to(device) for l in layers], dim=1))

    def _rot_capture(self, c: Capture, layers: list[int], pos: _Pos, device) -> torch.Tensor:
        if self.keep:
            which = 0 if c.point == "q_rot" else 1
            x = torch.stack([self.kept_qk[l][which].to(device) for l in layers], dim=1)  # [B, L, H, S, D]
            x = x.gather(3, pos.index(_with(x.shape, 3, pos.n), 3, device))
        else:
            x = torch.stack([self.gathered[("rot", c.key)][l].to(device) for l in layers], dim=1)
        return x.transpose(2, 3)  # [B, L, P, H, D]

    def _rows_capture(self, layers: list[int], pos: _Pos, device) -> torch.Tensor:
        """Attention rows [B, L, H, P, K], padded keys: from the layers' own products or, after a small
        pass, one product for every kept layer."""
        b, h = self.batch.size, self.arch.n_heads
        done = self.gathered.get(("rows", id(pos)), {})
        later = [l for l in layers if l not in done]
        rows: dict[int, torch.Tensor] = {}
        batched = None
        if later:
            batched = self._rows_after(later, pos, device)  # [B, L', H, P, K]
            if len(later) == len(layers):
                return batched
            rows.update(zip(later, batched.unbind(1)))
        if not later:
            x = torch.stack([done[l].to(device) for l in layers], dim=0)  # [L, B*Hkv, g*P, K]
            return x.view(len(layers), b, h, pos.n, -1).transpose(0, 1)
        for l in layers:
            if l in done:
                rows[l] = done[l].to(device).view(b, h, pos.n, -1)
        return torch.stack([rows[l] for l in layers], dim=1)

    def _rows_after(self, layers: list[int], pos: _Pos, device) -> torch.Tensor:
        """The rows of every kept layer at once: [B, L, H, P, K] (layers grouped by scaling and softcap)."""
        groups: dict[tuple, list[int]] = defaultdict(list)
        for l in layers:
            q, k, mask, scaling, softcap = self.kept_qk[l]
            groups[(scaling, softcap)].append(l)
        parts: dict[int, torch.Tensor] = {}
        out = None
        for (scaling, softcap), ls in groups.items():
            qs = torch.stack([self.kept_qk[l][0].to(device) for l in ls], dim=1)  # [B, L, H, Sq, D]
            ks = torch.stack([self.kept_qk[l][1].to(device) for l in ls], dim=1)  # [B, L, Hkv, K, D]
            b, n, h, sq, d = qs.shape
            hkv, k_len = ks.shape[2], ks.shape[3]
            q3 = qs.gather(3, pos.index((b, n, h, pos.n, d), 3, device)).float().view(b * n * hkv, -1, d)
            k3t = ks.float().view(b * n * hkv, k_len, d).mT
            masks = [self._row_mask(self.kept_qk[l][2], pos, sq, k_len, device) for l in ls]  # [B|1, 1, P, K]
            if all(m is masks[0] for m in masks):
                m = masks[0].expand(b, 1, pos.n, k_len).unsqueeze(1).expand(b, n, 1, pos.n, k_len)
            else:  # kinds of layers (sliding, full) alternate: each kind's mask expanded once
                wide = {id(x): x for x in masks}
                wide = {i: x.expand(b, 1, pos.n, k_len) for i, x in wide.items()}
                m = torch.stack([wide[id(x)] for x in masks], dim=1)
            m3 = m.unsqueeze(2).expand(b, n, hkv, h // hkv, pos.n, k_len).reshape(b * n * hkv, -1, k_len)
            probs = torch.softmax(_scores(q3, k3t, m3, scaling, softcap), dim=-1).view(b, n, h, pos.n, k_len)
            if len(groups) == 1:
                out = probs
            else:
                parts.update(zip(ls, probs.unbind(1)))
        return out if out is not None else torch.stack([parts[l] for l in layers], dim=1)

    def _unpad_keys(self, x: torch.Tensor) -> torch.Tensor:
        """Re-index the last (key) axis of x [B, ..., K] to example coordinates, zero-filling the tail
        (identity when no example is padded)."""
        if not self.batch.padded_anywhere:
            return x
        b, k_len = x.shape[0], x.shape[-1]
        idx, valid = self._memo[("unpad", k_len)]
        shape = [b] + [1] * (x.dim() - 2) + [k_len]
        return x.gather(-1, idx.on(x.device).view(shape).expand_as(x)) * valid.on(x.device).view(shape)

    def plan_unpad(self, k_len: int) -> None:
        """Stage the key un-padding index of length ``k_len`` (host, uploaded with the rest)."""
        if ("unpad", k_len) not in self._memo and self.batch.padded_anywhere:
            idx, valid = self.batch.key_unpad_index(k_len)
            self._memo[("unpad", k_len)] = (self.host(idx), self.host(valid.float()))


def _scores(q3, k3t, m3, scaling, softcap):
    """scaling * q.k + mask in one product; with softcap, tanh(scaling / softcap * q.k) * softcap + mask."""
    if softcap is None:
        return torch.baddbmm(m3, q3, k3t, alpha=scaling)
    s = torch.baddbmm(m3, q3, k3t, beta=0.0, alpha=scaling / softcap).tanh_()
    return torch.add(m3, s, alpha=softcap)


class Engine:
    """Reads and edits a loaded model's internals during ordinary forward passes."""

    keep_bytes: int | None = None
    """What a pass may keep by reference (:data:`KEEP_BYTES`); None: chosen by the pass's device
    (:func:`keep_bytes_for`)."""

    def __init__(self, loaded: LoadedModel):
        self.loaded = loaded
        self.model, self.tokenizer, self.arch = loaded.model, loaded.tokenizer, loaded.arch
        attn_impl.register()
        base = self.model.config._attn_implementation
        if base not in attn_impl.IMPLEMENTATIONS and base not in attn_impl.IMPLEMENTATIONS.values():
            raise WhiteboxError(f"the engine needs the model loaded with attn_implementation 'sdpa' or 'eager', not {base!r}")
        self.base_attention = base if base in attn_impl.IMPLEMENTATIONS else base.removeprefix("whitebox_")
        self._set_attn_implementation(attn_impl.IMPLEMENTATIONS[self.base_attention])
        for layer in range(self.arch.n_layers):
            module = self.arch.attention(layer)
            if getattr(module, "layer_idx", None) != layer:
                module.layer_idx = layer
            module._whitebox_plan = None
        self._sae_cache: dict[tuple, dict] = {}  # SAE weights sliced for feature edits (_sae_slices)
        self.standing: tuple = ()  # edits every pass runs under (:meth:`under`)

    def under(self, edits: Iterable[Edit]) -> "Engine":
        """This engine with ``edits`` added to every pass (a study's ``--edit``): a shallow copy sharing
        the model; ``self`` when there are none. Its passes take no cached prefix (the prefix would
        stay unedited): a study under edits computes whole prompts."""
        edits = tuple(edits)
        if not edits:
            return self
        other = copy.copy(self)
        other.standing = (*self.standing, *edits)
        return other

    @property
    def output_device(self) -> torch.device:
        """Where the final hidden state (hence captures and logits) comes out: the final norm's
        execution device (under a device map, accelerate's hook says which). Suites upload the
        tensors they combine with captures here, before the forward."""
        if "_output_device" not in self.__dict__:
            norm = self.arch.final_norm
            dev = getattr(getattr(norm, "_hf_hook", None), "execution_device", None)
            if dev is None:
                p = next(norm.parameters(), None)
                dev = p.device if p is not None and p.device.type != "meta" else self.loaded.device
            elif isinstance(dev, int):
                dev = torch.device("cuda", dev)
            self._output_device = torch.device(dev)
        return self._output_device

    def _set_attn_implementation(self, name: str) -> None:
        for cfg in {id(c): c for c in [self.model.config, *(m.config for m in self.model.modules() if hasattr(m, "config"))]}.values():
            cfg._attn_implementation = name

    # ---- inputs --------------------------------------------------------------
    def batch(self, texts: Sequence[str] | Sequence[Sequence[int]], *, add_special_tokens: bool = True) -> Batch:
        """Tokenize and left-pad on the model's device."""
        return make_batch(self.tokenizer, texts, add_special_tokens=add_special_tokens).to(self.loaded.device)

    def prefix_fits(self, prefix_len: int, suffix_len: int) -> bool:
        """Whether a cached prefix is exact here: prefix + suffix must fit any sliding window."""
        window = getattr(self.model.config, "sliding_window", None)
        return not window or prefix_len + suffix_len <= window

    def prefix(self, ids: Sequence[int]) -> Prefix:
        """Compute and keep the key/value cache of ``ids`` (plain forward, no captures)."""
        if len(ids) == 0:
            raise WhiteboxError("an empty prefix cannot be cached")
        from transformers import DynamicCache

        x = torch.tensor([list(ids)], device=self.loaded.device)
        cache = DynamicCache()  # plain layers keep every token; sliding windows are enforced by the mask
        with torch.no_grad():
            self.model.base_model(input_ids=x, past_key_values=cache, use_cache=True)
        keys = [cache.layers[l].keys for l in range(self.arch.n_layers)]
        values = [cache.layers[l].values for l in range(self.arch.n_layers)]
        if any(k.shape[2] != len(ids) for k in keys):
            raise WhiteboxError("this model's cache keeps fewer tokens than the prefix (sliding window); run without prefix caching")
        return Prefix(list(ids), keys, values)

    # ---- the pass -------------------------------------------------------------
    def run(
        self,
        batch: Batch,
        captures: Iterable[Capture] = (),
        edits: Iterable[Edit] = (),
        *,
        logits: Positions | bool = "last",
        grad: bool = False,
        inputs_embeds: torch.Tensor | None = None,
        prefix: Prefix | None = None,
        cache=None,
        stop_after: int | None = None,
    ) -> Trace:
        """One forward pass with ``captures`` and ``edits``.

        ``logits``: ``"last"`` (default: [B, vocab]), positions ([B, P, vocab]),
        ``"all"`` ([B, S, vocab] in padded coordinates) or ``False`` (none).
        ``inputs_embeds`` [B, S, d_model] replaces the token embeddings (the output of
        the embedding module, scaling included) for this pass.
        ``prefix``: a cached shared prefix; ``batch`` then holds the suffixes and
        positions still count from the prefix's first token. Edits act on the tokens
        this pass computes: the prefix stays as it was cached.
        ``cache``: a key/value cache (:meth:`new_cache`) holding the first columns of this
        same left-padded ``batch`` from earlier passes (generation: :mod:`.generation`).
        The pass computes only the remaining columns and appends their keys/values to
        the cache. Positions still address the whole batch; captures and logits must lie
        in the computed columns (``"all"`` means all of those; ``inputs_embeds`` covers
        them only); edits act on the computed rows, the cached ones stay as they were.
        ``stop_after``: run the blocks up to this one only (the ones above are never run:
        SAE training reads the residual leaving it); captures and edits must lie at or
        below it, and there are no logits (pass ``logits=False``).
        """
        captures, edits = list(captures), [*self.standing, *edits]
        if self.standing and prefix is not None:
            raise WhiteboxError("a study under --edit computes whole prompts: its passes take no cached prefix "
                                "(the prefix would stay unedited)")
        past = 0
        if cache is not None:
            if prefix is not None:
                raise WhiteboxError("a shared prefix and a generation cache cannot be combined in one pass")
            past = int(cache.get_seq_length())
            if past >= batch.seq_len:
                raise WhiteboxError(f"the cache already holds {past} columns of a {batch.seq_len}-column batch: append the new tokens to the batch")
            if past and cache.layers[0].keys.shape[0] != batch.size:
                raise WhiteboxError(f"the cache holds {cache.layers[0].keys.shape[0]} examples but the batch has {batch.size}")
            if past and any(c.point in ("attn_full", "attn_mean") for c in captures):
                raise WhiteboxError("attn_full/attn_mean captures need every query row; they are not available after a cached pass")
        if batch.visible is not None and past:
            raise WhiteboxError("a packed batch (several sequences per row) cannot continue a generation cache")
        if prefix is not None:
            batch = batch.with_prefix(prefix.length)
            # a packed batch's mask counts sliding windows on position ids: a prefix is exact at any length
            if batch.visible is None and not self.prefix_fits(prefix.length, batch.seq_len):
                window = self.model.config.sliding_window
                raise WhiteboxError(
                    f"prefix ({prefix.length}) + suffix ({batch.seq_len}) tokens exceed the sliding window ({window}); "
                    "the cached prefix would be read through the wrong mask: run without prefix caching"
                )
            if any(c.point in ("attn_full", "attn_mean") for c in captures) or any(isinstance(e, EditAttention) for e in edits):
                raise WhiteboxError("attn_full/attn_mean captures and attention edits are not available with a cached prefix; run without it")
        if stop_after is not None:
            stop_after = self.arch.check_layer(int(stop_after))
            if logits is not False and logits is not None:
                raise WhiteboxError("a pass that stops after a block has no logits: pass logits=False")
        plan = _Plan(self, batch, past, prefix.length if prefix is not None else past)
        trace = Trace(logits=None, grads=plan.grads)
        for c in captures:
            self._plan_capture(plan, c, trace, stop_after)
        for e in edits:
            self._plan_edit(plan, e, stop_after)
        logit_pos = None
        last_only = isinstance(logits, str) and logits == "last"
        if logits is not False and logits is not None and not last_only and not (isinstance(logits, str) and logits == "all"):
            logit_pos = plan.pos(plan.computed(batch.host_padded(batch.positions(logits)), "logits"))
        device = batch.input_ids.device
        plan.decide(keep_bytes_for(device) if self.keep_bytes is None else self.keep_bytes, self.model.dtype.itemsize)
        plan.upload(device)
        mask, position_ids, input_ids = batch.attention_mask, batch.position_ids[:, past:], batch.input_ids[:, past:]
        if prefix is not None:
            mask = torch.cat([torch.ones(batch.size, prefix.length, dtype=mask.dtype, device=mask.device), mask], dim=1)
            position_ids = position_ids + prefix.length
            cache = prefix.cache_for(batch.size)
        if batch.visible is not None:
            mask = self._packed_mask(batch, position_ids, prefix.length if prefix is not None else 0)
        with self._installed(plan, stop_after), torch.set_grad_enabled(grad):
            try:
                out = self.model.base_model(
                    input_ids=None if inputs_embeds is not None else input_ids,
                    inputs_embeds=inputs_embeds,
                    attention_mask=mask,
                    position_ids=position_ids,
                    past_key_values=cache,
                    use_cache=cache is not None,
                )
                hidden = out.last_hidden_state
            except _Stop as stop:
                hidden = stop.hidden
            if isinstance(logits, str) and logits == "all":
                trace.logits = self.unembed(hidden)
            elif last_only and stop_after is None:
                # left padding: every example ends in the last column. The same slice and the
                # same product as the model's own forward with logits_to_keep=1 (bit-identical)
                trace.logits = self.unembed(hidden[:, -1:, :])[:, 0]
            elif logit_pos is not None:
                trace.logits = self.unembed(hidden.gather(1, logit_pos.index(_with(hidden.shape, 1, logit_pos.n), 1, hidden.device)))
            if trace.logits is not None:
                trace.logits = _full_precision(trace.logits)
            for entry in plan.captures:
                missing = [l for l in entry[1] if not self._produced(plan, entry, l)]
                if missing:
                    raise RuntimeError(f"capture {entry[0].key} produced nothing for layers {missing}: the family description does not match the model")
            # layers split over devices (device_map) hand their pieces over on the output's device
            plan.collect(trace, hidden.device)
        return trace

    @staticmethod
    def _produced(plan: _Plan, entry: tuple, layer: int) -> bool:
        c, _, source, pos = entry
        if source == "site":
            return layer in plan.kept.get(c.point, {}) or layer in plan.gathered.get(("site", c.point, id(pos)), {})
        if source == "rot":
            return layer in plan.kept_qk or layer in plan.gathered.get(("rot", c.key), {})
        if source == "rows":
            return layer in plan.kept_qk or layer in plan.gathered.get(("rows", id(pos)), {})
        return layer in plan.gathered.get(("full", c.key), {})

    def _packed_mask(self, batch: Batch, position_ids: torch.Tensor, prefix_len: int):
        """The explicit mask of a packed batch: every real token sees a cached prefix, then the
        batch's own pattern (:mod:`.packing`); sliding windows on position ids."""
        real = batch.attention_mask.bool()
        b, s = real.shape
        allowed = torch.cat([real[:, :, None].expand(b, s, prefix_len), batch.visible.to(real.device)], dim=2)
        key_pos = torch.cat([torch.arange(prefix_len, device=real.device).expand(b, -1), position_ids], dim=1)
        return attn_impl.explicit_mask(self.model.config, self.base_attention, allowed, position_ids, key_pos,
                                       self.model.dtype)

    def unembed(self, hidden: torch.Tensor) -> torch.Tensor:
        """Unembedding (+ final logit soft-capping where the family has it) of final-normed states."""
        logits = self.arch.unembed(hidden)
        cap = self.arch.final_logit_softcap
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def new_cache(self):
        """An empty key/value cache for :meth:`run` (``cache=``) that keeps every token.

        Sliding windows are enforced by the attention mask, as in an uncached pass, so a
        cached pass gives the same result as the uncached one at any length.
        """
        from transformers import DynamicCache

        return DynamicCache()

    # ---- planning ---------------------------------------------------------------
    def _layers(self, layers: Sequence[int] | None) -> list[int]:
        if layers is None:
            return list(range(self.arch.n_layers))
        return [self.arch.check_layer(int(l)) for l in layers]

    def _plan_capture(self, plan: _Plan, c: Capture, trace: Trace, stop_after: int | None = None) -> None:
        c = capture_alias(c, self.arch)  # SAELens / TransformerLens hook names (internals/hook_points.py)
        if c.point not in CAPTURE_POINTS:
            raise WhiteboxError(f"unknown capture point {c.point!r}; choose one of {', '.join(CAPTURE_POINTS)}")
        if c.key in trace.layers:
            raise WhiteboxError(f"two captures are named {c.key!r}; give one a distinct name=")
        layers = self._layers(c.layers if c.layers is not None or stop_after is None else range(stop_after + 1))
        if stop_after is not None and max(layers) > stop_after:
            raise WhiteboxError(f"capture {c.key!r} asks for layer {max(layers)} but the pass stops after block {stop_after}")
        trace.layers[c.key] = layers
        batch = plan.batch
        if c.point in ("attn_full", "attn_mean"):
            for l in layers:
                plan.attn[l].full.append((c.key, c.point == "attn_mean"))
            plan.captures.append((c, layers, "full", None))
            plan.plan_unpad(batch.seq_len)
            return
        if c.keep_grad and c.point in ("attn", "q_rot", "k_rot"):
            raise WhiteboxError(f"keep_grad is not available for {c.point!r}; use q/k/v, head_out, mlp_act or resid points")
        every = isinstance(c.positions, str) and c.positions == "all"
        if every:  # every computed column
            ppos = torch.arange(plan.past, batch.seq_len).expand(batch.size, -1)
            trace.positions[c.key] = ppos - batch.host_offsets.unsqueeze(1)
        else:
            last = c.positions is None or (isinstance(c.positions, str) and c.positions == "last")
            example = batch.positions(c.positions)  # (memoised for "last")
            ppos = batch.host_padded_positions("last") if last else batch.host_padded(example)
            trace.positions[c.key] = example - batch.prefix_len if batch.prefix_len else example
        ppos = plan.computed(ppos, f"capture {c.key!r}")
        rot = c.point in ("q_rot", "k_rot") and self.arch.family.positional == "rope"
        point = c.point[0] if c.point in ("q_rot", "k_rot") and not rot else c.point  # no rotary: post-RoPE == pre-RoPE
        if c.point == "attn":
            pos = plan.pos(ppos)
            for l in layers:
                plan.attn[l].rows[id(pos)] = pos
            plan.captures.append((c, layers, "rows", pos))
            plan.plan_unpad(plan.key_shift + plan.computed_len)
        elif rot:
            pos = plan.pos(ppos + (plan.key_shift if c.point == "k_rot" else 0))  # keys also hold a cache or prefix
            for l in layers:
                plan.attn[l].rot.append((c.key, c.point[0], pos))
            plan.captures.append((c, layers, "rot", pos))
        else:
            pos = None if every else plan.pos(ppos)
            for l in layers:
                site = self._site(plan, point, l)
                site.reads[id(pos)] = pos
                if c.keep_grad:
                    site.grad_reads.append((c.key, pos))
            plan.captures.append((Capture(point, c.positions, c.layers, c.key, c.keep_grad), layers, "site", pos))

    def _plan_edit(self, plan: _Plan, e: Edit, stop_after: int | None = None) -> None:
        arch = self.arch
        layer = arch.check_layer(e.layer)
        if stop_after is not None and layer > stop_after:
            raise WhiteboxError(f"an edit of layer {layer} has no effect in a pass that stops after block {stop_after}")
        if isinstance(e, ScaleHeads):
            chosen = tuple(arch.check_head(h) for h in e.heads)

            def make_factor():
                heads = torch.zeros(arch.n_heads, dtype=torch.bool)
                heads[list(chosen)] = True
                rows = self._rows(plan, e.positions)  # [B, S - past] bool, host
                # every head times 1, the chosen ones at the chosen rows times scale (float32: x * scale in
                # the model's dtype rounds as the scaled copy did; x * 1 is x)
                return plan.host(torch.where(rows[:, :, None, None] & heads[None, None, :, None], float(e.scale), 1.0))

            factor = plan.memo(("scale", _positions_key(e.positions), chosen, float(e.scale)), make_factor)
            self._site(plan, "head_out", layer).writes.append(lambda v, f=factor: v.mul_(f.on(v.device)))
        elif isinstance(e, MaskNeurons):
            neurons = torch.as_tensor(list(e.neurons), dtype=torch.long)
            if len(neurons) and (neurons.min() < 0 or neurons.max() >= arch.d_ff):
                raise WhiteboxError(f"neuron index out of range: layer {layer} has {arch.d_ff} MLP neurons (0..{arch.d_ff - 1})")
            if e.positions is None:
                idx = plan.memo(("neurons", tuple(neurons.tolist())), lambda: plan.host(neurons))
                self._site(plan, "mlp_act", layer).writes.append(lambda v, i=idx, x=e.value: v.index_fill_(-1, i.on(v.device), x))
            else:
                def make_index():
                    b, s = self._rows(plan, e.positions).nonzero(as_tuple=True)
                    n = len(neurons)
                    return plan.host(torch.stack([b[:, None].expand(-1, n), s[:, None].expand(-1, n),
                                                  neurons[None, :].expand(len(b), -1)]))

                at = plan.memo(("neuron_rows", _positions_key(e.positions), tuple(neurons.tolist())), make_index)
                fill = plan.memo(("fill", float(e.value)), lambda: self._scalar(plan, e.value))
                self._site(plan, "mlp_act", layer).writes.append(
                    lambda v, at=at, fill=fill: v.index_put_(at.unbound(v.device), fill(v)))
        elif isinstance(e, EditAttention):
            for h in e.heads:
                arch.check_head(h)
            if e.mode not in ATTENTION_MODES:
                raise WhiteboxError(f"unknown attention edit mode {e.mode!r}: use add, add_above, force or copy_head")
            if e.mode == "copy_head":
                if e.source_head is None:
                    raise WhiteboxError("copy_head needs source_head=")
                arch.check_head(e.source_head)
            plan.attn[layer].edits.append(self._attention_edit(plan, e))
        elif isinstance(e, Patch):
            e = patch_alias(e, self.arch)
            if e.point not in PATCH_POINTS:
                raise WhiteboxError(f"cannot patch {e.point!r}; patchable points: {', '.join(PATCH_POINTS)}")
            b, p, at, shape = self._patch_rows(plan, e.positions)
            heads = None if e.heads is None else torch.as_tensor([arch.check_head(h) for h in e.heads], dtype=torch.long)
            values = e.values
            on_values = (lambda t: t) if values.device.type == "cpu" else (lambda t: t.to(values.device))
            picked = values[on_values(b), on_values(p)]  # [N, ...]: the values of the rows this pass computes
            if heads is not None:
                picked = picked[:, heads.to(picked.device)]
                at = plan.memo(("patch_heads", id(at), tuple(heads.tolist())),
                               lambda: plan.host(torch.stack([at.host[0][:, None].expand(-1, len(heads)),
                                                              at.host[1][:, None].expand(-1, len(heads)),
                                                              heads[None, :].expand(len(b), -1)])))
            memo: dict = {}

            def patch(v, at=at, picked=picked, shape=shape, memo=memo):
                want = (*shape, *v.shape[2:])
                if tuple(values.shape) != want:
                    raise WhiteboxError(f"patch values for {e.point} must have shape {want}, got {tuple(values.shape)}")
                key = (_dev(v.device), v.dtype)
                if key not in memo:
                    memo[key] = picked.to(v.device, v.dtype)
                v.index_put_(at.unbound(v.device), memo[key])

            self._site(plan, e.point, layer).writes.append(patch)
        elif isinstance(e, Replace):
            if e.point not in PATCH_POINTS:
                raise WhiteboxError(f"cannot replace {e.point!r}; replaceable points: {', '.join(PATCH_POINTS)}")
            self._site(plan, e.point, layer).writes.append(self._replacement(plan, e))
        elif isinstance(e, AddVector):
            e = patch_alias(e, self.arch)
            self._site(plan, e.point, layer).writes.append(self._steering(plan, e))
        elif isinstance(e, ClampFeature):
            e = patch_alias(e, self.arch)
            self._site(plan, e.point, layer).writes.append(self._feature_clamp(plan, e, layer))
        else:
            raise WhiteboxError(f"unknown edit {e!r}")

    @staticmethod
    def _patch_rows(plan: _Plan, positions: Positions):
        """(example index, position index, (example, computed row) on the host, positions' shape) of the
        rows a patch at ``positions`` writes (rows in a cache are not patched again): once per pass and
        positions, however many layers are patched there."""
        def make():
            ppos = plan.computed_or_cut(plan.batch.host_padded_positions(positions))
            b, p = (ppos >= 0).nonzero(as_tuple=True)
            return b, p, plan.host(torch.stack([b, ppos[b, p]])), tuple(ppos.shape)
        return plan.memo(("patch_rows", _positions_key(positions)), make)

    @staticmethod
    def _scalar(plan: _Plan, value: float):
        """``value`` as a 0-dim tensor of a layer's dtype and device (made once per pass)."""
        memo: dict = {}

        def fill(v: torch.Tensor) -> torch.Tensor:
            key = (_dev(v.device), v.dtype)
            if key not in memo:
                memo[key] = torch.full((), value, dtype=v.dtype, device=v.device)
            return memo[key]

        return fill

    def _replacement(self, plan: _Plan, e: Replace):
        """The write of a :class:`Replace`: the computed tokens left-aligned, ``fn``, and back (the
        indices built once per pass, whatever the number of replaced layers)."""
        def make():
            batch = plan.batch
            pads = (batch.host_offsets - plan.past).clamp(min=0)  # pad columns among the computed ones
            if not bool((pads > 0).any()):
                return None
            sc = plan.computed_len
            j = torch.arange(sc).unsqueeze(0)
            return (plan.host((j + pads[:, None]).clamp(max=sc - 1)), plan.host(j + pads[:, None] < sc),
                    plan.host((j - pads[:, None]).clamp(min=0)), plan.host(j >= pads[:, None]))

        where = plan.memo(("replace",), make)
        if where is None:
            def replace(v, fn=e.fn):
                v.copy_(fn(v))
            return replace

        def views(v):  # the four indices shaped for v [B, S, ...], made once per shape and device
            def make_views():
                shape = [v.shape[0], v.shape[1]] + [1] * (v.dim() - 2)
                ahead, valid, back, real = (h.on(v.device).view(shape) for h in where)
                return ahead.expand_as(v), valid, back.expand_as(v), real
            return plan.memo(("replace_views", tuple(v.shape), _dev(v.device)), make_views)

        def replace(v, fn=e.fn):
            ahead, valid, back, real = views(v)
            y = fn(v.gather(1, ahead) * valid).to(v.dtype)  # left-aligned, zero tail
            v.copy_(torch.where(real, y.gather(1, back), v))

        return replace

    def _trailing(self, point: str) -> tuple[int, ...]:
        """One token's shape at ``point``'s canonical view ([n heads, head_dim] for per-head points)."""
        arch = self.arch
        heads = {"q_proj": arch.n_heads, "q": arch.n_heads, "head_out": arch.n_heads,
                 "k_proj": arch.n_kv_heads, "k": arch.n_kv_heads, "v": arch.n_kv_heads}
        return (heads[point], arch.head_dim) if point in heads else (point_width(self.arch, point),)

    def _row_factor(self, plan: _Plan, positions: Positions, coef: float, dims: int) -> _Host:
        """[B, S - past, 1...] float32 on the host: ``coef`` at the rows an edit applies to, 0 elsewhere
        (``dims`` trailing ones); once per pass, positions and coefficient."""
        def make():
            rows = self._rows(plan, positions).to(torch.float32) * float(coef)
            return plan.host(rows.view(*rows.shape, *([1] * dims)))
        return plan.memo(("row_factor", _positions_key(positions), float(coef), dims), make)

    def _steering(self, plan: _Plan, e: AddVector):
        """The write of an :class:`AddVector`: one ``addcmul_`` (x + (coef at the rows) * vector)."""
        if e.point not in PATCH_POINTS:
            raise WhiteboxError(f"cannot add a vector at {e.point!r}; points: {', '.join(PATCH_POINTS)}")
        shape = self._trailing(e.point)
        vector = torch.as_tensor(e.vector).detach()
        if vector.numel() != math.prod(shape) or (vector.dim() != 1 and tuple(vector.shape) != shape):
            raise WhiteboxError(f"a steering vector at {e.point} of this model has {math.prod(shape)} values "
                                f"({' x '.join(map(str, shape))}); got shape {tuple(vector.shape)}")
        vec = plan.memo(("steer_vector", id(e.vector)),
                        lambda: plan.host(vector.cpu().to(torch.float32).reshape(shape)))
        factor = self._row_factor(plan, e.positions, e.coef, len(shape))
        if e.replace:  # x * (1 - rows) + (coef at the rows) * vector
            def make_keep():
                rows = self._rows(plan, e.positions)
                return plan.host(1.0 - rows.to(torch.float32).view(*rows.shape, *([1] * len(shape))))
            keep = plan.memo(("keep_rows", _positions_key(e.positions), len(shape)), make_keep)

            def put(v, f=factor, vec=vec, keep=keep):
                v.mul_(keep.on(v.device)).addcmul_(f.on(v.device), vec.on(v.device))
            return put

        def steer(v, f=factor, vec=vec):
            v.addcmul_(f.on(v.device), vec.on(v.device))
        return steer

    def _feature_clamp(self, plan: _Plan, e: ClampFeature, layer: int):
        """The write of a :class:`ClampFeature`: the chosen features encoded (ReLU / JumpReLU: only
        their encoder columns; TopK: the whole encoding, which decides who is in the top k), the
        change ``f' - f`` at the edited rows, and ``x += (f' - f) W_dec[features]``, in the SAE's
        float32. The weights are sliced once per engine, SAE, features and device."""
        if e.point not in PATCH_POINTS:
            raise WhiteboxError(f"cannot edit SAE features at {e.point!r}; points: {', '.join(PATCH_POINTS)}")
        sae = e.sae
        width = math.prod(self._trailing(e.point))
        if int(sae.w_enc.shape[0]) != width:
            raise WhiteboxError(f"the SAE reads {int(sae.w_enc.shape[0])} values per token, but {e.point} of layer "
                                f"{layer} is {width} wide: an SAE of another model or hook")
        d_sae = int(sae.w_enc.shape[1])
        feats = tuple(int(f) for f in e.features)
        if not feats or min(feats) < 0 or max(feats) >= d_sae:
            raise WhiteboxError(f"SAE feature out of range: this SAE has {d_sae} features (0..{d_sae - 1}); got {list(feats)}")
        if (e.value is None) == (e.scale is None):
            raise WhiteboxError("an SAE feature edit takes exactly one of value= (clamp) or scale=")
        device = next(self.arch.blocks[layer].parameters()).device
        w = self._sae_slices(sae, feats, device)
        value, scale = e.value, e.scale
        # the change f' - f is value - f (clamp) or (scale - 1) f; rows outside the edit add nothing
        base = plan.memo(("scalar_host", float(value if value is not None else 0.0)),
                         lambda: plan.host(torch.tensor(float(value if value is not None else 0.0))))
        times = -1.0 if value is not None else float(scale) - 1.0
        rows = None if e.positions is None else plan.memo(
            ("clamp_rows", _positions_key(e.positions)),
            lambda: plan.host(self._rows(plan, e.positions).to(torch.float32).reshape(-1, 1)))

        def clamp(v, w=w, rows=rows):
            x = v.reshape(-1, width)  # a view of the clone the hook writes to
            xf = x if x.dtype == torch.float32 else x.float()
            if w["k"] is not None:  # TopK: in the top k when at least the k-th largest pre-activation
                full = torch.addmm(w["b_all"], xf, w["W_all"])  # with k zero columns: the k-th is max(k-th, 0)
                kth = full.kthvalue(w["d_sae"] + 1, dim=-1, keepdim=True).values
                pre = full.index_select(-1, w["index"])
                change = torch.addcmul(base.on(v.device), pre, pre >= kth, value=times)  # f = pre * [pre >= kth]
            else:
                pre = torch.addmm(w["b"], xf, w["W"])
                if w["threshold"] is not None:  # JumpReLU: relu(pre) * [pre > t] = pre * [pre > max(t, 0)]
                    change = torch.addcmul(base.on(v.device), pre, pre > w["threshold"], value=times)
                else:
                    f = torch.relu(pre)
                    change = (value - f) if value is not None else f * times
            delta = change.mm(w["W_dec"])
            if x.data_ptr() != v.data_ptr() or not (x.is_contiguous() and v.is_contiguous()):
                x, delta = v, delta.view(v.shape)
            if rows is None:
                x.add_(delta)
            else:
                x.addcmul_(delta, rows.on(v.device) if x is not v else rows.on(v.device).view(*v.shape[:2], *([1] * (v.dim() - 2))))
        return clamp

    def _sae_slices(self, sae, feats: tuple[int, ...], device) -> dict:
        """The SAE's weights for these features on ``device`` in float32 (kept on the engine: a study's
        passes slice them once)."""
        key = (id(sae), feats, _dev(device))
        got = self._sae_cache.get(key)
        if got is not None and got["of"] is sae:
            return got
        with torch.no_grad():
            s = float(sae.norm_scaling_factor) if getattr(sae, "norm_scaling_factor", None) is not None else 1.0
            activation = getattr(sae, "activation", "relu")

            def folded(w_enc, b_enc):  # (s x - b_dec) W + b_enc = x (s W) + (b_enc - b_dec W)
                w_enc, b = w_enc.float(), b_enc.float()
                if getattr(sae, "apply_b_dec_to_input", True):
                    b = b - sae.b_dec.float() @ w_enc
                return (w_enc * s).to(device), b.to(device)

            idx = torch.as_tensor(feats, dtype=torch.long, device=sae.w_enc.device)
            W, b = folded(sae.w_enc.index_select(1, idx), sae.b_enc.index_select(0, idx))
            threshold = getattr(sae, "threshold", None)
            got = {"of": sae, "W": W, "b": b, "index": idx.to(device), "k": None, "d_sae": int(sae.w_enc.shape[1]),
                   "threshold": None if threshold is None or activation != "jumprelu"
                   else threshold.float().index_select(0, idx).clamp(min=0).to(device),
                   "W_dec": (sae.w_dec.float().index_select(0, idx) / s).to(device)}
            if activation == "topk":
                got["k"] = int(sae.k)
                zeros = sae.w_enc.new_zeros(sae.w_enc.shape[0], int(sae.k))
                got["W_all"], got["b_all"] = folded(torch.cat([sae.w_enc, zeros], 1), torch.cat([sae.b_enc, zeros[0]]))
        self._sae_cache[key] = got
        return got

    def _attention_edit(self, plan: _Plan, e: EditAttention) -> _AttnEdit:
        chosen = sorted({int(h) for h in e.heads})

        def make_cells():
            cells = self._padded_cells(plan, e.cells)  # [B, S - past, S] bool
            target = None
            if e.mode == "force":
                t = cells.float() if e.pattern is None else self._padded_rows(plan, e.pattern.detach().cpu().float()) * cells
                t = t / t.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
                target = plan.host(t[:, None])  # [B, 1, S, K]: every edited head takes it
            return _Cells(plan.host(cells[:, None]), target)

        pattern = None if e.mode != "force" or e.pattern is None else id(e.pattern)
        rule = e.cells if isinstance(e.cells, CellRule) else id(e.cells)  # equal rules: one set of cells a pass
        cells = plan.memo(("cells", rule, pattern, e.mode == "force"), make_cells)

        def make_heads():
            heads = torch.zeros(1, self.arch.n_heads, 1, 1, dtype=torch.bool)
            heads[0, chosen] = True
            return plan.host(heads)

        heads = plan.memo(("heads", tuple(chosen)), make_heads)
        source = None
        if e.mode == "copy_head":
            def make_source():
                src = torch.arange(self.arch.n_heads)
                src[chosen] = e.source_head
                return plan.host(src)
            source = plan.memo(("source", tuple(chosen), e.source_head), make_source)
        return _AttnEdit(e, cells, heads, source)

    def _padded_cells(self, plan: _Plan, cells: torch.Tensor | CellRule) -> torch.Tensor:
        b, s = plan.batch.size, plan.batch.seq_len
        if isinstance(cells, CellRule):
            cells = cells.cells(plan.batch.host_lengths.tolist())
        if cells.dim() != 3 or cells.shape[0] != b or cells.shape[1] > s or cells.shape[2] > s:
            raise WhiteboxError(f"attention edit cells must be a bool tensor [batch={b}, <= {s}, <= {s}] in unpadded coordinates; got {tuple(cells.shape)}")
        return self._padded_rows(plan, cells.detach().cpu().to(torch.bool))

    @staticmethod
    def _padded_rows(plan: _Plan, x: torch.Tensor) -> torch.Tensor:
        """Unpadded [B, Sq, Sk] cells or weights (host) -> the rows this pass computes, padded: [B, S - past, S].

        ``x`` may be smaller than the sequence (missing rows and columns are zero). Two gathers
        over a zero-padded copy, whatever the batch size."""
        batch = plan.batch
        b, s, past = batch.size, batch.seq_len, plan.past
        xp = torch.zeros(b, s + 1, s + 1, dtype=x.dtype)
        xp[:, :min(s, x.shape[1]), :min(s, x.shape[2])] = x[:, :s, :s]
        off = batch.host_offsets.unsqueeze(1)
        rows = torch.arange(past, s).unsqueeze(0) - off  # unpadded row of each computed padded row
        cols = torch.arange(s).unsqueeze(0) - off
        rows = torch.where(rows >= 0, rows, s)  # pads read the zero row / column
        cols = torch.where(cols >= 0, cols, s)
        out = xp.gather(1, rows[:, :, None].expand(b, s - past, s + 1))
        return out.gather(2, cols[:, None, :].expand(b, s - past, s))

    @staticmethod
    def _rows(plan: _Plan, positions: Positions) -> torch.Tensor:
        """[B, S - past] bool on the host: which computed rows an edit applies to (None = all); once per
        pass and positions."""
        def make():
            batch = plan.batch
            b, s = batch.size, batch.seq_len
            if positions is None:
                return torch.ones(b, s - plan.past, dtype=torch.bool)
            mask = torch.zeros(b, s, dtype=torch.bool)
            mask.scatter_(1, batch.host_padded_positions(positions), True)
            return mask[:, plan.past:]
        return plan.memo(("rows", _positions_key(positions)), make)

    def _site(self, plan: _Plan, point: str, layer: int) -> _Site:
        """The hook site that exposes ``point`` of ``layer`` as a canonical view."""
        key = (point, layer)
        if key not in plan.sites:
            if point not in SITES:  # pragma: no cover - guarded by CAPTURE_POINTS / PATCH_POINTS
                raise WhiteboxError(f"no hook site for {point}")
            plan.sites[key] = _Site(SITES[point](self.arch, layer), point, layer)
        return plan.sites[key]

    @contextmanager
    def _installed(self, plan: _Plan, stop_after: int | None = None):
        handles = []
        trace_grads = plan.grads

        def process(site: _Site, t: torch.Tensor) -> torch.Tensor | None:
            if site.writes:
                t = t.clone()
                v = site.view(t)
                for w in site.writes:
                    w(v)
            for pos in site.reads.values():
                if plan.keep or pos is None:  # a reference: gathered after the pass, every layer at once
                    plan.kept[site.point][site.layer] = t
                else:
                    shape = _with(t.shape, site.seq_dim, pos.n)
                    plan.gathered[("site", site.point, id(pos))][site.layer] = t.gather(
                        site.seq_dim, pos.index(shape, site.seq_dim, t.device))
            if site.grad_reads and t.requires_grad:
                def keep(g, site=site):
                    gv = site.view(g)
                    for name, pos in site.grad_reads:
                        got = gv if pos is None else gv.gather(1, pos.index(_with(gv.shape, 1, pos.n), 1, gv.device))
                        trace_grads.setdefault(name, {})[site.layer] = got.detach()
                t.register_hook(keep)
            return t if site.writes else None

        for site in plan.sites.values():
            if site.kind == "out":
                def hook(mod, args, out, site=site):
                    t = out[0] if isinstance(out, tuple) else out
                    new = process(site, t)
                    if new is None:
                        return None
                    return (new, *out[1:]) if isinstance(out, tuple) else new
                handles.append(site.module.register_forward_hook(hook))
            elif site.kind == "pre":
                def pre(mod, args, site=site):
                    new = process(site, args[0])
                    return None if new is None else (new, *args[1:])
                handles.append(site.module.register_forward_pre_hook(pre))
            else:  # decoder block: hidden_states may come positionally or by keyword
                def pre_block(mod, args, kwargs, site=site):
                    if args:
                        new = process(site, args[0])
                        return None if new is None else ((new, *args[1:]), kwargs)
                    new = process(site, kwargs["hidden_states"])
                    return None if new is None else (args, {**kwargs, "hidden_states": new})
                handles.append(site.module.register_forward_pre_hook(pre_block, with_kwargs=True))
        if stop_after is not None:  # registered last: the block's own capture and edit hooks run first
            def stop(mod, args, out):
                raise _Stop(out[0] if isinstance(out, tuple) else out)
            handles.append(self.arch.blocks[stop_after].register_forward_hook(stop))
        attn_modules = [self.arch.attention(l) for l in range(self.arch.n_layers)]
        for m in attn_modules:
            m._whitebox_plan = plan if plan.attn else None
        try:
            yield
        finally:
            for h in handles:
                h.remove()
            for m in attn_modules:
                m._whitebox_plan = None
