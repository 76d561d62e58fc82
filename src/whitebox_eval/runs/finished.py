"""A finished run: one rule for "this run folder is done", and the folder read back.

A run is started when its folder holds ``config.yaml`` (``--resume`` continues it) and
finished when it also holds ``results.json`` (written last, atomically, once every pass is
done). ``reproduce`` reuses a child by this
rule and ``report``/``compare`` read a run's numbers by it; :func:`read` opens a finished
folder as a :class:`StudyResult` (what :mod:`whitebox_eval.studies` returns).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.runs.listing import RESULTS_FILE
from whitebox_eval.runs.provenance import CONFIG_FILE


def is_started(folder: str | Path) -> bool:
    """Whether ``folder`` is a run folder (its config.yaml written: ``--resume`` continues it)."""
    return (Path(folder) / CONFIG_FILE).is_file()


def is_finished(folder: str | Path) -> bool:
    """Whether ``folder`` is a run folder whose results are written."""
    return is_started(folder) and (Path(folder) / RESULTS_FILE).is_file()


class _Arrays(Mapping):
    """``arrays/*.npy`` by name, each read on first use."""

    def __init__(self, folder: Path) -> None:
        self._folder, self._cache = folder, {}

    def _names(self) -> list[str]:
        return sorted(p.stem for p in (self._folder / "arrays").glob("*.npy"))

    def __getitem__(self, name: str):
        import numpy as np

        if name not in self._cache:
            path = self._folder / "arrays" / f"{name}.npy"
            if not path.is_file():
                raise KeyError(f"{name!r}: the run has {', '.join(self._names()) or 'no arrays'}")
            self._cache[name] = np.load(path, allow_pickle=False)
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


@dataclass
class StudyResult:
    """A finished study: its folder, config, results.json, samples and arrays."""

    folder: Path
    config: dict[str, Any]
    results: dict[str, Any]
    samples: list[dict[str, Any]]
    arrays: Mapping[str, Any] = field(repr=False)

    @property
    def headline(self) -> dict[str, Any]:
        """results.json's ``headline`` block: the numbers the summary prints first."""
        return dict(self.results.get("headline") or {})


def read(folder: str | Path) -> StudyResult:
    """Open a finished run folder as a :class:`StudyResult`."""
    from whitebox_eval.runs.folder import RunFolder

    run = RunFolder.open(folder)
    return StudyResult(run.path, dict(run.config), run.load_results(), list(run.read_samples()), _Arrays(run.path))
