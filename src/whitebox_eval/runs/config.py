"""A study's config dataclass as the plain dict that ``config.yaml`` stores."""

from __future__ import annotations

import dataclasses
from typing import Any

from whitebox_eval.runs.plain_values import plain_value


def config_dict(cfg: Any, suite: str, **extra: Any) -> dict:
    """``cfg`` (a dataclass) as plain values: tuples become lists, nested dataclasses dicts,
    its ``volatile`` field (keys a resumed run may change, e.g. batch size) becomes
    ``_volatile``, and ``suite`` plus ``extra`` keys are added."""
    d = plain_value(dataclasses.asdict(cfg))
    d["_volatile"] = list(d.pop("volatile", []) or [])
    d["suite"] = suite
    d.update(extra)
    return d
