"""A ``.safetensors`` file checked from its header before anything reads it: what a model folder,
an adapter or an SAE load first (:func:`check_safetensors`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from whitebox_eval.errors import WhiteboxError

_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def _sized(entry: dict) -> bool:
    """Whether a header entry's offsets span exactly its shape x dtype (other dtypes: ordered offsets only)."""
    start, end = (int(v) for v in entry["data_offsets"])
    size = _DTYPE_BYTES.get(entry.get("dtype"))
    return 0 <= start <= end and (size is None or end - start == size * math.prod(int(d) for d in entry["shape"]))


def check_safetensors(path: Path | str) -> None:
    """Refuse, in one line naming the file, a ``.safetensors`` file that is empty,
    truncated or has a corrupted header (reads the header only)."""
    path = Path(path)
    size = path.stat().st_size
    problem = None
    if size < 8:
        problem = "the file is empty" if size == 0 else f"only {size} bytes"
    else:
        with path.open("rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if n > size - 8:
                problem = f"truncated: the header alone should take {n} bytes, the file has {size}"
            else:
                try:
                    header = json.loads(f.read(n))
                    entries = {k: v for k, v in header.items() if k != "__metadata__"}
                    need = 8 + n + max((int(v["data_offsets"][1]) for v in entries.values()), default=0)
                    wrong = [k for k, v in entries.items() if not _sized(v)]
                except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                    problem = "corrupted header"
                else:
                    problem = (f"corrupted header: {wrong[0]}'s offsets disagree with its shape and dtype" if wrong
                               else f"truncated: {size} bytes, the header promises {need}" if need > size else None)
    if problem:
        raise WhiteboxError(f"{path} is not a readable safetensors file ({problem}); download or convert it again")
