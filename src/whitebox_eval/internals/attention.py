"""The attention function the engine registers with transformers' attention interface.

Every supported family calls ``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]``
with post-RoPE queries [B, H, S, D], un-repeated keys/values [B, Hkv, S, D] and the
mask. We register ``whitebox_sdpa`` / ``whitebox_eager``: in a layer the active plan
does not touch they call the original implementation unchanged, so logits are
bit-identical to the unhooked model. Where the plan asks for attention rows only,
the output still comes from the original implementation and the requested rows are
computed on the side (never the full N x N matrix). Only layers with attention
edits or ``attn_full`` captures compute the full eager matrix.
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
        if rows is not None:
            rows = rows.to(mask.device)
            full = mask.expand(rows.shape[0], -1, -1, -1)
            mask = full.gather(2, rows[:, None, :, None].expand(-1, full.shape[1], -1, full.shape[3]))
        if mask.dtype != torch.bool:
            return mask.float()
        keep = mask
    return torch.zeros(keep.shape, dtype=torch.float32, device=device).masked_fill(~keep, torch.finfo(torch.float32).min)


def attention_scores(query, key, mask, scaling, softcap=None) -> torch.Tensor:
    """Pre-softmax scores [B, H, Q, K] for (already gathered) queries; GQA without repeating keys."""
    b, h, q_len, d = query.shape
    hkv, k_len = key.shape[1], key.shape[2]
    g = h // hkv
    # query heads of one kv group stacked as rows: no copy of the keys per query head
    scores = torch.matmul(query.reshape(b, hkv, g * q_len, d), key.transpose(-1, -2)).view(b, h, q_len, k_len)
    scores = scores * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    return scores + mask


def attention_probs(query, key, mask, scaling, softcap=None) -> torch.Tensor:
    """Post-softmax probabilities [B, H, Q, K] in float32: q.k products, mask and softmax all in
    float32 whatever the model's dtype (captured rows and edits keep full precision; an fp16
    score never overflows)."""
    scores = attention_scores(query.float(), key.float(), mask.float(), scaling, softcap)
    return torch.softmax(scores, dim=-1)


def weighted_values(probs: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """probs [B, H, Q, K] @ value [B, Hkv, K, D] -> output [B, Q, H, D] (the interface's layout)."""
    b, h, q_len, k_len = probs.shape
    hkv = value.shape[1]
    probs = probs.to(value.dtype)  # as eager attention: float32 softmax, weights in the model's dtype
    out = torch.matmul(probs.reshape(b, hkv, (h // hkv) * q_len, k_len), value).view(b, h, q_len, -1)
    return out.transpose(1, 2).contiguous()


def explicit_mask(config, base: str, allowed: torch.Tensor, query_pos: torch.Tensor, key_pos: torch.Tensor,
                  dtype: torch.dtype) -> torch.Tensor | dict[str, torch.Tensor]:
    """The 4D mask a model takes as given (``create_causal_mask`` returns a 4D mask as it is)
    from ``allowed`` [B, Q, K] (which key each query may see), per kind of layer: sliding-window
    layers also drop keys ``window`` or more positions behind the query, counted on the
    position ids (``query_pos`` [B, Q], ``key_pos`` [B, K]), not on columns. Models mixing
    full and sliding layers (gemma2, gemma3, qwen2/3 with sliding layers) take a dict by
    layer kind. SDPA takes booleans, eager attention an additive mask in ``dtype``."""
    window = getattr(config, "sliding_window", None)
    kinds = set(getattr(config, "layer_types", None) or ["sliding_attention" if window else "full_attention"])

    def four_d(keep: torch.Tensor) -> torch.Tensor:
        keep = keep[:, None]
        if base == "sdpa":
            return keep
        return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, torch.finfo(dtype).min)

    masks = {"full_attention": allowed}
    if window and "sliding_attention" in kinds:
        masks["sliding_attention"] = allowed & (query_pos[:, :, None] - key_pos[:, None, :] < window)
    masks = {kind: four_d(m) for kind, m in masks.items() if kind in kinds}
    return next(iter(masks.values())) if len(masks) == 1 else masks


def _whitebox_attention(base: str):
    def forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        plan = getattr(module, "_whitebox_plan", None)
        if plan is None or not plan.touches_attention(module.layer_idx):
            if base == "sdpa":
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
