"""Reading a finished MUI run without a model: its per-sample key sets, the MUI of a subset of its
samples (sec. 2.2, 3.6: the union over stored key sets) and its (accuracy, MUI) point (sec. 3.2)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.study import KEY_SETS_FILE
from whitebox_eval.mui.utilization import KeySets
from whitebox_eval.runs.finished import StudyResult
from whitebox_eval.runs.folder import RunFolder


def load_key_sets(run: str | Path | RunFolder) -> KeySets:
    """The per-sample key sets of a finished run folder."""
    folder = run if isinstance(run, RunFolder) else RunFolder.open(run)
    path = folder.path / "arrays" / KEY_SETS_FILE
    if not path.is_file():
        raise WhiteboxError(f"{folder.path} has no {KEY_SETS_FILE}: it is not a finished MUI run (rerun with --resume)")
    return KeySets.load(path)


def subset_mui(run: str | Path | RunFolder, keep: Callable[[dict], bool]) -> tuple[float, int]:
    """MUI (fraction) and size of the samples of a run for which ``keep(sample_record)`` is true.

    No model is run: the union is taken over the stored key sets (sec. 2.2, 3.6).
    """
    folder = run if isinstance(run, RunFolder) else RunFolder.open(run)
    ks = load_key_sets(folder)
    samples = {str(s["id"]): s for s in folder.read_samples()}
    sel = np.array([bool(keep(samples[sid])) for sid in ks.sample_ids])
    if not sel.any():
        raise WhiteboxError("no sample matches the subset")
    return ks.mui(sel), int(sel.sum())


@dataclass(frozen=True)
class Finished:
    """What the Utility Law reads of a finished run: its folder, config and results.json."""

    path: Path
    config: Mapping[str, Any]
    results: Mapping[str, Any]


def finished(run: str | Path | RunFolder | StudyResult | Finished) -> Finished:
    """A run's config and results, read from its folder unless the caller read them already (a
    reproduction's children are read once, at assembly, as :class:`StudyResult`)."""
    if isinstance(run, Finished):
        return run
    if isinstance(run, StudyResult):
        return Finished(Path(run.folder), run.config, run.results)
    folder = run if isinstance(run, RunFolder) else RunFolder.open(run)
    return Finished(folder.path, folder.config, folder.load_results())


def run_point(run: str | Path | RunFolder | StudyResult | Finished) -> tuple[float, float]:
    """``(accuracy %, MUI %)`` of a finished run, the point of sec. 3.2's plots (results.json
    holds fractions: ``accuracy``, ``mui``)."""
    f = finished(run)
    if f.config.get("suite") != "mui":
        raise WhiteboxError(f"{f.path} is not a MUI run (suite {f.config.get('suite')!r})")
    return 100 * float(f.results["accuracy"]), 100 * float(f.results["mui"])
