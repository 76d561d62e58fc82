"""Datasets from the Hugging Face hub, exported once to their published local format.

Hub layouts: cais/mmlu, Rowan/hellaswag, allenai/ai2_arc, allenai/cosmos_qa,
pminervini/HaluEval (dialogue), mandarjoshi/trivia_qa (rc.nocontext). A dataset whose hub
rows need reshaping names its ``hub_row(row)`` in its record (:mod:`.registry`); the
others' hub rows already have their file layout. Loading a split's items by name is
:func:`whitebox_eval.tasks.loading.load_from_hub`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.lazy import resolve


def hub_row(name: str, row: dict[str, Any]) -> dict[str, Any] | list[str]:
    """``row`` of hub dataset ``name`` in the layout its local loader reads (its record's
    ``hub_row``, :mod:`.registry`; else the row as it is)."""
    from whitebox_eval.tasks.registry import record

    rec = record(name)
    return resolve(rec.hub_row)(row) if rec.hub_row else dict(row)


def hub_cache_dir() -> Path:
    """Where hub datasets are exported in their local formats (under the model cache root)."""
    from whitebox_eval.models.loading import cache_root

    return cache_root() / "datasets"


PREFIX = "hf:"


@dataclass(frozen=True)
class HubPath:
    """A hub dataset split given where a file goes: ``hf:DATASET[:CONFIG][@SPLIT]`` read once
    (the one place that knows the ``hf:`` form)."""

    dataset: str
    config: str = ""
    split: str | None = None

    @classmethod
    def parse(cls, path) -> HubPath | None:
        """``path`` as a hub path, or None for a local path (a str or ``Path``)."""
        if not isinstance(path, str) or not path.startswith(PREFIX):
            return None
        ident, at, split = path[len(PREFIX):].partition("@")
        dataset, _, config = ident.partition(":")
        return cls(dataset, config, split if at else None)

    def with_split(self, split: str) -> HubPath:
        return HubPath(self.dataset, self.config, split)

    @property
    def spec(self) -> str:
        """``DATASET[:CONFIG][@SPLIT]`` (without ``hf:``)."""
        return self.dataset + (f":{self.config}" if self.config else "") + (f"@{self.split}" if self.split is not None else "")

    def __str__(self) -> str:
        return PREFIX + self.spec


def location(path: str | Path) -> Path | HubPath:
    """A path given as text read once: a hub split, else a local path (expanded)."""
    return HubPath.parse(path) or Path(path).expanduser()


def hub_spec(spec: str, default_split: str) -> tuple[str, str, str]:
    """``[hf:]DATASET[:CONFIG][@SPLIT]`` -> (dataset id, config or ``""``, split or ``default_split``)."""
    h = HubPath.parse(spec if spec.startswith(PREFIX) else PREFIX + spec)
    return h.dataset, h.config, h.split or default_split


def datasets_load_dataset() -> Callable[..., Any]:
    """``datasets.load_dataset``, or one line saying to install it."""
    try:
        from datasets import load_dataset
    except ImportError:
        raise WhiteboxError("loading from the Hugging Face hub needs the `datasets` package: pip install datasets") from None
    return load_dataset


def export_split(key: str, spec: str | HubPath, *, load_dataset: Callable[..., Any] | None = None) -> Path:
    """The local file of hub split ``spec`` (a :class:`HubPath`, or ``[hf:]DATASET_ID[:CONFIG][@SPLIT]``;
    default split ``test``) in dataset ``key``'s published layout, exported once (written atomically)."""
    import csv as _csv

    if isinstance(spec, HubPath):
        dataset_id, config, split = spec.dataset, spec.config, spec.split or "test"
    else:
        dataset_id, config, split = hub_spec(spec, "test")
    # "v2": MMLU exports carry the subject column (exports without it are not reused)
    target = hub_cache_dir() / f"{key}-v2-{dataset_id.replace('/', '--')}-{config or 'default'}-{split}"
    target = target.with_suffix(".csv" if key == "mmlu" else ".jsonl")
    if not target.is_file():
        load_dataset = load_dataset or datasets_load_dataset()
        try:
            rows = load_dataset(dataset_id, config or None, split=split)
        except Exception as e:  # network, unknown id, unknown split: all end the same way for the user
            raise WhiteboxError(f"could not load {dataset_id!r} ({config or 'default'}, {split}) from the hub: {e}. "
                                "Offline, download the files and pass their local path") from e
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(target.suffix + ".partial")
        with tmp.open("w", newline="", encoding="utf-8") as f:
            if key == "mmlu":
                writer = _csv.writer(f)
                from whitebox_eval.tasks.mmlu import HUB_HEADER

                writer.writerow(HUB_HEADER)
                for row in rows:
                    writer.writerow(hub_row(key, row))
            else:
                for row in rows:
                    f.write(json.dumps(hub_row(key, row), ensure_ascii=False) + "\n")
        tmp.replace(target)
    return target


def local_file(key: str, source: Path | HubPath) -> Path:
    """``source`` (a task's parsed ``TaskSpec.source``) as a local file: a hub split is exported first
    (:func:`export_split`)."""
    return export_split(key, source) if isinstance(source, HubPath) else Path(source)
