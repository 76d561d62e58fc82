"""Load a causal LM from a bundled name, a local folder, a ``.gguf`` file or a hub id.

Loading is safe by default: safetensors only and no remote code. Pickle checkpoints
(``*.bin``, ``*.pt``) need ``allow_pickle=True``; custom modelling code needs
``trust_remote_code=True``.

GGUF files are dequantized once by transformers and cached as safetensors under
:func:`cache_root`, so later loads take seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.architectures import Architecture
from whitebox_eval.models import placement
from whitebox_eval.models.bundled import BUNDLED, bundled_gguf_path
from whitebox_eval.models.safetensors_files import check_safetensors  # noqa: F401 (loading.check_safetensors)
from whitebox_eval.models.placement import execution_device, refuse_map_under_torchrun, resolve_device

log = logging.getLogger(__name__)

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")


@dataclass
class LoadedModel:
    """A model ready for the engine: the HF model, its tokenizer and its description."""

    model: Any
    tokenizer: Any
    arch: Architecture
    spec: str
    source: str
    load_key: tuple | None = None
    """What :func:`load_model` was asked for (spec, dtype, placement, options): :func:`hand_over`'s key."""

    @property
    def device(self) -> torch.device:
        """Where inputs go: the device the token embedding computes on. Under a device map that
        is what accelerate's hook on it says (an offloaded embedding computes on the map's GPU),
        else where its weight is, else the map's entry for it."""
        embed = self.arch.embed
        where = getattr(getattr(embed, "_hf_hook", None), "execution_device", None)
        if where is not None:
            return execution_device(where)
        placed = getattr(self.model, "hf_device_map", None)
        if embed.weight.device.type != "meta" or not placed:
            return embed.weight.device
        name = self.arch.family.embed
        where = next((d for m, d in sorted(placed.items(), key=lambda kv: -len(kv[0]))
                      if m == "" or name == m or name.startswith(m + ".")), None)
        return embed.weight.device if where is None else execution_device(where, placed)

    @property
    def name(self) -> str:
        return self.spec

    @property
    def stop_ids(self) -> tuple[int, ...]:
        """Token ids that end a generation, sorted: the tokenizer's EOS and the generation
        config's EOS ids (e.g. an instruct model's end-of-turn token), as HF ``generate`` stops."""
        ids: set[int] = set()
        for eos in (getattr(self.tokenizer, "eos_token_id", None),
                    getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)):
            ids.update([] if eos is None else [int(eos)] if isinstance(eos, int) else [int(e) for e in eos])
        return tuple(sorted(ids))

    @property
    def end_id(self) -> int | None:
        """The token that closes a trained answer (fine-tuning, contamination): the first stop id,
        or None where the model has none (then an answer ends with its last token)."""
        return self.stop_ids[0] if self.stop_ids else None

    @property
    def pad_id(self) -> int:
        """The id that fills left pads and finished rows: the tokenizer's pad, else its EOS
        (else the first stop id, else 0; a pad is masked and a finished row's input unused)."""
        for t in (getattr(self.tokenizer, "pad_token_id", None), getattr(self.tokenizer, "eos_token_id", None)):
            if t is not None:
                return int(t)
        return self.stop_ids[0] if self.stop_ids else 0


def cache_root() -> Path:
    """Where dequantized GGUF models are cached (``$WHITEBOX_EVAL_CACHE`` overrides)."""
    env = os.environ.get("WHITEBOX_EVAL_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "whitebox_eval"


def _gguf_cache_dir(gguf: Path) -> Path:
    """The cache folder of ``gguf``: keyed by the SHA-256 of the file's whole content, so a
    different file under the same name (re-quantised, fine-tuned) never meets old weights."""
    return cache_root() / "gguf" / f"{gguf.stem}-{gguf_sha256(gguf)[:16]}"


def gguf_sha256(gguf: Path) -> str:
    """SHA-256 of the whole file, computed once: the digest is recorded under the cache's
    ``hashes/`` with the file's size, mtime and inode, and reused only while all three
    are unchanged (otherwise the file is hashed again)."""
    gguf = Path(gguf).resolve()
    st = gguf.stat()
    stamp = {"path": str(gguf), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}
    record = cache_root() / "gguf" / "hashes" / f"{hashlib.sha256(str(gguf).encode()).hexdigest()[:24]}.json"
    try:
        known = json.loads(record.read_text(encoding="utf-8"))
        if {k: known.get(k) for k in stamp} == stamp and len(str(known.get("sha256", ""))) == 64:
            return str(known["sha256"])
    except (OSError, ValueError):
        pass
    h = hashlib.sha256()
    with gguf.open("rb") as f:
        for block in iter(lambda: f.read(1 << 23), b""):
            h.update(block)
    digest = h.hexdigest()
    try:  # best effort: without the record the file is simply hashed again next time
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**stamp, "sha256": digest}) + "\n", encoding="utf-8")
        os.replace(tmp, record)
    except OSError:
        pass
    return digest


