"""How a model is loaded beyond its name: ``--models-root``, ``--model-arg KEY=VALUE``, ``--adapter``,
``--trust-remote-code``, ``--allow-pickle``. The command layer sets :data:`LOAD`, the default of every
:func:`~whitebox_eval.models.loading.load_model` call (as ``--device`` sets the placement), after
:func:`check` has refused bad input in one line before any model work; config.yaml records
:func:`record` (``model_load``, compared on ``--resume``: an adapter or a quantization changes the
numbers).

``--model-arg`` takes the keys of :data:`MODEL_ARGS` only (what ``from_pretrained`` is passed):
``load_in_4bit=true`` / ``load_in_8bit=true`` become a bitsandbytes quantization config, on CUDA only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError


def _bool(text: str) -> bool:
    low = str(text).strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ValueError("true or false")


def _choice(*allowed: str):
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(" or ".join(allowed))
        return text
    return parse


#: ``--model-arg`` keys and how each value is read (the rest of from_pretrained's keywords are refused)
MODEL_ARGS = {
    "load_in_4bit": _bool, "load_in_8bit": _bool,
    "bnb_4bit_quant_type": _choice("nf4", "fp4"), "bnb_4bit_use_double_quant": _bool,
    "bnb_4bit_compute_dtype": _choice("float32", "bfloat16", "float16"),
    "attn_implementation": _choice("sdpa", "eager"),
    "revision": str, "subfolder": str, "low_cpu_mem_usage": _bool,
}
QUANT_KEYS = ("load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant", "bnb_4bit_compute_dtype")
ADAPTER_MODES = ("merge", "keep")


@dataclass
class LoadOptions:
    """What :func:`load_model` does beyond the model's name (CLI: the options every loading command has)."""

    models_root: str | None = None
    model_args: dict[str, Any] = field(default_factory=dict)
    adapter: str | None = None
    adapter_mode: str = "merge"
    trust_remote_code: bool = False
    allow_pickle: bool = False
    model_commit: str | None = None  # the hub-cache snapshot an ORG/NAME@REVISION resolved to (recorded)
    found_under: str | None = None  # the --models-root entry the model was read from (recorded)


LOAD = LoadOptions()
_FIELDS = ("models_root", "model_args", "adapter", "adapter_mode", "trust_remote_code", "allow_pickle", "model_commit",
           "found_under")


def parse_model_args(items) -> dict[str, Any]:
    """``KEY=VALUE`` texts -> {key: value}, each key one of :data:`MODEL_ARGS`; one line otherwise."""
    out: dict[str, Any] = {}
    items = [part for item in items or () for part in str(item).split(",") if part.strip()]  # lm-eval's k=v,k=v
    for item in items:
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise WhiteboxError(f"--model-arg {item!r}: give KEY=VALUE, e.g. --model-arg load_in_4bit=true")
        if key not in MODEL_ARGS:
            raise WhiteboxError(f"--model-arg {key}: not one of the keys passed to from_pretrained here "
                                f"({', '.join(MODEL_ARGS)})")
        try:
            out[key] = MODEL_ARGS[key](value.strip())
        except ValueError as e:
            raise WhiteboxError(f"--model-arg {item!r}: the value must be {e}") from None
    if out.get("load_in_4bit") and out.get("load_in_8bit"):
        raise WhiteboxError("--model-arg load_in_4bit and load_in_8bit exclude each other: give one")
    if any(k.startswith("bnb_4bit") for k in out) and not out.get("load_in_4bit"):
        raise WhiteboxError("--model-arg bnb_4bit_* applies with load_in_4bit=true only")
    return out


def quantized(args: dict[str, Any]) -> bool:
    return bool(args.get("load_in_4bit") or args.get("load_in_8bit"))


def check_quantization(args: dict[str, Any], device) -> None:
    """A quantized load needs a CUDA device and bitsandbytes: refused in one line otherwise."""
    if not quantized(args):
        return
    from whitebox_eval.models.placement import resolve_device

    if resolve_device(device).type != "cuda":
        raise WhiteboxError("--model-arg load_in_4bit/load_in_8bit runs on a CUDA GPU only (bitsandbytes); on the CPU "
                            "drop it and use --dtype bfloat16 to halve memory")
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        raise WhiteboxError("--model-arg load_in_4bit/load_in_8bit needs bitsandbytes: pip install bitsandbytes") from None


def quantization_config(args: dict[str, Any], dtype):
    """transformers' BitsAndBytesConfig for ``args`` (compute dtype: bnb_4bit_compute_dtype, else the run's dtype)."""
    import torch
    from transformers import BitsAndBytesConfig

    if args.get("load_in_8bit"):
        return BitsAndBytesConfig(load_in_8bit=True)
    compute = getattr(torch, args["bnb_4bit_compute_dtype"]) if "bnb_4bit_compute_dtype" in args else dtype
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=compute,
                              bnb_4bit_quant_type=args.get("bnb_4bit_quant_type", "nf4"),
                              bnb_4bit_use_double_quant=bool(args.get("bnb_4bit_use_double_quant", False)))


def from_pretrained_kwargs(args: dict[str, Any]) -> dict[str, Any]:
    """The keys passed on as they are (the quantization keys become one config)."""
    return {k: v for k, v in args.items() if k not in QUANT_KEYS}


# ---- adapters --------------------------------------------------------------------------------
ADAPTER_CONFIG = "adapter_config.json"


