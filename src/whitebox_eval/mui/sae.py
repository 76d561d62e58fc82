"""Sparse autoencoders for feature-based MUI (paper 001 sec. 2.1.2 eq. 4-6, App. A.3 eq. 9).

``f = SparsityConstraint(W_e x)`` and ``W_d f ~ x`` (eq. 4); the feature score is the
encoded activation at the position predicting ``y_j`` (eq. 5), and a sample's key
features are the top-50 per layer (eq. 9). Supported sparsity constraints: ReLU,
TopK (Llama Scope's "TopK-ReLU") and JumpReLU (Gemma Scope).

On disk the SAE uses SAELens' layout (:mod:`whitebox_eval.mui.sae_files`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.thresholds import DEFAULT_SAE_TOPK, ThresholdMethod, Unit, key_mask

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
        figures of :func:`whitebox_eval.mui.sae_fidelity.evaluate_fidelity` (per-token explained
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


def feature_key_mask(
    feature_scores: torch.Tensor, method: ThresholdMethod = "topk", value: float | None = DEFAULT_SAE_TOPK,
    *, unit: Unit = "pair",
) -> torch.Tensor:
    """A sample's key features (eq. 6 / 9): default top-50 per layer; inactive (zero) features never count."""
    return key_mask(feature_scores, method, value, unit=unit, min_score=0.0)


# ---------------------------------------------------------------- training
def _rows(x, idx: torch.Tensor) -> torch.Tensor:
    """Rows ``idx`` of a tensor or (memory-mapped) array as float32."""
    if isinstance(x, torch.Tensor):
        return x[idx].float()
    return torch.from_numpy(np.asarray(x[np.sort(idx.numpy())], dtype=np.float32))


def _data_mean(x, chunk: int = 65536) -> torch.Tensor:
    total = torch.zeros(x.shape[1], dtype=torch.float64)
    for s in range(0, x.shape[0], chunk):
        part = x[s:s + chunk]
        total += (part.double() if isinstance(part, torch.Tensor) else torch.from_numpy(np.asarray(part, np.float64))).sum(0)
    return (total / x.shape[0]).float()


def _sparse_t(idx: torch.Tensor, vals: torch.Tensor, n_features: int) -> torch.Tensor:
    """``[n_features, B]`` sparse matrix with ``vals[t, j]`` at ``(idx[t, j], t)``."""
    b, k = idx.shape
    rows = torch.arange(b, device=idx.device).repeat_interleave(k)
    return torch.sparse_coo_tensor(torch.stack([idx.reshape(-1), rows]), vals.reshape(-1), (n_features, b),
                                   check_invariants=False)


