"""The attention function the engine registers with transformers' attention interface.

Every supported family calls ``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]``
with post-RoPE queries [B, H, S, D], un-repeated keys/values [B, Hkv, S, D] and the
mask. We register ``whitebox_sdpa`` / ``whitebox_eager``: in a layer the active plan
does not touch they call the original implementation unchanged, so logits are
bit-identical to the unhooked model. Where the plan asks for attention rows only,
the output still comes from the original implementation and the requested rows are
computed on the side (never the full N x N matrix), by the engine's plan
(:meth:`whitebox_eval.internals.pass_attention.AttentionWork.attention`: one fused product per layer). Only
layers with attention edits or ``attn_full`` captures compute the full matrix.
"""

from __future__ import annotations

import sys

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

IMPLEMENTATIONS = {"sdpa": "whitebox_sdpa", "eager": "whitebox_eager"}


def _family_eager(module):
    """The family's own eager attention (from its modelling file), for exact fallbacks."""
    return getattr(sys.modules[type(module).__module__], "eager_attention_forward")


def additive_mask(mask: torch.Tensor | None, q_len: int, k_len: int, device, rows: torch.Tensor | None = None) -> torch.Tensor:
    """The mask as additive float32 [B|1, 1|H, q, k] (None means plain causal).

    float32 whatever the model's dtype: ``finfo(float16).min`` plus a negative score is
    ``-inf`` in fp16, so a fully masked row (a left pad) would softmax to NaN and reach the
    real tokens through its values. ``rows`` [B, P] keeps only those query rows
    ([B, 1|H, P, k]): a capture of a few rows never builds the full mask."""
    if mask is None:
        query = torch.arange(q_len, device=device) if rows is None else rows.to(device)
        keep = torch.arange(k_len, device=device) <= (query + (k_len - q_len)).unsqueeze(-1)
        keep = keep[None, None] if rows is None else keep[:, None]
    else:
        mask = mask.to(device)  # a layer's mask may sit on another device than the rows' (a model split over devices)
        if rows is not None:
            rows = rows.to(device)
            full = mask.expand(rows.shape[0], -1, -1, -1)
            mask = full.gather(2, rows[:, None, :, None].expand(-1, full.shape[1], -1, full.shape[3]))
        if mask.dtype != torch.bool:
            return mask.float()
        keep = mask
    return torch.zeros(keep.shape, dtype=torch.float32, device=device).masked_fill(~keep, torch.finfo(torch.float32).min)


def explicit_mask(config, base: str, allowed: torch.Tensor, query_pos: torch.Tensor, key_pos: torch.Tensor,
                  dtype: torch.dtype) -> torch.Tensor | dict[str, torch.Tensor]:
    """The 4D mask a model takes as given (``create_causal_mask`` returns a 4D mask as it is)
    from ``allowed`` [B, Q, K] (which key each query may see), per kind of layer: sliding-window
    layers also drop keys ``window`` or more positions behind the query, counted on the
    position ids (``query_pos`` [B, Q], ``key_pos`` [B, K]), not on columns. Models mixing
    full and sliding layers (gemma2, gemma3, qwen2/3 with sliding layers) take a dict by
    layer kind. Both take an additive mask in ``dtype``, built here once per pass: eager attention
    with ``finfo.min`` where a key is hidden (as transformers builds it), SDPA with ``-inf``, the
    value SDPA itself gives a boolean mask (changed: SDPA got booleans, which it converted to
    an additive [B, 1, S, S] mask again in every layer: a packed pass's whole mask, written and read
    once per layer, the memory traffic that made the packed cloze pass slow on some CPUs)."""
    window = getattr(config, "sliding_window", None)
    kinds = set(getattr(config, "layer_types", None) or ["sliding_attention" if window else "full_attention"])

    def four_d(keep: torch.Tensor) -> torch.Tensor:
        keep = keep[:, None]
        hidden = float("-inf") if base == "sdpa" else torch.finfo(dtype).min
        return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, hidden)

    masks = {"full_attention": allowed}
    if window and "sliding_attention" in kinds:
        masks["sliding_attention"] = allowed & (query_pos[:, :, None] - key_pos[:, None, :] < window)
    masks = {kind: four_d(m) for kind, m in masks.items() if kind in kinds}
    return next(iter(masks.values())) if len(masks) == 1 else masks


CHUNK = 256
"""Queries per SDPA call where a pass's mask is causal but explicit (:func:`by_query_chunks`)."""


def by_query_chunks(module, query, key, value, mask, **kwargs) -> tuple[torch.Tensor, None]:
    """SDPA over an explicit mask that hides every key after its query (a packed batch's), in chunks of
    :data:`CHUNK` queries, each against the keys up to its last query only.

    SDPA's fused CPU kernel skips the keys after a query only under ``is_causal``; given a mask it
    computes every block, twice the causal work at long contexts (a packed ARC-Challenge 25-shot pass
    spent 22% more than each context forwarded once with a cache). The keys a chunk leaves out are
    hidden from all its queries, so the result is the same up to float rounding (softmax sums in
    other blocks: ~1e-7)."""
    q_len, k_len = query.shape[2], key.shape[2]
    shift = k_len - q_len  # key columns before the first query (a cached prefix)
    outs = []
    for start in range(0, q_len, CHUNK):
        stop = min(start + CHUNK, q_len)
        keys = shift + stop
        m = mask[:, :, start:stop, :keys]
        outs.append(sdpa_attention_forward(module, query[:, :, start:stop], key[:, :, :keys], value[:, :, :keys], m,
                                           **kwargs)[0])
    return torch.cat(outs, dim=1), None


def _whitebox_attention(base: str):
    def forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        plan = getattr(module, "_whitebox_plan", None)
        if plan is None or not plan.touches_attention(module.layer_idx):
            if base == "sdpa":
                if plan is not None and plan.chunked and attention_mask is not None:
                    return by_query_chunks(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
                return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
            return _family_eager(module)(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        if scaling is None:
            scaling = query.shape[-1] ** -0.5
        return plan.attention(module.layer_idx, module, query, key, value, attention_mask, scaling, kwargs.get("softcap"), base, dropout, kwargs)

    return forward


def register() -> None:
    """Register the whitebox attention and mask functions (idempotent)."""
    AttentionInterface.register("whitebox_sdpa", _whitebox_attention("sdpa"))
    AttentionInterface.register("whitebox_eager", _whitebox_attention("eager"))
    AttentionMaskInterface.register("whitebox_sdpa", sdpa_mask)
    AttentionMaskInterface.register("whitebox_eager", eager_mask)
