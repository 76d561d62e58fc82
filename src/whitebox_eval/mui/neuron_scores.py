"""Neuron contribution scores of paper 001 (sec. 2.1.1 eq. 2; App. B.6.1 eq. 13-15).

All functions are pure: they take tensors the engine captured at the positions that
*predict* response tokens (position ``p`` whose next token ``p + 1`` is a response
token ``y_j``) and return scores ``[n_positions, d_ff]`` for one layer.

Final-norm treatment of eq. 2. The paper writes ``W_u W_out^l (sigma(W_in x))``
"omitting the layer normalization for the sake of brevity", and the authors' code
(MUI-Eval ``get_neuron.py``) multiplies by the raw ``lm_head`` weight, i.e. no
final-norm treatment at all. That is the default here (``final_norm="none"``).
Two more faithful linearisations of the final norm are offered:

* ``"weight"``: fold the final norm's elementwise weight ``gamma`` into the
  unembedding row, ``u <- gamma * u`` (and, with ``norm_center=True``, subtract the
  mean as LayerNorm does). Changes the ranking of neurons within a position.
* ``"full"``: additionally divide by the final norm's per-position denominator
  (RMS or standard deviation of the final residual stream, ``norm_scale[p]``),
  which only rescales whole positions, i.e. changes cross-position comparisons.
"""

from __future__ import annotations

from typing import Literal

import torch

from whitebox_eval.errors import WhiteboxError

FinalNorm = Literal["none", "weight", "full"]

DEFAULT_IG_STEPS = 10
"""Riemann steps m for integrated gradients (App. B.6.1: "we deploy m = 10")."""


def _as_2d(name: str, t: torch.Tensor) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise WhiteboxError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.ndim != 2:
        raise WhiteboxError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    return t


def effective_unembedding(
    unembed_rows: torch.Tensor,
    *,
    final_norm: FinalNorm = "none",
    norm_weight: torch.Tensor | None = None,
    norm_scale: torch.Tensor | None = None,
    norm_center: bool = False,
) -> torch.Tensor:
    """Unembedding rows ``[n_positions, d_model]`` with the chosen final-norm treatment.

    ``"none"``: rows unchanged (paper eq. 2 as written and the authors' code).
    ``"weight"``: ``u * gamma`` (then minus its mean over d_model if ``norm_center``,
    the LayerNorm mean subtraction moved onto ``u``: ``(v - mean v) . w = v . (w - mean w)``).
    ``"full"``: as ``"weight"``, divided by ``norm_scale[p]`` (the per-position RMS /
    std of the final residual stream). For Gemma-style ``(1 + gamma)`` norms pass the
    effective weight ``1 + gamma``.
    """
    u = _as_2d("unembed_rows", unembed_rows).float()
    if final_norm not in ("none", "weight", "full"):
        raise WhiteboxError(f"final_norm must be 'none', 'weight' or 'full', got {final_norm!r}")
    if final_norm == "none":
        return u
    if norm_weight is None:
        raise WhiteboxError(f"final_norm={final_norm!r} needs norm_weight (the final norm's weight)")
    if norm_weight.shape != (u.shape[1],):
        raise WhiteboxError(
            f"norm_weight must have shape ({u.shape[1]},) to match d_model, got {tuple(norm_weight.shape)}"
        )
    u = u * norm_weight.to(u.device, torch.float32)
    if norm_center:
        u = u - u.mean(dim=1, keepdim=True)
    if final_norm == "full":
        if norm_scale is None:
            raise WhiteboxError("final_norm='full' needs norm_scale: the per-position RMS/std of the final residual")
        if norm_scale.shape != (u.shape[0],):
            raise WhiteboxError(
                f"norm_scale must have shape ({u.shape[0]},) (one per position), got {tuple(norm_scale.shape)}"
            )
        u = u / norm_scale.to(u.device, torch.float32)[:, None]
    return u


