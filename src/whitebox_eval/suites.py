"""The suites: the one list of their records, which ``cli``, ``studies``, ``report`` and
``reproduce`` read.

Each suite package declares what it is in one record (``<suite>/record.py``,
:class:`~whitebox_eval.runs.record.Suite`): its commands, its modes' config dataclasses and run
functions, its work in units and what a unit costs, its explorer views and reproduction figures.
This module lists them (:data:`SUITES`); a plug-in adds its own with :func:`register`, the one way
in. :func:`run` runs (or resumes) a study of any suite and returns its
:class:`~whitebox_eval.runs.finished.StudyResult` (:func:`run_folder`: its folder, not read back).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.record import SUITE as GAR
from whitebox_eval.finetune.record import SUITE as FINETUNE
from whitebox_eval.formats.record import SUITE as FORMATS
from whitebox_eval.lazy import resolve
from whitebox_eval.mcqa.record import SUITE as MCQA
from whitebox_eval.mui.record import CONTAMINATION, MASKING, MUI
from whitebox_eval.runs.record import Mode, Suite
from whitebox_eval.sae.record import SUITE as SAE
from whitebox_eval.span.record import SUITE as SPAN

__all__ = ["SUITES", "Mode", "Suite", "register", "run", "run_folder", "suite"]

SUITES: dict[str, Suite] = {s.name: s for s in (MCQA, FORMATS, MUI, MASKING, CONTAMINATION, SPAN, GAR, SAE, FINETUNE)}
"""Every suite by name (``studies.<name>``, ``suite: <name>`` in a paper), in the order ``--help`` lists them."""


def register(record: Suite) -> Suite:
    """Add a plug-in's ``record`` to :data:`SUITES` at run time: ``studies.<name>``, reproduce's
    ``suite: <name>`` (at every scale, ``--plan-only`` included), the report's explorer and, where
    the record names commands, ``whitebox-eval <command>`` (in a process that registered it first)
    follow."""
    if record.name in SUITES:
        raise WhiteboxError(f"a suite named {record.name!r} is registered already")
    if not record.modes:
        raise WhiteboxError(f"suite {record.name!r} has no mode")
    SUITES[record.name] = record
    return record


def suite(name: str) -> Suite:
    """The record of suite ``name``; one line naming the suites otherwise."""
    if name not in SUITES:
        raise WhiteboxError(f"unknown suite {name!r} (one of {', '.join(SUITES)})")
    return SUITES[name]


def run_folder(name: str, mode: str | None, /, output: str | Path = "runs", *, run_id: str | None = None,
               resume: bool = False, show_progress: bool | None = None, loaded=None, **settings: Any) -> Path:
    """Run (or resume) one study of suite ``name``; its finished run folder, not read back.
    ``settings`` are the mode's config fields, ``loaded`` a model already loaded (its spec is the
    default model). ``name`` and ``mode`` are positional only: a config may have a field called
    ``mode`` (span's reinforcement mode), which then arrives in ``settings``."""
    record = suite(name)
    if loaded is not None and "model" not in settings:
        settings["model"] = loaded.spec
    if settings.get("batch_size") == "auto":  # as --batch-size auto (probed with ``loaded`` where given)
        from whitebox_eval.command_options import resolved_batch_size

        settings["batch_size"] = resolved_batch_size("auto", settings.get("model", "smollm2-135m"),
                                                     settings.get("dtype", "auto"), loaded=loaded)
    cfg = record.config(mode, settings)
    return resolve(record.mode(mode).run)(cfg, output, run_id=run_id, resume=resume, loaded=loaded,
                                          show_progress=show_progress).path


def run(name: str, mode: str | None, /, output: str | Path = "runs", **kwargs: Any):
    """Run (or resume) one study of suite ``name`` (:func:`run_folder`) and read its folder back."""
    return read(run_folder(name, mode, output, **kwargs))


def read(folder: str | Path):
    """A finished run folder read back (:func:`whitebox_eval.runs.finished.read`), completed by its
    suite's ``read_back`` where it declares one (missing keys added, none replaced; the folder untouched)."""
    from whitebox_eval.runs.finished import read as read_folder

    study = read_folder(folder)
    record = SUITES.get(str(study.config.get("suite")))
    if record is not None and record.read_back:
        resolve(record.read_back)(study.results, study.samples, study.config)
    return study
