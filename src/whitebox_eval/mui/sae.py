"""Sparse autoencoders for feature-based MUI (paper 001 sec. 2.1.2 eq. 4-6, App. A.3 eq. 9).

``f = SparsityConstraint(W_e x)`` and ``W_d f ~ x`` (eq. 4); the feature score is the
encoded activation at the position predicting ``y_j`` (eq. 5), and a sample's key
features are the top-50 per layer (eq. 9). Supported sparsity constraints: ReLU,
TopK (Llama Scope's "TopK-ReLU") and JumpReLU (Gemma Scope).

On disk the SAE uses SAELens' layout: a folder with ``cfg.json`` and
``sae_weights.safetensors`` holding ``W_enc [d_in, d_sae]``, ``b_enc [d_sae]``,
``W_dec [d_sae, d_in]``, ``b_dec [d_in]`` and, for JumpReLU, ``threshold [d_sae]``.
Loading is lenient: ``encoder.weight``/``decoder.weight`` (nn.Linear layout),
``log_threshold``, Gemma Scope's ``params.npz`` and old/new SAELens config keys
(``architecture``, ``activation_fn_str`` + ``activation_fn_kwargs.k``, ``k``) are accepted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.thresholds import DEFAULT_SAE_TOPK, ThresholdMethod, Unit, key_mask

Activation = Literal["relu", "topk", "jumprelu"]

CFG_FILE = "cfg.json"
WEIGHTS_FILE = "sae_weights.safetensors"


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


POOR_EXPLAINED_VARIANCE = 0.8
"""Below this share of the residual's variance an SAE's features describe the stream poorly
(public SAEs such as Llama Scope / Gemma Scope reconstruct about 0.8-0.9 or more)."""

POOR_DEAD_FRACTION = 0.5
"""Above this share of never-active features most of the dictionary is unused."""


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
        """Numbers for results.json, with a warning when the SAE reconstructs poorly."""
        if self.n == 0:
            return {"n_tokens": 0}
        ev, dead = self.explained_variance, self.dead_fraction
        out = {"n_tokens": self.n, "explained_variance": ev, "mse": self.sse / (self.n * self.sum_x.size),
               "dead_fraction": dead, "n_dead": int((self.active == 0).sum()), "d_sae": int(self.active.size)}
        problems = []
        if not ev >= POOR_EXPLAINED_VARIANCE:
            problems.append(f"explained variance {ev:.3f} < {POOR_EXPLAINED_VARIANCE}")
        if dead > POOR_DEAD_FRACTION:
            problems.append(f"{100 * dead:.0f}% of features never active")
        if problems:
            out["warning"] = "poor SAE: " + ", ".join(problems) + "; feature MUI from it is unreliable"
        return out


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


# ---------------------------------------------------------------- SAELens files
_W_ENC_KEYS = ("W_enc", "w_enc", "W_E", "encoder.weight", "encoder_weight")
_B_ENC_KEYS = ("b_enc", "encoder.bias", "encoder_bias")
_W_DEC_KEYS = ("W_dec", "w_dec", "W_D", "decoder.weight", "decoder_weight")
_B_DEC_KEYS = ("b_dec", "decoder.bias", "decoder_bias", "b_pre")
_THRESHOLD_KEYS = ("threshold", "jump_threshold", "jumprelu.threshold")
_LOG_THRESHOLD_KEYS = ("log_threshold",)


def _pick(tensors: dict[str, torch.Tensor], keys: Sequence[str], what: str, source: Path, required: bool = True):
    for k in keys:
        if k in tensors:
            return tensors[k]
    if required:
        raise WhiteboxError(
            f"{source} has no {what} tensor; looked for {list(keys)}, found {sorted(tensors)}"
        )
    return None


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        from whitebox_eval.models.loading import check_safetensors

        check_safetensors(path)
        return load_file(str(path))
    if path.suffix == ".npz":
        with np.load(path) as z:
            return {k: torch.from_numpy(np.asarray(z[k])) for k in z.files}
    raise WhiteboxError(f"SAE weights must be .safetensors or .npz, got {path.name!r}")


def _locate(path: Path) -> tuple[Path, Path | None]:
    """(weights file, cfg.json or None) for a folder or a weights-file path."""
    if path.is_dir():
        for name in (WEIGHTS_FILE, "params.safetensors", "model.safetensors", "params.npz"):
            if (path / name).is_file():
                weights = path / name
                break
        else:
            found = sorted(p.name for p in path.iterdir())
            raise WhiteboxError(f"no SAE weights in {path}: expected {WEIGHTS_FILE} (or params.npz); found {found}")
        cfg = path / CFG_FILE
        return weights, cfg if cfg.is_file() else None
    if path.is_file():
        cfg = path.parent / CFG_FILE
        return path, cfg if cfg.is_file() else None
    raise WhiteboxError(f"SAE path not found: {path}")


def _cfg_int(cfg: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        if cfg.get(k) is not None:
            return int(cfg[k])
    return None


def _orient(t: torch.Tensor, rows: int | None, cols: int | None, name: str, source: Path, transposed_key: bool):
    """Return ``t`` as [rows, cols], transposing if it is stored the other way round."""
    if t.ndim != 2:
        raise WhiteboxError(f"{source}: {name} must be 2-D, got shape {tuple(t.shape)}")
    if rows is None or cols is None:
        return t.T.contiguous() if transposed_key else t
    if tuple(t.shape) == (rows, cols) and not (rows == cols and transposed_key):
        return t
    if tuple(t.shape) == (cols, rows):
        return t.T.contiguous()
    raise WhiteboxError(f"{source}: {name} has shape {tuple(t.shape)}, expected ({rows}, {cols}) or its transpose")


def _activation_from_cfg(cfg: dict[str, Any], has_threshold: bool, source: Path) -> tuple[Activation, int | None]:
    arch = str(cfg.get("architecture") or "").lower()
    act_fn = str(cfg.get("activation_fn_str") or cfg.get("activation_fn") or cfg.get("act_fn") or "").lower()
    kwargs = cfg.get("activation_fn_kwargs") or {}
    k = kwargs.get("k", cfg.get("k", cfg.get("top_k")))
    if arch == "jumprelu" or act_fn == "jumprelu" or (not arch and not act_fn and has_threshold):
        if not has_threshold:
            raise WhiteboxError(f"{source}: JumpReLU SAE without a threshold (or log_threshold) tensor")
        return "jumprelu", None
    if arch == "topk" or "topk" in act_fn:
        if k is None:
            raise WhiteboxError(f"{source}: TopK SAE config lacks k (activation_fn_kwargs.k or k)")
        return "topk", int(k)
    if arch in ("", "standard", "relu") and act_fn in ("", "relu"):
        return "relu", None
    raise WhiteboxError(
        f"{source}: unsupported SAE architecture {arch!r} / activation {act_fn!r}; supported: "
        "standard (ReLU), topk, jumprelu"
    )


def _norm_factor(cfg: dict[str, Any], d_in: int, source: Path) -> float | None:
    mode = cfg.get("normalize_activations") or "none"
    if mode == "none":
        return None
    if mode == "expected_average_only_in":
        for key in ("norm_scaling_factor", "scaling_factor"):
            if cfg.get(key) is not None:
                return float(cfg[key])
        avg = (cfg.get("dataset_average_activation_norm") or {}).get("in")
        if avg is not None:
            return math.sqrt(d_in) / float(avg)
        raise WhiteboxError(
            f"{source}: normalize_activations='expected_average_only_in' but no scaling factor in cfg.json; "
            "add norm_scaling_factor or dataset_average_activation_norm.in, or fold it into the weights"
        )
    raise WhiteboxError(
        f"{source}: normalize_activations={mode!r} is not supported; use 'none' or 'expected_average_only_in'"
    )


def load_sae(
    path: str | Path, *, dtype: torch.dtype = torch.float32, apply_b_dec_to_input: bool | None = None,
) -> SAE:
    """Load an SAE from a SAELens folder (``cfg.json`` + ``sae_weights.safetensors``) or a weights file.

    ``apply_b_dec_to_input`` overrides the config. Without it, ``cfg.json``'s value is
    used (SAELens' default True when the key is missing); with no ``cfg.json`` at all
    (e.g. Gemma Scope's raw ``params.npz``, whose encoder does not subtract ``b_dec``)
    the default is False.
    """
    path = Path(path)
    weights, cfg_path = _locate(path)
    try:
        cfg = json.loads(cfg_path.read_text()) if cfg_path else {}
    except json.JSONDecodeError as exc:
        raise WhiteboxError(f"{cfg_path} is not valid JSON: {exc}") from exc
    tensors = _read_tensors(weights)
    w_enc_key = next((k for k in _W_ENC_KEYS if k in tensors), None)
    w_dec_key = next((k for k in _W_DEC_KEYS if k in tensors), None)
    w_enc = _pick(tensors, _W_ENC_KEYS, "encoder weight (W_enc)", weights)
    w_dec = _pick(tensors, _W_DEC_KEYS, "decoder weight (W_dec)", weights)
    b_enc = _pick(tensors, _B_ENC_KEYS, "encoder bias (b_enc)", weights, required=False)
    b_dec = _pick(tensors, _B_DEC_KEYS, "decoder bias (b_dec)", weights, required=False)
    d_in = _cfg_int(cfg, "d_in", "d_model", "hidden_size")
    d_sae = _cfg_int(cfg, "d_sae", "dict_size", "n_features", "d_hidden")
    if d_sae is None and b_enc is not None:
        d_sae = int(b_enc.shape[0])
    if d_in is None and b_dec is not None:
        d_in = int(b_dec.shape[0])
    w_enc = _orient(w_enc, d_in, d_sae, "W_enc", weights, transposed_key=w_enc_key == "encoder.weight")
    w_dec = _orient(w_dec, d_sae, d_in, "W_dec", weights, transposed_key=w_dec_key == "decoder.weight")
    d_in, d_sae = w_enc.shape
    if b_enc is None:
        b_enc = torch.zeros(d_sae)
    if b_dec is None:
        b_dec = torch.zeros(d_in)
    threshold = _pick(tensors, _THRESHOLD_KEYS, "threshold", weights, required=False)
    if threshold is None and any(k in tensors for k in _LOG_THRESHOLD_KEYS):
        threshold = _pick(tensors, _LOG_THRESHOLD_KEYS, "log_threshold", weights).exp()
    activation, k = _activation_from_cfg(cfg, threshold is not None, weights)
    meta = {key: cfg[key] for key in ("hook_name", "hook_layer", "model_name") if key in cfg}
    meta.update(cfg.get("metadata") or {})
    return SAE(
        w_enc=w_enc.to(dtype), b_enc=b_enc.reshape(-1).to(dtype), w_dec=w_dec.to(dtype),
        b_dec=b_dec.reshape(-1).to(dtype), activation=activation, k=k,
        threshold=threshold.reshape(-1).to(dtype) if activation == "jumprelu" else None,
        apply_b_dec_to_input=(
            apply_b_dec_to_input if apply_b_dec_to_input is not None
            else bool(cfg.get("apply_b_dec_to_input", True)) if cfg_path else False
        ),
        norm_scaling_factor=_norm_factor(cfg, d_in, weights), metadata=meta,
    )


def save_sae(sae: SAE, directory: str | Path) -> Path:
    """Write ``cfg.json`` + ``sae_weights.safetensors`` in SAELens' layout; returns the folder."""
    from safetensors.torch import save_file

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    arch = {"relu": "standard", "topk": "topk", "jumprelu": "jumprelu"}[sae.activation]
    cfg: dict[str, Any] = {
        "architecture": arch,
        "d_in": sae.d_in,
        "d_sae": sae.d_sae,
        "dtype": str(sae.w_enc.dtype).removeprefix("torch."),
        "device": "cpu",
        "apply_b_dec_to_input": sae.apply_b_dec_to_input,
        "normalize_activations": "none" if sae.norm_scaling_factor is None else "expected_average_only_in",
        "activation_fn_str": "topk" if sae.activation == "topk" else "relu",
        "activation_fn_kwargs": {"k": sae.k} if sae.activation == "topk" else {},
    }
    if sae.activation == "topk":
        cfg["k"] = sae.k
    if sae.norm_scaling_factor is not None:
        cfg["norm_scaling_factor"] = sae.norm_scaling_factor
    for key in ("hook_name", "hook_layer", "model_name"):
        if key in sae.metadata:
            cfg[key] = sae.metadata[key]
    cfg["metadata"] = {k: v for k, v in sae.metadata.items() if k not in cfg}
    tensors = {
        "W_enc": sae.w_enc, "b_enc": sae.b_enc, "W_dec": sae.w_dec, "b_dec": sae.b_dec,
    }
    if sae.activation == "jumprelu":
        tensors["threshold"] = sae.threshold
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(out / WEIGHTS_FILE))
    (out / CFG_FILE).write_text(json.dumps(cfg, indent=2))
    return out


# ---------------------------------------------------------------- training
def train_topk_sae(
    activations: torch.Tensor,
    n_features: int,
    k: int,
    steps: int = 1000,
    lr: float = 1e-3,
    seed: int = 0,
    *,
    batch_size: int = 256,
) -> SAE:
    """Train a small TopK SAE (Gao et al., 2024; the Llama Scope architecture of App. A.5).

    Adam on the mean squared reconstruction error; ``b_dec`` starts at the data mean,
    decoder rows (one per feature, SAELens' ``W_dec [d_sae, d_in]``) start random with
    unit norm and ``W_enc = W_dec^T``; after every step the decoder rows are
    renormalised to unit norm. No auxiliary dead-feature loss. CPU-sized: meant
    for tests and small models, not for 128K-feature SAEs.
    """
    if activations.ndim != 2 or activations.shape[0] < 1:
        raise WhiteboxError(f"activations must be [n, d] with n >= 1, got shape {tuple(activations.shape)}")
    if not 1 <= k <= n_features:
        raise WhiteboxError(f"need 1 <= k <= n_features, got k={k}, n_features={n_features}")
    if steps < 1 or lr <= 0 or batch_size < 1:
        raise WhiteboxError("steps and batch_size must be >= 1 and lr > 0")
    x = activations.detach().float().cpu()
    n, d = x.shape
    gen = torch.Generator().manual_seed(seed)
    w_dec = torch.randn(n_features, d, generator=gen)
    w_dec = w_dec / w_dec.norm(dim=1, keepdim=True)
    params = {
        "w_enc": w_dec.T.clone().requires_grad_(),
        "b_enc": torch.zeros(n_features, requires_grad=True),
        "w_dec": w_dec.requires_grad_(),
        "b_dec": x.mean(dim=0).clone().requires_grad_(),
    }
    opt = torch.optim.Adam(params.values(), lr=lr)

    def build() -> SAE:
        return SAE(params["w_enc"], params["b_enc"], params["w_dec"], params["b_dec"], activation="topk", k=k)

    initial = reconstruction_mse(build(), x)
    for _ in range(steps):
        idx = torch.randint(0, n, (min(batch_size, n),), generator=gen)
        batch = x[idx]
        loss = ((build().reconstruct(batch) - batch) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            params["w_dec"] /= params["w_dec"].norm(dim=1, keepdim=True).clamp_min(1e-12)
    trained = SAE(
        *(params[name].detach().clone() for name in ("w_enc", "b_enc", "w_dec", "b_dec")),
        activation="topk", k=k,
    )
    trained.metadata.update({
        "trainer": "whitebox_eval.mui.sae.train_topk_sae", "steps": steps, "lr": lr, "seed": seed,
        "batch_size": batch_size, "initial_mse": initial, "final_mse": reconstruction_mse(trained, x),
    })
    return trained
