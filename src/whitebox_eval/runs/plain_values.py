"""Turn numpy, torch and other rich values into plain JSON/YAML-safe Python values."""

from __future__ import annotations

import dataclasses
import enum
import math
import sys
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import numpy as np


def plain_value(value: Any, *, nonfinite_to_none: bool = True) -> Any:
    """Return ``value`` as nested dicts/lists of str, int, float, bool and None.

    numpy scalars and arrays and torch tensors become numbers and lists, tuples and
    sets become lists (sets sorted), paths become strings, dataclasses become dicts and
    mapping keys become strings. With ``nonfinite_to_none`` NaN and ±inf become None
    (JSON has no literal for them); otherwise they stay floats (YAML has ``.nan``).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if nonfinite_to_none and not math.isfinite(value):
            return None
        return float(value)
    if isinstance(value, np.generic):
        return plain_value(value.item(), nonfinite_to_none=nonfinite_to_none)
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [plain_value(v, nonfinite_to_none=nonfinite_to_none) for v in value.tolist()]
        return plain_value(value.tolist(), nonfinite_to_none=nonfinite_to_none)
    torch = sys.modules.get("torch")  # a tensor can only exist if torch was imported
    if torch is not None and isinstance(value, torch.Tensor):
        return plain_value(value.detach().cpu().tolist(), nonfinite_to_none=nonfinite_to_none)
    if isinstance(value, Mapping):
        return {_plain_key(k): plain_value(v, nonfinite_to_none=nonfinite_to_none)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(v, nonfinite_to_none=nonfinite_to_none) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [plain_value(v, nonfinite_to_none=nonfinite_to_none) for v in value]
        return sorted(items, key=repr)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, enum.Enum):
        return plain_value(value.value, nonfinite_to_none=nonfinite_to_none)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain_value(dataclasses.asdict(value), nonfinite_to_none=nonfinite_to_none)
    raise TypeError(f"cannot store a value of type {type(value).__name__} ({value!r:.80}); "
                    "convert it to a number, string, list or dict first")


def _plain_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, np.generic):
        key = key.item()
    if isinstance(key, (int, float, bool, PurePath)) or key is None:
        return str(key)
    raise TypeError(f"mapping keys must be strings or numbers, got {type(key).__name__}")
