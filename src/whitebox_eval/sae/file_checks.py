"""What an SAE's files must hold before anything is encoded with them, each fault one line
naming the file: a config (``cfg.json``, Llama Scope's ``hyperparams.json``, Gemma Scope 2's
``config.json``) must be a JSON object whose keys we read hold the type we read them as
(keys we do not read are left alone: SAELens writes many), and every weight tensor must be
finite: a NaN in the weights is the file's fault, not the activations' or the dtype's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from whitebox_eval.errors import WhiteboxError

if TYPE_CHECKING:
    import torch

#: the config files an SAE folder may hold beside its weights (SAELens', Llama Scope's)
CONFIG_FILES = ("cfg.json", "hyperparams.json")

_INT = ("d_in", "d_model", "hidden_size", "d_sae", "dict_size", "n_features", "d_hidden", "k", "top_k",
        "hook_layer")
_NUMBER = ("norm_scaling_factor", "scaling_factor", "jump_relu_threshold")
_TEXT = ("architecture", "activation_fn_str", "activation_fn", "act_fn", "hook_name", "model_name",
         "normalize_activations", "hook_point_in", "norm_activation", "hf_hook_point_in")
_BOOL = ("apply_b_dec_to_input", "rescale_acts_by_decoder_norm", "apply_decoder_bias_to_pre_encoder")
_OBJECT = ("activation_fn_kwargs", "metadata", "dataset_average_activation_norm")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _wrong(path: Path, key: str, want: str, value: Any) -> WhiteboxError:
    return WhiteboxError(f"{path}: {key} must be {want}, not {_kind(value)} ({json.dumps(value)[:60]}); "
                         "the SAE's config is damaged or not an SAE config")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_cfg(data: Any, path: Path) -> dict[str, Any]:
    """``data`` (a parsed SAE config) as a dict whose read keys hold their types (null: absent)."""
    if not isinstance(data, dict):
        raise WhiteboxError(f"{path} holds {_kind(data)}, not a JSON object of SAE settings "
                            "(SAELens' cfg.json: d_in, d_sae, architecture ...)")
    for key, value in data.items():
        if value is None:
            continue
        if key in _INT and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            raise _wrong(path, key, "a whole number >= 0", value)
        if key in _NUMBER and not _is_number(value):
            raise _wrong(path, key, "a finite number", value)
        if key in _TEXT and not isinstance(value, str):
            raise _wrong(path, key, "a string", value)
        if key in _BOOL and not isinstance(value, bool):
            raise _wrong(path, key, "true or false", value)
        if key in _OBJECT and not isinstance(value, dict):
            raise _wrong(path, key, "an object", value)
    kwargs = data.get("activation_fn_kwargs") or {}
    if kwargs.get("k") is not None and not (isinstance(kwargs["k"], int) and not isinstance(kwargs["k"], bool)):
        raise _wrong(path, "activation_fn_kwargs.k", "a whole number", kwargs["k"])
    norm = (data.get("dataset_average_activation_norm") or {}).get("in")
    if norm is not None and not (_is_number(norm) and norm > 0):
        raise _wrong(path, "dataset_average_activation_norm.in", "a finite number > 0", norm)
    return data


def read_cfg(path: Path) -> dict[str, Any]:
    """An SAE config file read and checked (:func:`check_cfg`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WhiteboxError(f"{path} cannot be read ({exc}); download it again") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise WhiteboxError(f"{path} is not valid JSON: {exc}") from None
    return check_cfg(data, path)


def check_configs(path: Path) -> None:
    """The config files beside an SAE's weights (a folder, or a weights file's folder) checked
    without reading the weights (and without torch): a command does this before the model loads."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    for name in CONFIG_FILES:
        if (folder / name).is_file():
            read_cfg(folder / name)


def check_finite(tensors: dict[str, torch.Tensor], source: Path) -> None:
    """Refuse weights holding NaN or infinite values, naming the tensor and how many."""
    import torch

    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            continue
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            n_nan, n_inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
            what = " and ".join(x for x in (f"{n_nan} NaN" if n_nan else "", f"{n_inf} infinite" if n_inf else "") if x)
            raise WhiteboxError(f"{source}: the SAE weight {name} {tuple(t.shape)} holds {what} value(s) of "
                                f"{t.numel()}: the weights file is damaged (or saved from a diverged training), "
                                "not the activations; download or train the SAE again")
