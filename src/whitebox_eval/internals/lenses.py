"""Reading the residual stream and attention as the model's own outputs would.

- :func:`logit_lens`: final norm + unembedding applied to an intermediate residual
  stream (000 App. F, eq. 6).
- :func:`attention_rollout`: Abnar & Zuidema (2020) rollout, as used by 003 sec. 4.
"""

from __future__ import annotations

import torch

from whitebox_eval.errors import WhiteboxError

from whitebox_eval.internals.engine import Engine


def logit_lens(engine: Engine, resid: torch.Tensor, token_ids: torch.Tensor | list | None = None) -> torch.Tensor:
    """Logits of residual vectors [..., d_model] read through the final norm and unembedding.

    ``token_ids`` restricts the unembedding to those rows (e.g. the option letters), so
    the full vocabulary is never materialised: returns [..., len(token_ids)]. ``token_ids``
    [B, T] gives each example of ``resid`` [B, ..., d_model] its own ids (a batch's items
    with different letters): one product over the ids the batch uses, then each example's
    columns. Final logit soft-capping (gemma2/3) is applied as in the model's own head.
    """
    normed = engine.arch.final_norm(resid).float()  # the lens reads in float32, whatever the weights
    w = engine.arch.unembed_weight()
    bias = getattr(engine.arch.unembed, "bias", None)
    pick = None
    if token_ids is not None:
        ids = torch.as_tensor(token_ids, dtype=torch.long)
        if ids.dim() == 2:  # one row of ids per example: the union once, then each example's columns
            if ids.device.type != "cpu":
                raise WhiteboxError("per-example token ids are read on the host: pass them as a list or CPU tensor")
            ids, inverse = torch.unique(ids, return_inverse=True)
            shape = [inverse.shape[0]] + [1] * (resid.dim() - 2) + [inverse.shape[1]]
            pick = inverse.view(shape)
        ids = ids.to(w.device)
        w, bias = w[ids], (None if bias is None else bias[ids])  # [T, d_model]
    logits = torch.nn.functional.linear(normed, w.to(normed.device, torch.float32),
                                        None if bias is None else bias.to(normed.device, torch.float32))
    cap = engine.arch.final_logit_softcap
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    if pick is not None:
        logits = logits.gather(-1, pick.to(logits.device).expand(*logits.shape[:-1], pick.shape[-1]))
    return logits


def attention_rollout(attentions, head_weights=None) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020; 003 sec. 4, as its released code).

    Per layer: average the heads (or weight them by ``head_weights`` [L, H]), add the
    identity for the residual stream, normalise rows; then multiply the layers,
    ``R = Â_L · … · Â_1``. ``attentions`` is [L, H, S, S] (or [B, L, H, S, S]);
    returns [S, S] (or [B, S, S]) in float64.
    """
    att = attentions if isinstance(attentions, torch.Tensor) else torch.as_tensor(attentions)
    batched = att.dim() == 5
    if att.dim() == 4:
        att = att.unsqueeze(0)
    if att.dim() != 5 or att.shape[-1] != att.shape[-2]:
        raise WhiteboxError("attentions must be [layers, heads, seq, seq] or "
                            f"[batch, layers, heads, seq, seq]; got {tuple(att.shape)}")
    att = att.to(torch.float64)
    _, n_layers, n_heads, seq, _ = att.shape
    if head_weights is None:
        weights = torch.full((n_layers, n_heads), 1.0 / n_heads, dtype=torch.float64)
    else:
        weights = torch.as_tensor(head_weights, dtype=torch.float64)
        if weights.shape != (n_layers, n_heads):
            raise WhiteboxError(f"head_weights must be [{n_layers}, {n_heads}]; got "
                                f"{tuple(weights.shape)}")
    mixed = (att * weights.to(att.device)[None, :, :, None, None]).sum(dim=2)
    eye = torch.eye(seq, dtype=torch.float64, device=att.device)
    rollout = None
    for layer in range(n_layers):
        a = mixed[:, layer] + eye
        a = a / a.sum(dim=-1, keepdim=True)
        rollout = a if rollout is None else a @ rollout
    return rollout if batched else rollout[0]
