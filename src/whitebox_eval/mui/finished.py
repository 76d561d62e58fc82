"""Reading a finished MUI run without a model: its per-sample key sets, the MUI of a subset of its
samples (sec. 2.2, 3.6: the union over stored key sets) and its (accuracy, MUI) point (sec. 3.2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.study import KEY_SETS_FILE
from whitebox_eval.mui.utilization import KeySets
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


def run_point(run: str | Path | RunFolder) -> tuple[float, float]:
    """``(accuracy %, MUI %)`` of a finished run, the point of sec. 3.2's plots (results.json
    holds fractions: ``accuracy``, ``mui``)."""
    folder = run if isinstance(run, RunFolder) else RunFolder.open(run)
    res = folder.load_results()
    if folder.config.get("suite") != "mui":
        raise WhiteboxError(f"{folder.path} is not a MUI run (suite {folder.config.get('suite')!r})")
    return 100 * float(res["accuracy"]), 100 * float(res["mui"])

