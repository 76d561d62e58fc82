"""SAEs on disk in SAELens' layout: a folder with ``cfg.json`` and
``sae_weights.safetensors`` holding ``W_enc [d_in, d_sae]``, ``b_enc [d_sae]``,
``W_dec [d_sae, d_in]``, ``b_dec [d_in]`` and, for JumpReLU, ``threshold [d_sae]``.
Loading is lenient: ``encoder.weight``/``decoder.weight`` (nn.Linear layout),
``log_threshold``, Gemma Scope's ``params.npz``, Llama Scope's ``hyperparams.json`` +
``checkpoints/final.safetensors`` (scalar ``jump_relu_threshold``, dataset-wise input norm) and
old/new SAELens config keys (``architecture``, ``activation_fn_str`` + ``activation_fn_kwargs.k``,
``k``, ``rescale_acts_by_decoder_norm``) are accepted. Parity with SAELens' own encode/decode is
tested on a fixture SAELens wrote (tests/fixtures/saelens).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.sae.encoding import SAE, Activation
from whitebox_eval.sae.file_checks import check_cfg, check_finite, read_cfg

CFG_FILE = "cfg.json"
WEIGHTS_FILE = "sae_weights.safetensors"
LLAMA_SCOPE_CFG = "hyperparams.json"
LLAMA_SCOPE_WEIGHTS = "checkpoints/final.safetensors"


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
        if (path / LLAMA_SCOPE_CFG).is_file() and (path / LLAMA_SCOPE_WEIGHTS).is_file():
            return path / LLAMA_SCOPE_WEIGHTS, path / LLAMA_SCOPE_CFG
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
    cfg = read_cfg(cfg_path) if cfg_path else {}
    if cfg_path is not None and cfg_path.name == LLAMA_SCOPE_CFG:
        cfg = check_cfg(_llama_scope_cfg(cfg, cfg_path), cfg_path)
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
    if threshold is None and cfg.get("jump_relu_threshold") is not None:
        threshold = torch.full((d_sae,), float(cfg["jump_relu_threshold"]))
    named = {"W_enc": w_enc, "b_enc": b_enc, "W_dec": w_dec, "b_dec": b_dec}
    check_finite({**named, **({"threshold": threshold} if threshold is not None else {})}, weights)
    if cfg.get("rescale_acts_by_decoder_norm"):
        # SAELens ranks and scales activations by ||W_dec_i|| and decodes f / ||W_dec_i||; folding the
        # norms into W_enc, b_enc (and W_dec) gives the same activations and reconstructions.
        norms = w_dec.norm(dim=1).clamp_min(1e-8)
        w_enc, b_enc, w_dec = w_enc * norms, b_enc * norms, w_dec / norms[:, None]
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


def _llama_scope_cfg(hp: dict[str, Any], source: Path) -> dict[str, Any]:
    """Llama Scope's ``hyperparams.json`` as SAELens-style config keys (as SAELens' loader reads it)."""
    act = str(hp.get("act_fn", "")).lower()
    if act not in ("jumprelu", "relu", "topk"):
        raise WhiteboxError(f"{source}: unsupported Llama Scope act_fn {hp.get('act_fn')!r}")
    cfg: dict[str, Any] = {
        "architecture": "standard" if act == "relu" else act, "d_in": hp.get("d_model"), "d_sae": hp.get("d_sae"),
        "apply_b_dec_to_input": bool(hp.get("apply_decoder_bias_to_pre_encoder", False)),
        "hook_name": hp.get("hook_point_in"), "normalize_activations": "none",
    }
    if act == "jumprelu":
        if hp.get("jump_relu_threshold") is None:
            raise WhiteboxError(f"{source}: a jumprelu Llama Scope SAE without jump_relu_threshold")
        cfg["jump_relu_threshold"] = hp["jump_relu_threshold"]
    if act == "topk":
        cfg["k"] = hp.get("top_k")
    norm = str(hp.get("norm_activation", "none")).lower()
    if norm == "dataset-wise":
        cfg["normalize_activations"] = "expected_average_only_in"
        cfg["dataset_average_activation_norm"] = hp.get("dataset_average_activation_norm") or {}
    elif norm not in ("none", ""):
        raise WhiteboxError(f"{source}: Llama Scope norm_activation {hp.get('norm_activation')!r} is not supported")
    match = re.search(r"blocks\.(\d+)\.", str(hp.get("hook_point_in", "")))
    if match:
        cfg["hook_layer"] = int(match.group(1))
    return cfg


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
