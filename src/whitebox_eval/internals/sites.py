"""The site table: where each capture point lives in one layer of a family and how it is read.

A point read by a hook on a module is one entry of :data:`SITES` (and its name in
``requests.CAPTURE_POINTS``); the points read inside the registered attention function are
:data:`ATTENTION_POINTS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from whitebox_eval.internals.requests import CAPTURE_POINTS
from whitebox_eval.models.architectures import Architecture


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

if set(SITES) | set(ATTENTION_POINTS) != set(CAPTURE_POINTS):  # pragma: no cover - a registry out of step
    raise ImportError("the engine's SITES and ATTENTION_POINTS must serve exactly requests.CAPTURE_POINTS")