def _dequantize_gguf_to_cache(gguf: Path, target: Path) -> None:
    """Dequantize a GGUF file with transformers and save it as safetensors in ``target``, once
    (:func:`whitebox_eval.models.cache_entries.fill_once`: several processes at once, e.g. torchrun
    ranks on a cold cache, wait for the first; a killed one leaves no half cache)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from whitebox_eval.models.cache_entries import fill_once

    def build(tmp: Path) -> None:
        log.info("dequantizing %s once (later loads read the safetensors cache %s)", gguf, target)
        try:
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        except (OSError, ValueError, KeyError) as e:
            raise WhiteboxError(f"could not read GGUF file {gguf}: {e}") from e
        # The weights are already float; transformers still marks the model as quantized
        # and refuses to save it. Clearing the GGUF quantizer makes it a plain model.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        # under torchrun save_pretrained writes nothing on a rank other than 0; here every rank
        # that gets the lock first writes the cache the others then read
        model.should_save_on_this_rank = lambda is_main_process: True
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / "SOURCE").write_text(f"{gguf}\nsha256 {gguf_sha256(gguf)}\n")
        if not (tmp / "config.json").is_file() or not any(tmp.glob("*.safetensors")):
            raise WhiteboxError(f"dequantising {gguf} wrote no model files to {tmp}")

    fill_once(target, lambda folder: (folder / "config.json").is_file(), build)


def _weights_kind(folder: Path) -> str:
    names = [p.name for p in folder.iterdir()]
    if any(n.endswith(".safetensors") or n == "model.safetensors.index.json" for n in names):
        return "safetensors"
    if any(n.endswith(PICKLE_SUFFIXES) for n in names):
        return "pickle"
    if any(n.endswith(".gguf") for n in names):
        return "gguf"
    return "none"


def _refused_pickle_message(source: str, exc: Exception) -> str:
    files = ", ".join(str(p) for p in sorted(Path(source).glob("*")) if p.name.endswith(PICKLE_SUFFIXES)) or source
    what = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
    return (f"{files} holds Python objects beyond tensors" + (f" ({what.group(1)})" if what else "")
            + ", which torch's weights-only loader refuses even with --allow-pickle (whitebox-eval never "
            "runs arbitrary pickle code); re-save it as a plain state_dict of tensors, or as safetensors")


def _looks_like_path(spec: str) -> bool:
    """A spec that can only be a local path (a hub id is ``org/name``, never ``./x`` or ``/x``)."""
    return spec.startswith((".", "/", "~")) or spec.endswith(".gguf")


def resolve_source(spec: str, *, allow_pickle: bool | None = None, models_root: str | None = None) -> tuple[str, dict]:
    """Turn a user spec into (folder-or-hub-id, extra from_pretrained kwargs).

    A hub id may carry a revision, ``org/name@revision`` (:mod:`.hub_sources`: a ``models_root``
    copy, the hub cache offline, the hub online). Raises WhiteboxError for a missing path, a
    folder without weights, a revision nowhere to be read, or a pickle checkpoint without
    ``allow_pickle``. ``allow_pickle`` / ``models_root`` default to :data:`.load_options.LOAD`.
    """
    from whitebox_eval.models.hub_sources import models_root as root_folder, resolve_hub
    from whitebox_eval.models.load_options import LOAD

    allow_pickle = LOAD.allow_pickle if allow_pickle is None else allow_pickle
    root = root_folder(LOAD.models_root if models_root is None else models_root)
    if spec not in BUNDLED and not _looks_like_path(spec) and not Path(spec).expanduser().exists() and \
            (root is not None or "@" in spec):
        source, extra = resolve_hub(spec, root, _offline_reason() if "@" in spec else None)
        if Path(source).is_dir():  # a --models-root copy or a hub-cache snapshot: checked as any folder
            return resolve_source(source, allow_pickle=allow_pickle)
        return source, {"use_safetensors": True, **extra}
    if spec in BUNDLED:
        gguf = bundled_gguf_path(spec)
        return _cached_gguf(gguf), {}
    path = Path(spec).expanduser()
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise WhiteboxError(f"GGUF file not found: {spec}")
        return _cached_gguf(path), {}
    if path.is_dir():
        if not (path / "config.json").is_file():
            ggufs = sorted(path.glob("*.gguf"))
            if ggufs:
                return _cached_gguf(ggufs[0]), {}
            if (path / "config.yaml").is_file():
                raise WhiteboxError(f"{spec} is a run folder without trained weights: a finetune run writes them when "
                                    "its training ends (continue it with --resume), no other study's folder is a model")
            raise WhiteboxError(f"{spec} is a folder but has no config.json: point at a Hugging Face model folder, a .gguf file, or a bundled name ({', '.join(BUNDLED)})")
        kind = _weights_kind(path)
        if kind == "safetensors":
            for file in sorted(path.glob("*.safetensors")):
                check_safetensors(file)
            return str(path), {"use_safetensors": True}
        if kind == "pickle":
            if not allow_pickle:
                raise WhiteboxError(
                    f"{spec} holds only pickle weights (*.bin/*.pt), which can run arbitrary code when loaded. "
                    "Convert them to safetensors, or pass allow_pickle=True (CLI: --allow-pickle) if you trust the file."
                )
            return str(path), {"use_safetensors": False}
        raise WhiteboxError(f"no weights found in {spec}: expected *.safetensors (or pickle *.bin with --allow-pickle)")
    if _looks_like_path(spec) or path.exists():
        raise WhiteboxError(f"model path not found: {spec}")
    return spec, {"use_safetensors": True}


def _cached_gguf(gguf: Path) -> str:
    target = _gguf_cache_dir(gguf)
    if not (target / "config.json").is_file():
        _dequantize_gguf_to_cache(gguf, target)
    return str(target)


def _offline_reason() -> str | None:
    """Why the hub is not to be asked now (offline mode included), or None."""
    from huggingface_hub import constants

    return "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else hub_unreachable_reason()


def hub_unreachable_reason() -> str | None:
    """Why the hub cannot be used right now (offline mode or no DNS), or None.

    Checked before loading so an offline user gets the error at once instead of
    after the client's retries.
    """
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return None  # transformers will look in the local hub cache only
    host = urlparse(constants.ENDPOINT).hostname or ""
    try:
        socket.getaddrinfo(host, 443)
    except OSError as e:
        return f"cannot reach {host} ({e})"
    return None


#: the weight dtypes a user can ask for (CLI ``--dtype``); ``auto`` is resolved by :func:`resolve_dtype`
DTYPES = ("auto", "float32", "bfloat16", "float16")


def resolve_dtype(dtype: str | torch.dtype, spec: str | None = None, device: str | torch.device | None = None) -> str:
    """The weight dtype a run uses, by name. ``auto``: float32 on the CPU (bf16 matmuls are slow
    there and gain nothing); on a GPU the checkpoint's own dtype (its config.json), float32
    when it declares none. Scores are float32 whatever this is (the engine hands out float32)."""
    if isinstance(dtype, torch.dtype):
        dtype = str(dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        raise WhiteboxError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    if dtype != "auto":
        return dtype
    if resolve_device(device).type == "cpu" or spec is None:
        return "float32"
    from transformers import AutoConfig

    source, extra = resolve_source(spec)
    declared = getattr(AutoConfig.from_pretrained(source, **{k: extra[k] for k in ("revision",) if k in extra}), "dtype", None)
    name = str(declared).removeprefix("torch.") if declared is not None else "float32"
    return name if name in DTYPES else "float32"


#: models loaded before the run that needs them (``--batch-size auto``'s probe), by load key
_HANDED: dict[tuple, LoadedModel] = {}


def hand_over(loaded: LoadedModel) -> None:
    """Keep ``loaded`` for the next :func:`load_model` asked for the same spec, dtype, placement
    and loading options, which takes it instead of loading again (once: it is then forgotten)."""
    if loaded.load_key is not None:
        _HANDED[loaded.load_key] = loaded


def load_model(
    spec: str,
    *,
    dtype: str | torch.dtype = "auto",
    device: str | torch.device | None = None,
    device_map: str | dict | None = None,
    attn_implementation: str = "auto",
    allow_pickle: bool | None = None,
    trust_remote_code: bool | None = None,
    options=None,
) -> LoadedModel:
    """Load ``spec`` (bundled name, folder, ``.gguf`` path or hub id) for the engine.

    ``dtype``: ``auto`` (float32 on the CPU, the checkpoint's dtype on a GPU), ``float32``,
    ``bfloat16`` or ``float16`` (see :func:`resolve_dtype`). ``device`` / ``device_map``
    default to :data:`~whitebox_eval.models.placement.PLACEMENT` (``auto``: the GPU when there is one). ``device_map`` (accelerate; e.g. ``"auto"``) splits the layers over
    several devices; the engine's captures and edits follow each layer's device. The
    model is put in eval mode. ``attn_implementation`` is what runs when the
    engine has nothing to edit in a layer: ``auto`` picks ``sdpa``, or ``eager`` for
    families that soft-cap attention logits (gemma2), which SDPA cannot do.

    ``options`` (:class:`~.load_options.LoadOptions`, default :data:`~.load_options.LOAD`, what the
    CLI's loading options set): ``--models-root``, ``--model-arg`` (passed to ``from_pretrained``;
    ``load_in_4bit``/``load_in_8bit`` as a bitsandbytes config, CUDA only), ``--adapter`` (a PEFT
    LoRA folder merged into the loaded weights, or kept as LoRA layers), ``allow_pickle``,
    ``trust_remote_code`` (the keywords here win over ``options``).
    """
    import sys

    from whitebox_eval.models import load_options as lo

    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if not sys.stderr.isatty():  # a log file gets our progress lines, not transformers' \r bars
        hf_logging.disable_progress_bar()

    opts = lo.LOAD if options is None else options
    allow_pickle = opts.allow_pickle if allow_pickle is None else allow_pickle
    trust_remote_code = opts.trust_remote_code if trust_remote_code is None else trust_remote_code
    device_map = placement.PLACEMENT.device_map if device_map is None else device_map
    refuse_map_under_torchrun(device_map)
    lo.check_quantization(opts.model_args, device)
    source, extra = resolve_source(spec, allow_pickle=allow_pickle, models_root=opts.models_root)
    torch_dtype = getattr(torch, resolve_dtype(dtype, spec, device))
    key = (spec, str(torch_dtype), str(device), repr(device_map), attn_implementation, allow_pickle, trust_remote_code,
           repr(opts))
    if (kept := _HANDED.pop(key, None)) is not None:
        return kept
    extra = {**extra, **lo.from_pretrained_kwargs(opts.model_args)}
    attn_implementation = extra.pop("attn_implementation", attn_implementation)
    if lo.quantized(opts.model_args):
        extra["quantization_config"] = lo.quantization_config(opts.model_args, torch_dtype)
    if device_map is None:  # loaded straight onto the device: never a whole copy in host memory first
        where = resolve_device(device)
        if where.type == "cuda":
            torch.cuda.set_device(where)  # this rank's GPU is the current one (kernels, caches, memory stats)
        device_map = {"": str(where)}
    is_hub = not Path(source).exists()
    if is_hub and (reason := hub_unreachable_reason()):
        raise WhiteboxError(
            f"{spec!r} is not a bundled name or a local path, and the Hugging Face hub is unavailable: {reason}. "
            f"Offline, use a bundled model ({', '.join(BUNDLED)}), a local model folder, or a .gguf file."
        )
    began = time.monotonic()  # a run shows these lines (runs/progress.py): nothing else moves while weights load
    log.info("loading %s (%s%s) ...", spec, str(torch_dtype).removeprefix("torch."),
             f", adapter {Path(opts.adapter).name}" if opts.adapter else "")
    try:
        cfg_kw = {k: extra[k] for k in ("revision", "subfolder") if k in extra}
        if attn_implementation == "auto":
            cfg = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code, **cfg_kw)
            attn_implementation = "eager" if getattr(cfg, "attn_logit_softcapping", None) else "sdpa"
        tok = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code,
                                            **({"revision": extra["revision"]} if "revision" in extra else {}))
        model = AutoModelForCausalLM.from_pretrained(
            source,
            dtype=torch_dtype,
            attn_implementation=attn_implementation,
            trust_remote_code=trust_remote_code,
            device_map=device_map,
            **extra,
        )
    except pickle.UnpicklingError as e:
        raise WhiteboxError(_refused_pickle_message(source, e)) from None
    except SafetensorError as e:
        raise WhiteboxError(f"a .safetensors file of {source} is unreadable ({e}); download or convert it again") from None
    except (OSError, ValueError) as e:
        if is_hub:
            raise WhiteboxError(
                f"could not load {spec!r} from the Hugging Face hub ({type(e).__name__}: {str(e).splitlines()[0]}). "
                f"Offline, use a bundled model ({', '.join(BUNDLED)}), a local model folder, or a .gguf file."
            ) from e
        if "trust_remote_code" in str(e):
            raise WhiteboxError(f"{spec} needs custom modelling code; pass trust_remote_code=True (CLI: --trust-remote-code) if you trust it") from e
        raise WhiteboxError(f"could not load model from {source}: {e}") from e
    if opts.adapter:
        from whitebox_eval.models.adapters import attach_adapter

        model = attach_adapter(model, opts.adapter, opts.adapter_mode, allow_pickle)
    model.eval()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    arch = Architecture.of(model)
    log.info("loaded %s in %.1f s", spec, time.monotonic() - began)
    return LoadedModel(model=model, tokenizer=tok, arch=arch, spec=spec, source=source, load_key=key)
