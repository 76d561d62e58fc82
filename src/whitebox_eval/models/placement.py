"""Where a model runs: the process's default placement (CLI ``--device`` / ``--device-map``),
each torchrun rank's GPU, the device a ``device_map`` entry computes on, and what config.yaml
records about it."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from whitebox_eval.errors import WhiteboxError


@dataclass
class Placement:
    """Where :func:`load_model` puts a model when the caller does not say (CLI: the
    ``--device`` / ``--device-map`` options before the sub-command)."""

    device: str = "auto"
    device_map: str | None = None


PLACEMENT = Placement()


def set_placement(device: str = "auto", device_map: str | None = None) -> None:
    """Set this process's default placement (``device``: auto, cpu, cuda, cuda:N, mps;
    ``device_map``: e.g. ``auto`` to split the layers over every visible GPU). A device
    this machine does not have, or a device map under torchrun, is refused here, before any
    work starts."""
    refuse_map_under_torchrun(device_map)
    resolve_device(device)
    PLACEMENT.device, PLACEMENT.device_map = device, device_map


def refuse_map_under_torchrun(device_map) -> None:
    """A device map spreads one model over every visible GPU; under torchrun every rank would
    spread its own copy over all of them. Refused: one process with the map, or ranks without it."""
    if device_map is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise WhiteboxError("--device-map is not for torchrun: every rank would spread its own copy of the model "
                            "over all the GPUs. Run one process with --device-map (a model too large for one GPU), "
                            "or torchrun without it (each rank loads the model on its own GPU)")


def rank_device(device: str | torch.device) -> str:
    """The device name this process means: ``auto`` -> cuda or cpu; under torchrun
    ``cuda`` -> ``cuda:LOCAL_RANK`` (each rank its own GPU), or ``cuda:0`` where the rank sees
    a single GPU (``CUDA_VISIBLE_DEVICES`` set per rank, or ranks sharing one GPU)."""
    device = str(device)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        local, visible = int(os.environ["LOCAL_RANK"]), torch.cuda.device_count()
        if visible == 1:
            device = "cuda:0"
        elif visible == 0 or local < visible:  # (none visible: resolve_device says so)
            device = f"cuda:{local}"
        else:
            raise WhiteboxError(f"torchrun local rank {local} has no GPU of its own: this process sees {visible} GPUs "
                                f"(cuda:0..{visible - 1}); start at most {visible} ranks per node, or give each rank "
                                "one GPU with CUDA_VISIBLE_DEVICES")
    return device


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``auto`` (or None) is the GPU when there is one, else the CPU; under torchrun
    ``cuda`` means this rank's GPU (``LOCAL_RANK``), otherwise the current GPU. A CUDA device
    always comes back with its index (``torch.cuda.set_device`` refuses a bare ``cuda``)."""
    device = rank_device(PLACEMENT.device if device is None else device)
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise WhiteboxError(f"unknown device {device!r}: use auto, cpu, cuda, cuda:N or mps") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise WhiteboxError(f"device {device!r} asked for, but this torch build sees no CUDA GPU; use --device cpu (or auto)")
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise WhiteboxError(f"device {device!r} asked for, but MPS is not available here; use --device cpu (or auto)")
    if resolved.type == "cuda" and resolved.index is None:
        resolved = torch.device("cuda", torch.cuda.current_device())
    return resolved


def execution_device(where: int | str | torch.device, device_map: dict | None = None) -> torch.device:
    """The device a ``device_map`` entry computes on. Offloaded "cpu"/"disk" entries compute on
    the map's main device, as accelerate's ``dispatch_model`` runs them: its first device that is
    neither (a GPU beside them), else the CPU."""
    if isinstance(where, int):
        return torch.device("cuda", where)
    if str(where) in ("cpu", "disk"):
        others = sorted({d for d in (device_map or {}).values() if str(d) not in ("cpu", "disk")}, key=str)
        return execution_device(others[0]) if others else torch.device("cpu")
    return torch.device(where)


def record() -> dict:
    """What config.yaml records about where this process computes, so a GPU run can be repeated
    and compared: the device (this rank's), the GPU's name, the ``--device-map`` option and the
    SDPA backends torch may choose from on that device (it picks one per call by the inputs)."""
    device = resolve_device(None)
    out = {"device": str(device), "device_map": PLACEMENT.device_map, "gpu": None, "sdpa_backends": None}
    if device.type == "cuda":
        b = torch.backends.cuda
        out["gpu"] = torch.cuda.get_device_name(device)
        out["sdpa_backends"] = [name for name, on in (("flash", b.flash_sdp_enabled()), ("efficient", b.mem_efficient_sdp_enabled()),
                                                      ("cudnn", b.cudnn_sdp_enabled()), ("math", b.math_sdp_enabled())) if on]
    return out