def neuron_contribution_scores(
    activations: torch.Tensor,
    w_down: torch.Tensor,
    unembed_rows: torch.Tensor,
    *,
    final_norm: FinalNorm = "none",
    norm_weight: torch.Tensor | None = None,
    norm_scale: torch.Tensor | None = None,
    norm_center: bool = False,
    chunk_size: int = 256,
) -> torch.Tensor:
    """Neuron contribution score of eq. 2 for one layer.

    ``score[p, i] = a[p, i] * (W_down[:, i] . u_p)``, the direct contribution of neuron
    ``i`` to the logit of the token predicted at position ``p``.

    Args:
        activations: ``a = sigma(W_in x)`` at the predicting positions, ``[n_positions, d_ff]``
            (for gated MLPs, the input of the down projection).
        w_down: down projection weight ``[d_model, d_ff]`` (``nn.Linear`` layout).
        unembed_rows: unembedding rows of the predicted tokens, already gathered,
            ``[n_positions, d_model]`` (row ``p`` is ``W_u[y_{p+1}]``). The full
            ``d_ff x vocab`` product is never formed.
        final_norm, norm_weight, norm_scale, norm_center: see :func:`effective_unembedding`.
        chunk_size: positions per chunk; peak extra memory is ``chunk_size x d_ff`` floats.

    Returns:
        float32 scores ``[n_positions, d_ff]``.
    """
    a = _as_2d("activations", activations)
    w = _as_2d("w_down", w_down)
    u = effective_unembedding(
        unembed_rows, final_norm=final_norm, norm_weight=norm_weight,
        norm_scale=norm_scale, norm_center=norm_center,
    )
    n_pos, d_ff = a.shape
    if w.shape[1] != d_ff:
        raise WhiteboxError(
            f"w_down must be [d_model, d_ff] with d_ff={d_ff}; got {tuple(w.shape)} "
            "(pass the nn.Linear weight of the down projection, not its transpose)"
        )
    if u.shape != (n_pos, w.shape[0]):
        raise WhiteboxError(
            f"unembed_rows must be [n_positions={n_pos}, d_model={w.shape[0]}], got {tuple(u.shape)}"
        )
    if chunk_size < 1:
        raise WhiteboxError(f"chunk_size must be >= 1, got {chunk_size}")
    w = w.to(u.device, torch.float32)
    out = torch.empty(n_pos, d_ff, dtype=torch.float32, device=u.device)
    for start in range(0, n_pos, chunk_size):
        stop = min(start + chunk_size, n_pos)
        proj = u[start:stop] @ w  # [chunk, d_ff]: (W_down[:, i] . u_p)
        out[start:stop] = a[start:stop].to(u.device, torch.float32) * proj
    return out


def activation_scores(activations: torch.Tensor) -> torch.Tensor:
    """Activation-based score of eq. 13: ``f[p, i] = sigma(W_in x_p)_i`` (float32 copy)."""
    return _as_2d("activations", activations).float().clone()


def riemann_alphas(steps: int = DEFAULT_IG_STEPS, *, include_zero: bool = False) -> torch.Tensor:
    """Scaling factors at which the engine evaluates gradients for eq. 14.

    Paper (App. B.6.1): ``k / m`` for ``k = 1..m`` (right Riemann sum). The authors'
    code instead uses ``linspace(0, 1, m)`` (includes 0); ``include_zero=True`` gives that.
    """
    if steps < 1:
        raise WhiteboxError(f"integrated-gradient steps must be >= 1, got {steps}")
    if include_zero:
        return torch.linspace(0.0, 1.0, steps)
    return torch.arange(1, steps + 1, dtype=torch.float32) / steps


def integrated_gradient_scores(
    activations: torch.Tensor,
    step_gradients: torch.Tensor,
    *,
    multiply_by_activation: bool = True,
    absolute: bool = False,
) -> torch.Tensor:
    """Integrated-gradients neuron score of eq. 14 with a zero baseline.

    ``f[p, i] = a[p, i] * (1/m) * sum_k dF/da_i |_{a = alpha_k * a}``, the Riemann
    approximation of ``a_i * integral_0^1 dF(alpha a)/da_i d alpha`` (Dai et al., 2022,
    which the paper follows; the ``a_i`` factor is lost in the paper's printed formula
    but present in the authors' code). ``F`` is chosen by the engine; use the
    log-probability of the predicted token so positive scores promote it (the
    authors differentiate the cross-entropy loss and then take ``abs``:
    ``absolute=True`` reproduces that ranking).

    Args:
        activations: ``[n_positions, d_ff]``, the actual activations ``a``.
        step_gradients: ``[m, n_positions, d_ff]``, gradients at each ``alpha_k * a``
            (see :func:`riemann_alphas`).
        multiply_by_activation: multiply the mean gradient by ``a`` (IG); False returns
            the mean gradient only.
        absolute: return ``|score|``.
    """
    a = _as_2d("activations", activations).float()
    if step_gradients.ndim != 3 or step_gradients.shape[1:] != a.shape:
        raise WhiteboxError(
            f"step_gradients must be [m, n_positions, d_ff] = [m, {a.shape[0]}, {a.shape[1]}], "
            f"got {tuple(step_gradients.shape)}"
        )
    mean_grad = step_gradients.float().mean(dim=0)
    score = a * mean_grad if multiply_by_activation else mean_grad
    return score.abs() if absolute else score


def response_level_scores(token_scores: torch.Tensor, position_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Response-level score of eq. 15: ``f_sum[..., i] = sum_j f(i | x + y_<j)``.

    ``token_scores`` has positions first (``[n_positions, d_ff]`` or
    ``[n_positions, n_layers, d_ff]``); ``position_mask`` (bool ``[n_positions]``)
    restricts the sum to chosen response tokens.
    """
    if token_scores.ndim < 2:
        raise WhiteboxError(f"token_scores must have a leading positions axis, got shape {tuple(token_scores.shape)}")
    s = token_scores.float()
    if position_mask is not None:
        if position_mask.shape != (s.shape[0],):
            raise WhiteboxError(f"position_mask must have shape ({s.shape[0]},), got {tuple(position_mask.shape)}")
        s = s[position_mask.to(torch.bool)]
    return s.sum(dim=0)