def topk_sae_gradients(params: list[torch.Tensor], batch: torch.Tensor, mean: torch.Tensor, k: int,
                       dead: torch.Tensor | None, *, aux_k: int, aux_coef: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Write the gradients of one TopK training step into ``p.grad`` (see :func:`train_topk_sae`).

    ``params`` = ``[W_enc^T [F, d], b_enc, W_dec [F, d], b_dec]``; ``dead`` lists the dead
    features for the auxiliary loss (None or empty: no auxiliary loss). The loss is
    ``mean_t ||x_hat_t - x_t||^2 / ||x_t - mean||^2 + aux_coef * mean_t ||e_hat_t - e_t||^2 / ||e_t||^2``
    with ``e = x - x_hat`` held constant. Returns the selected feature ids ``[B, k]`` and which of
    them fired (pre-activation > 0).
    """
    w_enc_t, b_enc, w_dec, b_dec = params
    n_features, bsz = w_enc_t.shape[0], batch.shape[0]
    denom = ((batch - mean) ** 2).sum(-1)
    denom = denom.clamp_min(1e-3 * float(denom.mean()) + 1e-12)
    xc = batch - b_dec
    pre = torch.addmm(b_enc, xc, w_enc_t.T)  # [B, F]
    top = pre.topk(k, dim=-1)
    idx, pv = top.indices, top.values
    v = torch.relu(pv)
    rows = w_dec[idx]  # [B, k, d]
    err = torch.bmm(v.unsqueeze(1), rows).squeeze(1) + b_dec - batch
    g_r = (2.0 / bsz) * err / denom[:, None]
    g_pv = torch.bmm(rows, g_r.unsqueeze(-1)).squeeze(-1) * (pv > 0)
    w_dec.grad = torch.sparse.mm(_sparse_t(idx, v, n_features), g_r)
    w_enc_t.grad = torch.sparse.mm(_sparse_t(idx, g_pv, n_features), xc)
    b_enc.grad = torch.bincount(idx.reshape(-1), weights=g_pv.reshape(-1), minlength=n_features).to(b_enc.dtype)
    if aux_coef > 0 and dead is not None and dead.numel() > 0:
        target = -err  # x - x_hat, a constant
        pre_d = pre[:, dead]
        sel = pre_d.topk(min(aux_k, dead.numel()), dim=-1).indices
        mask = torch.zeros_like(pre_d).scatter_(-1, sel, 1.0) * (pre_d > 0)
        z = pre_d * mask
        dec_d = w_dec[dead]
        norm = (target ** 2).sum(-1).clamp_min(1e-12)
        g_e = (2.0 * aux_coef / bsz) * (z @ dec_d - target) / norm[:, None]
        g_z = (g_e @ dec_d.T) * mask  # [B, n_dead]
        w_dec.grad.index_add_(0, dead, z.T @ g_e)
        w_enc_t.grad.index_add_(0, dead, g_z.T @ xc)
        b_enc.grad.index_add_(0, dead, g_z.sum(0))
    b_dec.grad = g_r.sum(0) - b_enc.grad @ w_enc_t
    return idx, pv > 0


def train_topk_sae(
    activations,
    n_features: int,
    k: int,
    steps: int = 1000,
    lr: float = 1e-3,
    seed: int = 0,
    *,
    batch_size: int = 256,
    aux_k: int | None = None,
    aux_coef: float = 1 / 32,
    dead_tokens: int = 10_240,
    lr_decay: float = 0.2,
    init: SAE | None = None,
    device: torch.device | str = "cpu",
) -> SAE:
    """Train a TopK SAE (Gao et al., 2024, "Scaling and evaluating sparse autoencoders";
    the Llama Scope architecture of paper 001 App. A.5).

    ``activations`` is ``[n, d]`` (a tensor, or a float16/float32 array such as a memory-mapped
    residual cache). Adam on the reconstruction error of each token normalised by the token's
    centred squared norm ``||x - mean||^2`` (so the loss is one minus the per-token explained
    variance), plus Gao et al.'s auxiliary loss: the ``aux_k`` largest pre-activations among
    dead features (no activation in the last ``dead_tokens`` training tokens, rounded up to whole
    batches) reconstruct the residual error ``e = x - x_hat`` (a constant target), normalised by
    ``||e||^2`` and weighted ``aux_coef`` (1/32 there; ``aux_k`` default ``d / 2``). Gao et al.
    count a feature dead after 10M tokens without firing; a window no longer than the text the
    SAE is judged on (here 10,240 tokens) also revives the rare features that would never fire
    on a held-out evaluation of that size. Init: ``b_dec`` = data mean,
    unit-norm random decoder rows, ``W_enc = W_dec^T``; decoder rows are renormalised after every
    step; the learning rate decays linearly to 0 over the last ``lr_decay`` share of the steps.
    Gradients are written out by hand: only the ``k`` selected features of a token (and the
    auxiliary ones) carry gradient, so a step costs about one dense encoder product.
    ``metadata`` records the dead share at the end (``final_dead_fraction``) and the MSE before
    and after training on up to 8,192 of the tokens. ``init`` continues from an SAE's weights.
    ``device``: where the weights and each step's batch live (the activations stay on the host and
    are drawn there with the same seeded generator, so a GPU draws the same batches). The SAE is
    returned on the CPU.
    """
    if activations.ndim != 2 or activations.shape[0] < 1:
        raise WhiteboxError(f"activations must be [n, d] with n >= 1, got shape {tuple(activations.shape)}")
    if not 1 <= k <= n_features:
        raise WhiteboxError(f"need 1 <= k <= n_features, got k={k}, n_features={n_features}")
    if steps < 1 or lr <= 0 or batch_size < 1 or dead_tokens < 1 or aux_coef < 0 or not 0 <= lr_decay <= 1:
        raise WhiteboxError("steps, batch_size and dead_tokens must be >= 1, lr > 0, aux_coef >= 0, lr_decay in [0, 1]")
    x = activations.detach().float().cpu() if isinstance(activations, torch.Tensor) else activations
    n, d = x.shape
    aux_k = max(1, min(n_features, aux_k if aux_k is not None else d // 2))
    drawn = min(batch_size, n)  # tokens per step
    dead_steps = math.ceil(dead_tokens / drawn)
    gen = torch.Generator().manual_seed(seed)
    mean = _data_mean(x).to(device)
    w_dec = torch.randn(n_features, d, generator=gen)
    w_dec = w_dec / w_dec.norm(dim=1, keepdim=True)
    w_enc_t, b_enc, b_dec = w_dec.clone(), torch.zeros(n_features), mean.clone()  # W_enc^T: one row per feature
    if init is not None:
        if (init.d_in, init.d_sae) != (d, n_features):
            raise WhiteboxError(f"init SAE is {init.d_in} -> {init.d_sae}, expected {d} -> {n_features}")
        w_enc_t, b_enc = init.w_enc.detach().float().T.contiguous(), init.b_enc.detach().float().clone()
        w_dec, b_dec = init.w_dec.detach().float().clone(), init.b_dec.detach().float().clone()
    params = [w_enc_t, b_enc, w_dec, b_dec] = [p.to(device) for p in (w_enc_t, b_enc, w_dec, b_dec)]
    try:
        opt = torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError):  # no fused Adam for this build / device
        opt = torch.optim.Adam(params, lr=lr)
    decay_from = int(steps * (1 - lr_decay))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 1.0 if s < decay_from else max(0.0, (steps - s) / max(1, steps - decay_from)))
    last_fired = torch.zeros(n_features, dtype=torch.long, device=device)
    sample = _rows(x, torch.randperm(n, generator=gen)[:8192]).to(device)

    def build() -> SAE:
        return SAE(w_enc_t.T.contiguous(), b_enc.clone(), w_dec.clone(), b_dec.clone(), activation="topk", k=k)

    initial = reconstruction_mse(build(), sample)
    aux_steps = 0
    for step in range(1, steps + 1):
        batch = _rows(x, torch.randint(0, n, (drawn,), generator=gen)).to(device)
        dead = torch.nonzero(step - 1 - last_fired > dead_steps).flatten() if aux_coef > 0 else None
        idx, fired = topk_sae_gradients(params, batch, mean, k, dead, aux_k=aux_k, aux_coef=aux_coef)
        last_fired[idx[fired]] = step
        aux_steps += int(dead is not None and dead.numel() > 0)
        opt.step()
        sched.step()
        w_dec /= w_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)
    trained = build().to("cpu")
    trained.metadata.update({
        "trainer": "whitebox_eval.mui.sae.train_topk_sae", "steps": steps, "lr": lr, "seed": seed,
        "batch_size": batch_size, "aux_k": aux_k, "aux_coef": aux_coef, "dead_tokens": dead_tokens,
        "dead_steps": dead_steps, "lr_decay": lr_decay, "n_training_vectors": int(n), "initial_mse": initial,
        "final_mse": reconstruction_mse(trained, sample.cpu()), "steps_with_aux_loss": aux_steps,
        "final_dead_fraction": float((steps - last_fired > dead_steps).float().mean()),
    })
    return trained
