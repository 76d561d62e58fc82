"""What a suite is, as one record its package declares (``<suite>/record.py``).

A :class:`Suite` names its code as ``"module:attribute"`` strings (:func:`whitebox_eval.lazy.resolve`),
so ``--help``, planning and the report's page import no suite until one is used:

- ``command``: its click command (None for one reached otherwise: ``mui masking``, Python);
  ``commands``: further top-level commands it owns (``universal``, ``formats-compare``);
- ``modes``: per mode (the first is the default) its config dataclass, run function, whether it
  shards its items over torchrun ranks, and its measured seconds per unit where the mode's
  unit costs otherwise;
- ``work(config, mode) -> (items, units)``: the study's units of work (one forward-sized step)
  from its config object, so every default is the dataclass's own;
- ``rate``: seconds per unit on 2 CPU cores (SmolLM2-135M; ``benchmarks/reproduce_timing.py``);
  ``tokens_per_unit``: the forward tokens one unit processes (the GPU estimate);
- ``views``: ``views(folder, results, samples) -> dict`` for the report's explorer (per item
  ``row[<name>]``, drawn by ``script``, package data read through ``importlib.resources``:
  ``"package:file.js"`` defining ``WB.views[<name>]``);
- ``figures``: ``figures(folder, where) -> list`` of a reproduction's figures from a child run
  (``where``: the folder as the reproduction names it);
- ``results``: the results.json places a paper's claim may name (patterns, ``{name}`` one
  stretch of a key without ``/``: ``acc,{method}``, ``paired_tests/{a}_vs_{b}``), checked at
  ``--plan-only`` (none declared: not checked);
- ``statistics``: the :class:`Statistic` kinds the suite computes from its own runs (read-backs of
  its arrays, fits over its runs), named by a claim's ``derived:``;
- ``read_back``: ``read_back(results, samples, config)`` completes a finished run as read
  (:func:`whitebox_eval.suites.read`): the keys a run written before them lacks, added, none replaced.

:func:`items` counts a study's items from its config (``limit``, else the rows of its local file).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.lazy import resolve

DEFAULT_RATE = 0.1
"""Seconds per unit of a suite that measured none."""
DEFAULT_TOKENS_PER_UNIT = 100.0
"""Forward tokens per unit of a suite that states none (a 0-shot prompt of ~100 tokens)."""


@dataclass(frozen=True)
class Mode:
    """One way to run a suite: its config dataclass and run function (``module:attribute``)."""

    config: str
    run: str
    shards: bool = False  # splits its items over torchrun ranks (runs/distributed.py)
    rate: float | None = None  # seconds per unit where this mode's unit costs otherwise than the suite's


@dataclass(frozen=True)
class Statistic:
    """A statistic a claim may name (``derived: NAME``): its code ``compute`` (``module:attribute``),
    called as ``compute(study, spec, kit)`` (``reads="study"``: a finished child, ``kit`` the
    reproduction's readers, so a suite imports nothing of it) or ``compute(studies, labels, kit)``
    (``reads="runs"``: several children, a claim ``across_models``); the arguments it
    ``needs`` and ``takes`` besides, those of them that are ``paths`` into results.json, and the
    files under a child's ``arrays/`` (``arrays``) and the passes whose name starts so
    (``passes``) it reads, which a checkpoint carries with the child; ``arms``: it carries its arms
    (per-item values of each side, or of its one side), so a claim naming it need declare none."""

    name: str
    compute: str
    needs: tuple[str, ...] = ()
    takes: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    reads: str = "study"
    arrays: tuple[str, ...] = ()
    passes: tuple[str, ...] = ()
    arms: bool = False


@dataclass(frozen=True)
class Suite:
    """One suite: its name (``studies.<name>``, a reproduce experiment's ``suite:``), what it
    is, its commands, its modes (the first is the default), its work in units and what a unit
    costs, and what the report and a reproduction draw of its runs."""

    name: str
    summary: str
    command: str | None
    modes: dict[str, Mode]
    work: Callable[[Any, str], tuple[int, float]]
    rate: float = DEFAULT_RATE
    tokens_per_unit: float = DEFAULT_TOKENS_PER_UNIT
    views: str | None = None
    script: str | None = None
    figures: str | None = None
    commands: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (module:attribute, short help)
    results: tuple[str, ...] = ()  # results.json places a claim may name (patterns); () = not checked
    statistics: tuple[Statistic, ...] = ()  # the statistics it computes from its own runs (derived: NAME)
    read_back: str | None = None  # completes a finished run as read (missing keys only)

    @property
    def default_mode(self) -> str:
        return next(iter(self.modes))

    def mode(self, name: str | None) -> Mode:
        """Mode ``name`` (None: the default); one line naming the modes otherwise."""
        key = name or self.default_mode
        if key not in self.modes:
            raise WhiteboxError(f"unknown {self.name} mode {name!r}; choose one of {', '.join(self.modes)}")
        return self.modes[key]

    @property
    def shards(self) -> bool:
        return any(m.shards for m in self.modes.values())

    def rate_of(self, mode: str | None) -> float:
        """Seconds per unit of ``mode`` on 2 CPU cores."""
        own = self.mode(mode).rate
        return self.rate if own is None else own

    def config(self, mode: str | None, settings: dict[str, Any]):
        """The mode's config object from ``settings`` (its field names), each value checked against
        the field's declared type (:func:`whitebox_eval.runs.settings.checked_settings`): the one
        way from settings, options (``command_options.study_config``) or a file to a config; every
        setting not given takes the dataclass's own default."""
        from whitebox_eval.runs.settings import checked_settings

        cls = resolve(self.mode(mode).config)
        return cls(**checked_settings(cls, settings, f"{self.name} settings"))

    def estimate(self, mode: str | None, settings: dict[str, Any]) -> tuple[int, float]:
        """(items, units of work) of a study with ``settings``."""
        return self.work(self.config(mode, settings), mode or self.default_mode)


def items(cfg, unknown: int) -> int:
    """``cfg.limit``, else the rows of the task's local file, else ``unknown`` (a fractional limit:
    that share of them, :mod:`whitebox_eval.runs.limits`)."""
    from whitebox_eval.runs.limits import is_fraction, taken

    if cfg.limit is not None and not is_fraction(cfg.limit):
        return int(cfg.limit)
    rows = _rows(None if cfg.spec.is_hub else cfg.spec.path)
    return taken(cfg.limit, rows if rows is not None else unknown)


def _rows(path: str | None) -> int | None:
    """Rows of a data file or folder of CSVs (for a run without a limit)."""
    import csv

    if not path:
        return None
    p = Path(path).expanduser()
    files = sorted(p.glob("*.csv")) if p.is_dir() else [p]
    total = 0
    for f in files:
        if not f.is_file():
            return None
        with open(f, encoding="utf-8", errors="replace", newline="") as fh:
            if f.suffix == ".csv":
                total += max(0, sum(1 for _ in csv.reader(fh)) - (0 if "mmlu" in str(f) else 1))
            elif f.suffix == ".json" and fh.read(1) == "[":
                fh.seek(0)
                total += len(json.load(fh))
            else:
                total += sum(1 for line in fh if line.strip())
    return total
