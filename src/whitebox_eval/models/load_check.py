"""A command's loading options checked before any model work (:func:`configure`): bad input is one
line naming the fix (exit 2); then :data:`~.load_options.LOAD` and the placement are set."""

from __future__ import annotations

import json
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.load_options import (
    ADAPTER_MODES, LOAD, LoadOptions, adapter_files, check_adapter_fits, check_quantization, parse_model_args, quantized,
    set_load)


def configure(model: str | None = None, *, models_root: str | None = None, model_args=(), adapter: str | None = None,
              adapter_mode: str = "merge", trust_remote_code: bool = False, allow_pickle: bool = False,
              device: str | None = None, device_map: str | None = None) -> LoadOptions:
    """Check a command's loading options before any model work (one line naming the fix for bad
    input), then set :data:`LOAD` and, where given, the placement. ``model``: the command's
    ``--model``, against which a revision and an adapter are checked."""
    if device is not None or device_map is not None:
        from whitebox_eval.models.placement import PLACEMENT, set_placement  # torch: only for a placement

        set_placement(device or PLACEMENT.device, device_map if device_map is not None else PLACEMENT.device_map)
    args = parse_model_args(model_args)
    if models_root is not None and not Path(models_root).expanduser().is_dir():
        raise WhiteboxError(f"--models-root {models_root}: no such folder")
    if adapter_mode not in ADAPTER_MODES:
        raise WhiteboxError(f"--adapter-mode {adapter_mode!r}: merge or keep")
    check_quantization(args, None)
    # a sub-command's options add to its group's (mui --adapter A masking): what is not given is kept
    options = set_load(models_root=models_root or LOAD.models_root, model_args=args or LOAD.model_args,
                       adapter=adapter or LOAD.adapter,
                       adapter_mode=adapter_mode if adapter_mode != "merge" else LOAD.adapter_mode,
                       trust_remote_code=trust_remote_code or LOAD.trust_remote_code,
                       allow_pickle=allow_pickle or LOAD.allow_pickle)
    args, adapter, adapter_mode = options.model_args, options.adapter, options.adapter_mode
    if adapter and quantized(args) and adapter_mode == "merge":
        raise WhiteboxError("a LoRA adapter cannot be merged into 4/8-bit weights; add --adapter-mode keep")
    if adapter_mode != "merge" and not adapter:
        raise WhiteboxError(f"--adapter-mode {adapter_mode} has no adapter to apply: give --adapter PATH or drop it")
    if model is not None:
        _check_revision(model, args)
        _check_remote_code(model, options.trust_remote_code)
        options.found_under = _found_under(model, options.models_root)
    if model is not None and ("@" in model or adapter):
        from whitebox_eval.models.loading import resolve_source  # torch: only where a model is read

        source, extra = resolve_source(model)  # a revision nowhere to be read is refused here
        if Path(source).parent.name == "snapshots":  # read from the hub cache: its commit pins the weights
            options.model_commit = Path(source).name
        if adapter:
            _, weights = adapter_files(adapter, allow_pickle)
            check_adapter_fits(adapter, weights, _model_config(source, extra, trust_remote_code))
    return options


def _check_revision(model: str, args: dict) -> None:
    """``--model-arg revision=`` must take effect: refused beside a different ``@REVISION`` and on a
    model read from a folder (bundled, local, a --models-root copy), where from_pretrained ignores it."""
    from whitebox_eval.models.hub_sources import split_revision

    wanted = args.get("revision")
    if wanted is None:
        return
    _, at = split_revision(model)
    if at is not None:
        if at != wanted:
            raise WhiteboxError(f"--model {model} and --model-arg revision={wanted} name two revisions: give one")
        return
    from whitebox_eval.models.loading import resolve_source

    source, _ = resolve_source(model)
    if Path(source).is_dir() or Path(source).is_file():
        raise WhiteboxError(f"--model-arg revision={wanted} has no effect on {model}, which is read from the folder "
                            f"{source}: a revision applies to a hub id (ORG/NAME@REVISION); drop it")


def _check_remote_code(model: str, trust: bool) -> None:
    """``--trust-remote-code`` must take effect: refused on a model read from a folder (bundled, local, a
    --models-root copy, a hub snapshot) whose config.json and tokenizer_config.json name no custom code
    (no ``auto_map``), where transformers never runs remote code. A hub id not on this machine is
    judged once downloaded, by transformers itself."""
    if not trust:
        return
    from whitebox_eval.models.loading import resolve_source

    source, _ = resolve_source(model)
    folder = Path(source)
    if not (folder / "config.json").is_file():
        return
    for name in ("config.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise WhiteboxError(f"{path} does not read as JSON ({e})") from None
        if isinstance(data, dict) and data.get("auto_map"):
            return
    raise WhiteboxError(f"--trust-remote-code has no effect on {model}: its config.json names no custom code "
                        f"(no auto_map in {folder}), so transformers runs none; drop it")


def _found_under(model: str, root: str | None) -> str | None:
    """The name ``model`` was found under in the ``--models-root`` folder (None: not read from there)."""
    from whitebox_eval.models.hub_sources import local_folder, models_root

    folder = local_folder(model, models_root(root)) if root else None
    return Path(folder).name if folder else None


def _model_config(source: str, extra: dict, trust_remote_code: bool) -> dict:
    """The model's config.json as a dict (a local folder's file; the hub's through transformers)."""
    path = Path(source) / "config.json"
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise WhiteboxError(f"{path} does not read as JSON ({e})") from None
    from transformers import AutoConfig

    kw = {k: extra[k] for k in ("revision", "subfolder") if k in extra}
    return AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code, **kw).to_dict()
