"""Reading the residual stream and attention as the model's own outputs would.

- :func:`logit_lens`: final norm + unembedding applied to an intermediate residual
  stream (000 App. F, eq. 6).
- :func:`attention_rollout`: Abnar & Zuidema (2020) rollout, as used by 003 sec. 4.
"""

from __future__ import annotations

import torch

from whitebox_eval.internals.engine import Engine


def logit_lens(engine: Engine, resid: torch.Tensor, token_ids: torch.Tensor | list[int] | None = None) -> torch.Tensor:
    """Logits of residual vectors [..., d_model] read through the final norm and unembedding.

    ``token_ids`` restricts the unembedding to those rows (e.g. the option letters), so
    the full vocabulary is never materialised: returns [..., len(token_ids)]. Final
    logit soft-capping (gemma2/3) is applied as in the model's own head.
    """
    normed = engine.arch.final_norm(resid)
    if token_ids is None:
        return engine.unembed(normed)
    ids = torch.as_tensor(token_ids, dtype=torch.long, device=normed.device)
    w = engine.arch.unembed_weight()[ids]  # [T, d_model]
    logits = normed @ w.T
    bias = getattr(engine.arch.unembed, "bias", None)
    if bias is not None:
        logits = logits + bias[ids]
    cap = engine.arch.final_logit_softcap
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    return logits


def attention_rollout(attn: torch.Tensor, *, residual_weight: float = 0.5) -> torch.Tensor:
    """Attention rollout over layers (Abnar & Zuidema 2020).

    ``attn``: full post-softmax attention [layers, heads, S, S] of one example. Per
    layer the heads are averaged, the identity is added for the residual connection
    (A' = w_res * I + (1 - w_res) * A, i.e. 0.5 (A + I)), rows are re-normalised, and the
    layers are multiplied: R_l = A'_l R_{l-1}. Returns the rollout after every layer,
    [layers, S, S]; the last one is the usual rollout.
    """
    if attn.dim() != 4 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"attention_rollout expects [layers, heads, S, S], got {tuple(attn.shape)}")
    a = attn.float().mean(1)
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    a = residual_weight * eye + (1 - residual_weight) * a
    a = a / a.sum(-1, keepdim=True)
    out = torch.empty_like(a)
    r = eye
    for layer in range(a.shape[0]):
        r = a[layer] @ r
        out[layer] = r
    return out