def adapter_files(path: str | Path, allow_pickle: bool = False) -> tuple[dict, Path]:
    """(adapter_config.json, weights file) of a PEFT LoRA folder; one line naming the fix otherwise."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise WhiteboxError(f"--adapter {path}: no such folder (a PEFT adapter folder holding {ADAPTER_CONFIG})")
    try:
        cfg = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WhiteboxError(f"--adapter {path}: no {ADAPTER_CONFIG} (save the adapter with peft's save_pretrained)") from None
    except (OSError, ValueError) as e:
        raise WhiteboxError(f"--adapter {path}: {ADAPTER_CONFIG} does not read as JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise WhiteboxError(f"--adapter {path}: {ADAPTER_CONFIG} holds a {type(cfg).__name__}, not the mapping of "
                            "settings peft writes (peft_type, r, target_modules, ...)")
    if str(cfg.get("peft_type", "")).upper() != "LORA":
        raise WhiteboxError(f"--adapter {path}: a {cfg.get('peft_type')!r} adapter; only LoRA adapters are read")
    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        pickled = folder / "adapter_model.bin"
        if not pickled.is_file():
            raise WhiteboxError(f"--adapter {path}: no adapter_model.safetensors")
        if not allow_pickle:
            raise WhiteboxError(f"--adapter {path} holds only a pickle (adapter_model.bin), which can run code when "
                                "loaded: convert it to safetensors, or pass --allow-pickle if you trust it")
        weights = pickled
    else:
        from whitebox_eval.models.safetensors_files import check_safetensors

        try:
            check_safetensors(weights)  # a truncated or corrupt file: one line, before any run folder
        except WhiteboxError as error:
            raise WhiteboxError(f"--adapter {path}: {error}") from None
    return cfg, weights


def check_adapter_fits(path: str | Path, weights: Path, config: dict) -> None:
    """Refuse an adapter made for another base model, before loading it: its LoRA matrices must fit
    the model's widths (hidden, MLP, heads x head_dim) and its layer indices the model's depth."""
    import re

    if weights.suffix != ".safetensors":
        return  # a pickle's shapes show only when it is loaded (--allow-pickle)
    with weights.open("rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    hidden = config.get("hidden_size") or config.get("n_embd")
    heads = config.get("num_attention_heads") or config.get("n_head")
    head_dim = config.get("head_dim") or (hidden // heads if hidden and heads else None)
    kv = config.get("num_key_value_heads") or heads
    ff = config.get("intermediate_size") or config.get("n_inner") or (4 * hidden if hidden else None)
    layers = config.get("num_hidden_layers") or config.get("n_layer")
    widths = {w for w in (hidden, ff, heads and head_dim and heads * head_dim, kv and head_dim and kv * head_dim,
                          hidden and 3 * hidden, ff and 2 * ff, heads and head_dim and kv and (heads + 2 * kv) * head_dim)
              if w}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape = entry.get("shape", [])
        depth = re.search(r"\.(?:layers|h)\.(\d+)\.", name)
        if layers and depth and int(depth.group(1)) >= layers:
            raise WhiteboxError(f"--adapter {path} adapts layer {depth.group(1)}, the model has {layers}: an adapter "
                                f"for another base model ({config.get('_name_or_path') or 'this model'} is the base)")
        width = shape[1] if "lora_A" in name and len(shape) == 2 else shape[0] if "lora_B" in name and shape else None
        if widths and width is not None and width not in widths:
            raise WhiteboxError(f"--adapter {path}: {name} is {width} wide, which no projection of the model is "
                                "(an adapter for another base model); give the adapter trained on this model")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 23), b""):
            h.update(block)
    return h.hexdigest()


def record(options: LoadOptions | None = None) -> dict:
    """config.yaml's ``model_load``: only what differs from a plain load (empty for one)."""
    o = LOAD if options is None else options
    out: dict[str, Any] = {}
    if o.model_args:
        out["model_args"] = dict(sorted(o.model_args.items()))
    if o.adapter:
        _, weights = adapter_files(o.adapter, o.allow_pickle)
        out["adapter"] = {"path": str(Path(o.adapter).expanduser().resolve()), "mode": o.adapter_mode,
                          "sha256": file_sha256(weights)}
    if o.trust_remote_code:
        out["trust_remote_code"] = True
    if o.model_commit:
        out["model_commit"] = o.model_commit
    if o.found_under:  # where the model was found: the entry's name, the folder never as an absolute path
        out["models_root"] = {"found_under": o.found_under, **_root_text(o.models_root)}
    return {"model_load": out} if out else {}


def _root_text(root: str) -> dict:
    """``{"folder": ...}``: the --models-root folder as a re-run can name it, relative to the working
    folder or the home folder (``~/...``); nothing where only an absolute path would name it."""
    path = Path(root).expanduser().resolve()
    for base, prefix in ((Path.cwd(), ""), (Path.home(), "~/")):
        try:
            return {"folder": prefix + (path.relative_to(base).as_posix() or ".")}
        except ValueError:
            continue
    return {}


def reset() -> None:
    """Back to a plain load (each ``whitebox-eval`` invocation starts here)."""
    set_load(**{f: getattr(LoadOptions(), f) for f in _FIELDS})


def set_load(**kw) -> LoadOptions:
    """Set this process's :data:`LOAD` (fields of :class:`LoadOptions`); returns the new value."""
    new = replace(LOAD, **kw)
    for f in _FIELDS:
        setattr(LOAD, f, getattr(new, f))
    return LOAD

