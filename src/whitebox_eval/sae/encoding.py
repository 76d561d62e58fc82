"""Sparse autoencoders for feature-based MUI (paper 001 sec. 2.1.2 eq. 4-6, App. A.3 eq. 9).

``f = SparsityConstraint(W_e x)`` and ``W_d f ~ x`` (eq. 4); the feature score is the
encoded activation at the position predicting ``y_j`` (eq. 5), and a sample's key
features are the top-50 per layer (eq. 9). Supported sparsity constraints: ReLU,
TopK (Llama Scope's "TopK-ReLU") and JumpReLU (Gemma Scope).

On disk the SAE uses SAELens' layout (:mod:`whitebox_eval.sae.files`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError

Activation = Literal["relu", "topk", "jumprelu"]


@dataclass(eq=False)
class SAE:
    """One layer's sparse autoencoder (eq. 4), weights in SAELens orientation."""

    w_enc: torch.Tensor  # [d_in, d_sae]
    b_enc: torch.Tensor  # [d_sae]
    w_dec: torch.Tensor  # [d_sae, d_in]
    b_dec: torch.Tensor  # [d_in]
    activation: Activation = "relu"
    k: int | None = None
    threshold: torch.Tensor | None = None  # [d_sae], JumpReLU only
    apply_b_dec_to_input: bool = True
    norm_scaling_factor: float | None = None  # inputs are multiplied by it before encoding
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        d_in, d_sae = self.w_enc.shape
        shapes = {
            "b_enc": (self.b_enc.shape, (d_sae,)), "w_dec": (self.w_dec.shape, (d_sae, d_in)),
            "b_dec": (self.b_dec.shape, (d_in,)),
        }
        for name, (got, want) in shapes.items():
            if tuple(got) != want:
                raise WhiteboxError(f"SAE {name} has shape {tuple(got)}, expected {want} for W_enc [{d_in}, {d_sae}]")
        if self.activation not in ("relu", "topk", "jumprelu"):
            raise WhiteboxError(f"SAE activation must be relu, topk or jumprelu, got {self.activation!r}")
        if self.activation == "topk" and (self.k is None or not 1 <= self.k <= d_sae):
            raise WhiteboxError(f"a TopK SAE needs k in [1, {d_sae}], got {self.k!r}")
        if self.activation == "jumprelu":
            if self.threshold is None or tuple(self.threshold.shape) != (d_sae,):
                raise WhiteboxError(f"a JumpReLU SAE needs a threshold of shape ({d_sae},)")

    def to(self, device: torch.device | str) -> "SAE":
        """This SAE with its tensors on ``device`` (itself when they are there already): encode on
        the device the residuals were captured on, never copying them to the host."""
        device = torch.device(device)
        if self.w_enc.device == device:
            return self
        moved = {k: getattr(self, k).to(device) for k in ("w_enc", "b_enc", "w_dec", "b_dec")}
        threshold = None if self.threshold is None else self.threshold.to(device)
        return replace(self, **moved, threshold=threshold)

    @property
    def d_in(self) -> int:
        return int(self.w_enc.shape[0])

    @property
    def d_sae(self) -> int:
        return int(self.w_enc.shape[1])

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """``W_enc^T (s x - b_dec) + b_enc`` (``- b_dec`` only if ``apply_b_dec_to_input``)."""
        if x.shape[-1] != self.d_in:
            raise WhiteboxError(f"SAE expects inputs with last dimension {self.d_in}, got {tuple(x.shape)}")
        x = x.to(self.w_enc.dtype)
        if self.norm_scaling_factor is not None:
            x = x * self.norm_scaling_factor
        if self.apply_b_dec_to_input:
            x = x - self.b_dec
        return x @ self.w_enc + self.b_enc

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations ``f = SparsityConstraint(W_e x)`` (eq. 4).

        ReLU: ``max(pre, 0)``. TopK: keep the ``k`` largest pre-activations, ReLU them,
        zero the rest. JumpReLU: ``relu(pre) * [pre > threshold]`` (SAELens; Gemma Scope's
        thresholds are positive, so this is ``pre * [pre > threshold]``).
        """
        pre = self.pre_activations(x)
        if self.activation == "relu":
            return torch.relu(pre)
        if self.activation == "jumprelu":
            return torch.relu(pre) * (pre > self.threshold)
        top = torch.topk(pre, self.k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        """Reconstruction ``W_d f + b_dec`` (eq. 4), divided by the input scaling factor if any."""
        x = f.to(self.w_dec.dtype) @ self.w_dec + self.b_dec
        if self.norm_scaling_factor is not None:
            x = x / self.norm_scaling_factor
        return x

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))


def reconstruction_mse(sae: SAE, x: torch.Tensor) -> float:
    """Mean squared reconstruction error ``mean((x - W_d f - b_dec)^2)`` (cf. paper Table 7)."""
    with torch.no_grad():
        return float(((sae.reconstruct(x) - x.to(sae.w_dec.dtype)) ** 2).mean())


@dataclass
class ReconstructionStats:
    """Running reconstruction quality of one SAE over the tokens it encoded in a run.

    ``explained_variance = 1 - sum ||x - x_hat||^2 / sum ||x - mean x||^2`` and
    ``dead_fraction`` = share of features never active (activation > 0) on those tokens.
    """

    n: int = 0
    sum_x: np.ndarray | None = None
    sum_sq: float = 0.0
    sse: float = 0.0
    active: np.ndarray | None = None

    def update(self, sae: SAE, x: torch.Tensor, f: torch.Tensor | None = None) -> None:
        """Add tokens ``x [n, d_in]``; ``f`` are their encodings when already computed."""
        with torch.no_grad():
            x = x.to(sae.w_dec.dtype)
            f = sae.encode(x) if f is None else f.to(sae.w_dec.dtype)
            err = sae.decode(f) - x
            xd = x.double()
            if self.sum_x is None:
                self.sum_x = np.zeros(sae.d_in)
                self.active = np.zeros(sae.d_sae, dtype=np.int64)
            self.n += int(x.shape[0])
            self.sum_x += xd.sum(0).cpu().numpy()
            self.sum_sq += float((xd ** 2).sum())
            self.sse += float((err.double() ** 2).sum())
            self.active += (f > 0).sum(0).cpu().numpy().astype(np.int64)

    def merge(self, other: ReconstructionStats) -> ReconstructionStats:
        if other.n == 0:
            return self
        if self.n == 0:
            return ReconstructionStats(other.n, other.sum_x.copy(), other.sum_sq, other.sse, other.active.copy())
        return ReconstructionStats(self.n + other.n, self.sum_x + other.sum_x, self.sum_sq + other.sum_sq,
                                   self.sse + other.sse, self.active + other.active)

    @property
    def explained_variance(self) -> float:
        sst = self.sum_sq - float(self.sum_x @ self.sum_x) / self.n
        return 1.0 - self.sse / sst if sst > 0 else float("nan")

    @property
    def dead_fraction(self) -> float:
        return float((self.active == 0).mean())

    def summary(self) -> dict:
        """Numbers for results.json. They are not judged here: the SAE is judged once, on the
        figures of :func:`whitebox_eval.sae.fidelity.evaluate_fidelity` (per-token explained
        variance and loss recovered; pooled variance cannot tell a good SAE from a poor one)."""
        if self.n == 0:
            return {"n_tokens": 0}
        return {"n_tokens": self.n, "explained_variance": self.explained_variance,
                "mse": self.sse / (self.n * self.sum_x.size), "dead_fraction": self.dead_fraction,
                "n_dead": int((self.active == 0).sum()), "d_sae": int(self.active.size)}


# ---------------------------------------------------------------- feature scores
def sae_feature_scores(sae: SAE, residual: torch.Tensor, *, chunk_size: int = 512) -> torch.Tensor:
    """Feature contribution score of eq. 5 for one layer: ``encode(x_p)``, ``[n_positions, d_sae]``.

    ``residual`` holds the residual-stream vectors at the positions predicting the
    response tokens, ``[n_positions, d_in]``; positions are encoded ``chunk_size`` at a time.
    """
    if residual.ndim != 2:
        raise WhiteboxError(f"residual must be [n_positions, d_in], got shape {tuple(residual.shape)}")
    with torch.no_grad():
        parts = [sae.encode(residual[s:s + chunk_size]) for s in range(0, residual.shape[0], chunk_size)]
    return torch.cat(parts, dim=0).float() if parts else torch.zeros(0, sae.d_sae)


def sae_feature_scores_by_layer(saes: Sequence[SAE], residuals: torch.Tensor, *, chunk_size: int = 512) -> torch.Tensor:
    """Eq. 5 for every SAE layer: ``residuals [n_positions, n_layers, d_in] -> [n_positions, n_layers, d_sae]``."""
    if residuals.ndim != 3 or residuals.shape[1] != len(saes):
        raise WhiteboxError(
            f"residuals must be [n_positions, n_layers={len(saes)}, d_in], got shape {tuple(residuals.shape)}"
        )
    widths = {s.d_sae for s in saes}
    if len(widths) != 1:
        raise WhiteboxError(f"all layers' SAEs must have the same width for feature MUI, got {sorted(widths)}")
    return torch.stack(
        [sae_feature_scores(s, residuals[:, i], chunk_size=chunk_size) for i, s in enumerate(saes)], dim=1
    )
