"""What a report shows of one run folder, read once: config, results, samples, plots, arrays."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.finished import is_finished, is_started
from whitebox_eval.runs.folder import ARRAYS_DIR, PLOTS_DIR, RunFolder

DEFAULT_SAMPLE_CAP = 200
"""Samples shown per run in the viewer (the rest are counted, not shown)."""

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
"""Plot files embedded in the page (by suffix); other files in plots/ are only listed."""


@dataclass
class ArrayInfo:
    """Name, shape and dtype of one ``arrays/*.npy`` (read from the header only)."""

    name: str
    shape: tuple[int, ...] | None
    dtype: str


@dataclass
class RunData:
    """One run folder, loaded for the report."""

    path: Path
    config: dict[str, Any]
    results: dict[str, Any] | None
    samples: list[dict[str, Any]]
    n_samples: int
    plots: list[Path]
    other_plot_files: list[Path] = field(default_factory=list)
    arrays: list[ArrayInfo] = field(default_factory=list)
    results_error: str | None = None  # why results.json could not be read (corrupted), shown on the page

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def suite(self) -> str | None:
        value = self.config.get("suite")
        return None if value is None else str(value)

    @property
    def model(self) -> str | None:
        value = self.config.get("model")
        return None if value is None else str(value)

    @property
    def task(self) -> str | None:
        value = self.config.get("task", self.config.get("tasks"))
        if value is None:
            return None
        return ",".join(map(str, value)) if isinstance(value, list) else str(value)

    @property
    def headline(self) -> dict[str, Any]:
        """The headline metrics in their order ({} when the run has no results yet)."""
        head = (self.results or {}).get("headline")
        return dict(head) if isinstance(head, dict) else {}


def load_run(path: Path | str, sample_cap: int = DEFAULT_SAMPLE_CAP) -> RunData:
    """Read a run folder for a report; a run without ``results.json`` yet is allowed.

    Raises :class:`WhiteboxError` when ``path`` is not a run folder.
    """
    path = Path(path)
    if not path.exists():
        raise WhiteboxError(f"{path} does not exist; give a run folder (`whitebox-eval runs "
                            "--output DIR` lists them)")
    if not path.is_dir():
        raise WhiteboxError(f"{path} is a file, not a run folder; give the folder that holds "
                            "config.yaml")
    if not is_started(path):
        inside = sorted(p.name for p in path.iterdir() if is_started(p))
        if inside:
            shown = ", ".join(inside[:5]) + (", ..." if len(inside) > 5 else "")
            raise WhiteboxError(f"{path} is not a run folder but holds run folders ({shown}); "
                                "give one or more of them, e.g. "
                                f"{path / inside[0]}")
    folder = RunFolder.open(path)
    results, results_error = None, None
    if is_finished(path):
        try:
            results = folder.load_results()
        except WhiteboxError as exc:  # corrupted: the rest of the run is still shown
            results_error = str(exc)
    if results is not None and not isinstance(results, dict):
        raise WhiteboxError(f"{path / 'results.json'} does not hold a JSON object; restore it "
                            "or rerun the study with --resume")
    samples: list[dict[str, Any]] = []
    n = 0
    for sample in folder.read_samples():
        n += 1
        if len(samples) < sample_cap and isinstance(sample, dict):
            samples.append(sample)
    plots, others = _plot_files(path / PLOTS_DIR)
    return RunData(path=path, config=folder.config, results=results, samples=samples,
                   n_samples=n, plots=plots, other_plot_files=others,
                   arrays=_array_infos(path / ARRAYS_DIR), results_error=results_error)


def _plot_files(folder: Path) -> tuple[list[Path], list[Path]]:
    if not folder.is_dir():
        return [], []
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    images = [p for p in files if p.suffix.lower() in IMAGE_TYPES]
    return images, [p for p in files if p.suffix.lower() not in IMAGE_TYPES]


def _array_infos(folder: Path) -> list[ArrayInfo]:
    if not folder.is_dir():
        return []
    infos = []
    for path in sorted(folder.glob("*.npy")):
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)  # reads the header only
            infos.append(ArrayInfo(path.stem, tuple(int(s) for s in array.shape), str(array.dtype)))
        except (OSError, ValueError):
            infos.append(ArrayInfo(path.stem, None, "unreadable"))
    return infos
