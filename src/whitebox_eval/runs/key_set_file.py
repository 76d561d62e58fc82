"""The key-set file's low-level layout, read by the MUI suite and the report alike.

A key-set file holds every sample's key units (MUI, paper 001 sec. 2.2) in CSR form:
``indices`` (flat unit ids, ``layer * width + unit``), ``offsets`` (sample ``i``'s units are
``indices[offsets[i]:offsets[i + 1]]``) and a JSON ``meta`` (format, n_layers, width, kind,
sample_ids), as safetensors (metadata key ``whitebox_eval``) or ``.npz``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError

FORMAT = "whitebox-eval/keysets/v1"


def read_key_set_file(path: str | Path) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """``(indices, offsets, meta)`` of a key-set file; one clear error when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise WhiteboxError(f"key-set file not found: {path}")
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="numpy") as f:
                meta = json.loads((f.metadata() or {})["whitebox_eval"])
                indices, offsets = f.get_tensor("indices"), f.get_tensor("offsets")
        elif path.suffix == ".npz":
            with np.load(path) as z:
                meta = json.loads(str(z["meta"]))
                indices, offsets = z["indices"], z["offsets"]
        else:
            raise WhiteboxError(f"key-set file must end in .safetensors or .npz, got {path.name!r}")
    except (KeyError, ValueError, OSError) as exc:
        raise WhiteboxError(f"{path} is not a key-set file written by KeySets.save: {exc}") from exc
    if meta.get("format") != FORMAT:
        raise WhiteboxError(f"{path} has format {meta.get('format')!r}, expected {FORMAT!r}")
    return indices, offsets, meta
