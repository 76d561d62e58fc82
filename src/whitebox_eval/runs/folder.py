"""The run folder every suite writes, as the run goes, so it can be resumed.

Layout of ``<root>/<run-id>/``::

    config.yaml     everything needed to repeat the run, plus versions and start time
    samples.jsonl   one JSON object per finished example, appended batch by batch
    results.json    summary metrics (``"headline"`` holds the main ones, in order)
    arrays/*.npy    per-head / per-layer / per-neuron scores
    plots/*.png     figures
    run.log         timestamped progress notes
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import os
import platform
import re
import secrets
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import whitebox_eval
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.data_files import CONFIG_KEY as DATA_FILES_KEY, data_files_change
from whitebox_eval.runs.plain_values import plain_value
from whitebox_eval.runs.progress import log_to as _progress_log_to

CONFIG_FILE = "config.yaml"
SAMPLES_FILE = "samples.jsonl"
RESULTS_FILE = "results.json"
LOG_FILE = "run.log"
ARRAYS_DIR = "arrays"
PLOTS_DIR = "plots"
SHARDS_DIR = "shards"  # per-rank samples of a data-parallel run, merged by rank 0

VOLATILE_KEY = "_volatile"
"""Config key listing keys that do not change the numbers (batch size, progress, paths)."""

RECORDED_KEYS = ("run_id", "created", "whitebox_eval_version", "python_version",
                 "torch_version", "transformers_version", "whitebox_eval_git_commit")
"""Keys the run folder adds to config.yaml itself; never compared on resume."""

ALWAYS_VOLATILE = frozenset({VOLATILE_KEY, "command", *RECORDED_KEYS})
"""Keys never compared on resume: the command line differs by ``--resume`` itself."""

DISK_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
               errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
               errno.EPERM: "permission denied"}
"""OSError numbers that mean "this folder cannot be written": one line, exit 2, resumable."""

_ABSENT = object()
_FRESH: set[Path] = set()  # run folders this process created (removed again if left empty by an error)
_ACTIVE: list[Path] = []  # the run folder this process writes (named when a write fails)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class RunSummary:
    """One line of ``whitebox-eval runs``: what a run folder holds."""

    id: str
    path: Path
    suite: str | None
    model: str | None
    task: str | None
    created: str | None
    n_samples: int
    headline: str | None
    headline_value: Any = None


class RunFolder:
    """A run's folder: config, streamed samples, results, arrays, plots and log.

    Build one with :meth:`create` (new run, or resume with ``resume=True``),
    :meth:`open_for_resume` or :meth:`open` (read an existing run).
    """

    def __init__(self, path: Path, config: dict[str, Any], shard: int | None = None) -> None:
        self.path = Path(path)
        self.config = config
        self.shard = shard
        self._done_cache: set[str | int] | None = None
        self._tail_checked = False

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def samples_path(self) -> Path:
        return self.path / SAMPLES_FILE

    @property
    def append_path(self) -> Path:
        """Where this process appends samples: ``samples.jsonl``, or its rank's shard file
        (reading and annotating always use the merged ``samples.jsonl``)."""
        if self.shard is None:
            return self.samples_path
        return self.path / SHARDS_DIR / f"rank{self.shard:03d}.samples.jsonl"

    def for_rank(self, rank: int) -> RunFolder:
        """The same run, appending samples to rank ``rank``'s shard file (data-parallel
        runs; :meth:`merge_shards` folds the shards into ``samples.jsonl``)."""
        return RunFolder(self.path, self.config, shard=rank)

    def merge_shards(self, order: Sequence[str | int]) -> int:
        """Fold every rank's shard file into ``samples.jsonl`` (atomically), samples in
        the order of ``order`` (ids; any others after them), then delete the shards.
        Returns the number of samples merged in."""
        shards = self._shard_files()
        if not shards:
            return 0
        new = [s for p in shards for s in _read_samples_file(p)]
        samples = {s["id"]: s for s in [*self.read_samples(), *new]}
        rank = {i: k for k, i in enumerate(order)}
        ordered = sorted(samples.values(), key=lambda s: (rank.get(s["id"], len(rank)), str(s["id"])))
        _write_atomic(self.samples_path, "".join(json.dumps(s, ensure_ascii=False, allow_nan=False) + "\n" for s in ordered))
        for p in shards:
            p.unlink()
        if not any((self.path / SHARDS_DIR).iterdir()):
            (self.path / SHARDS_DIR).rmdir()
        self._done_cache = None
        return len(new)

    def _shard_files(self) -> list[Path]:
        """The ranks' unmerged samples files, in rank order."""
        return sorted((self.path / SHARDS_DIR).glob("rank*.samples.jsonl"))

    # ------------------------------------------------------------------ creating

    @classmethod
    def create(cls, root: Path | str, config: Mapping[str, Any], *,
               run_id: str | None = None, resume: bool = False) -> RunFolder:
        """Start a run folder ``<root>/<run_id>`` and write its ``config.yaml``.

        ``run_id`` defaults to ``<UTC yyyymmdd-HHMMSS>-<suite>-<model>-<task>`` from the
        config. An existing folder holding samples or results is never overwritten: with
        ``resume=True`` it is reopened (see :meth:`open_for_resume`), otherwise this
        raises. ``resume=True`` on a folder that does not exist yet starts it fresh.
        """
        root = Path(root)
        _check_output_root(root)
        created = datetime.now(UTC)
        if resume and run_id is None:
            raise WhiteboxError("--resume needs --run-id naming the run folder to continue "
                                "(`whitebox-eval runs` lists them)")
        if run_id is None:
            path = _unused_path(root, default_run_id(config, created))
        else:
            if not _NAME_RE.match(run_id):
                raise WhiteboxError(
                    f"run id {run_id!r} is not a plain folder name: use letters, digits, "
                    "'.', '_' and '-' only (no slashes)")
            path = root / run_id
        if resume and (path / CONFIG_FILE).is_file():
            return cls.open_for_resume(path, config)
        if _has_finished_work(path):
            raise WhiteboxError(
                f"{path} already holds results of an earlier run; pass --resume to "
                "continue it, or choose another --output (finished work is never "
                "overwritten)")
        stored = _config_for_storage(config)
        stored.update(run_id=path.name, created=_iso(created), **_versions())
        with writing(path):
            if not path.exists():
                path.mkdir(parents=True)
                _FRESH.add(path.resolve())
            _write_atomic(path / CONFIG_FILE, _dump_yaml(stored))
        run = cls(path, stored)
        _ACTIVE[:] = [path]
        run.log(f"created run {path.name}")
        _progress_log_to(run.log_progress)
        return run

    @classmethod
    def open_for_resume(cls, path: Path | str, config: Mapping[str, Any]) -> RunFolder:
        """Reopen an interrupted run whose repeatability-relevant config equals ``config``.

        Keys named in either config's ``"_volatile"`` list (and the recorded versions,
        start time and command line) are not compared. A half-written last line of
        ``samples.jsonl`` is cut away so further appends stay valid JSONL.
        """
        path = Path(path)
        if not (path / CONFIG_FILE).is_file():
            raise WhiteboxError(
                f"cannot resume {path}: it has no {CONFIG_FILE}, so it is not a run "
                "folder; drop --resume to start a new run there")
        old = _read_config(path)
        new = yaml.safe_load(_dump_yaml(_config_for_storage(config)))
        volatile = ALWAYS_VOLATILE | set(_volatile_keys(old)) | set(_volatile_keys(new)) | {DATA_FILES_KEY}
        differences = config_differences(old, new, volatile)
        if differences:
            lines = "\n".join(f"  {key}: {_show(a)} (this run) -> {_show(b)} (now)"
                              for key, a, b in differences)
            raise WhiteboxError(
                f"cannot resume {path}: its config differs in settings that change the "
                f"results:\n{lines}\nUse a new --output (without --resume) to run with the "
                "new settings, or repeat the original settings to continue this run.")
        changed = data_files_change(old.get(DATA_FILES_KEY), new.get(DATA_FILES_KEY))
        if changed:
            raise WhiteboxError(f"cannot resume {path}: {changed}; restore it, or start a new run "
                                "(without --resume) on the new data")
        run = cls(path, old)
        _ACTIVE[:] = [path]
        with writing(path):
            repaired = run._repair_samples_tail()
            for tmp in path.rglob(".*.tmp"):  # temporary files of atomic writes a kill interrupted
                tmp.unlink(missing_ok=True)
        run.log(f"resumed with {len(run.done_ids())} finished samples"
                + ("; dropped a half-written last line" if repaired else "")
                + (f"; command: {config['command']}" if config.get("command") else ""))
        _progress_log_to(run.log_progress)
        return run

    @classmethod
    def open(cls, path: Path | str) -> RunFolder:
        """Open an existing run folder to read it (for reports and listings)."""
        path = Path(path)
        if not (path / CONFIG_FILE).is_file():
            raise WhiteboxError(f"{path} is not a run folder (no {CONFIG_FILE}); "
                                "give the folder a whitebox-eval run wrote")
        return cls(path, _read_config(path))

    # ------------------------------------------------------------------ samples

    def append_samples(self, records: list[Mapping[str, Any]]) -> None:
        """Append one JSON line per record and fsync, so a finished batch survives a kill.

        Every record needs an ``"id"`` (str or int) not used before in this run. numpy
        and torch values become plain numbers/lists; NaN and ±inf become null.
        """
        done = self._done()
        batch_ids: set[str | int] = set()
        lines = []
        for record in records:
            plain = plain_value(record)
            if not isinstance(plain, dict):
                raise TypeError(f"a sample must be a dict, got {type(record).__name__}")
            sample_id = plain.get("id", _ABSENT)
            if sample_id is _ABSENT or isinstance(sample_id, bool) or \
                    not isinstance(sample_id, (str, int)):
                raise WhiteboxError(
                    f"sample {_show(plain):.120} has no usable 'id' (needs a str or int); "
                    "give every example an id")
            if sample_id in done or sample_id in batch_ids:
                raise WhiteboxError(
                    f"sample id {sample_id!r} appears twice in {self.path}; example ids "
                    "must be unique (check the dataset for duplicate ids)")
            batch_ids.add(sample_id)
            lines.append(json.dumps(plain, ensure_ascii=False, allow_nan=False) + "\n")
        if not lines:
            return
        with writing(self.path):
            self.append_path.parent.mkdir(parents=True, exist_ok=True)
            if not self._tail_checked:  # never glue a line onto a half-written one
                self._repair_samples_tail()
            with open(self.append_path, "a", encoding="utf-8") as f:
                f.write("".join(lines))
                f.flush()
                os.fsync(f.fileno())
        done.update(batch_ids)

    def annotate_samples(self, extra: Mapping[str | int, Mapping[str, Any]]) -> None:
        """Add fields to finished samples (by id), e.g. scores known only once the run is
        complete; the file is rewritten atomically, so an interruption loses nothing."""
        lines = []
        for sample in self.read_samples():
            sample.update(plain_value(dict(extra.get(sample["id"], {}))))
            lines.append(json.dumps(sample, ensure_ascii=False, allow_nan=False) + "\n")
        _write_atomic(self.samples_path, "".join(lines))

    def read_samples(self) -> Iterator[dict[str, Any]]:
        """Yield the finished samples in the order written (a half-written tail is skipped)."""
        yield from _read_samples_file(self.samples_path)

    def done_ids(self) -> set[str | int]:
        """Ids of the finished samples: ``samples.jsonl`` plus any rank's unmerged shard."""
        files = [self.samples_path, *self._shard_files()]
        ids = {sample["id"] for p in files for sample in _read_samples_file(p) if "id" in sample}
        self._done_cache = set(ids)
        return ids

    def count_pending(self, ids: Iterable[str | int]) -> int:
        """How many of ``ids`` have no sample yet (a progress bar's total)."""
        done = self._done()
        return sum(1 for i in ids if plain_value(i) not in done)

    def iterate_pending(self, items: Iterable[Any], ids: Iterable[str | int],
                        batch_size: int) -> Iterator[list[tuple[str | int, Any]]]:
        """Yield ``[(id, item), ...]`` batches of the items without a sample yet, in order.

        Done ids are read once when iteration starts, so a resumed run continues
        where it stopped and a fresh run yields everything.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise WhiteboxError(f"batch size must be a positive integer, got {batch_size!r}")
        done = set(self._done())
        seen: set[str | int] = set()
        batch: list[tuple[str | int, Any]] = []
        for item_id, item in zip(ids, items, strict=True):
            key = plain_value(item_id)
            if key in seen:
                raise WhiteboxError(f"example id {key!r} appears twice; example ids must be "
                                    "unique (check the dataset for duplicate ids)")
            seen.add(key)
            if key in done:
                continue
            batch.append((key, item))
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def _done(self) -> set[str | int]:
        if self._done_cache is None:
            self.done_ids()
        assert self._done_cache is not None
        return self._done_cache

    def _repair_samples_tail(self) -> bool:
        """Make ``samples.jsonl`` end with a newline; drop a half-written last line.

        Returns True when a fragment was dropped.
        """
        self._tail_checked = True
        path = self.append_path
        if not path.is_file():
            return False
        with open(path, "rb+") as f:
            data = f.read()
            if not data or data.endswith(b"\n"):
                return False
            cut = data.rfind(b"\n") + 1
            try:
                json.loads(data[cut:])
            except (json.JSONDecodeError, UnicodeDecodeError):
                f.truncate(cut)
                dropped = True
            else:  # complete record, only the newline is missing
                f.write(b"\n")
                dropped = False
            f.flush()
            os.fsync(f.fileno())
        return dropped

    # ------------------------------------------------------------------ results, arrays

    def save_results(self, results: Mapping[str, Any]) -> Path:
        """Write ``results.json`` atomically: keys sorted, NaN as null.

        Keys are sorted at every level except inside ``"headline"``, whose order is kept:
        its first key is the run's headline metric.
        """
        plain = plain_value(results)
        if not isinstance(plain, dict):
            raise TypeError(f"results must be a dict, got {type(results).__name__}")
        ordered = {k: (plain[k] if k == "headline" else _sorted_keys(plain[k]))
                   for k in sorted(plain)}
        if isinstance(ordered.get("headline"), dict):
            ordered["headline"] = {k: _sorted_keys(v) for k, v in ordered["headline"].items()}
        path = self.path / RESULTS_FILE
        _write_atomic(path, json.dumps(ordered, indent=2, ensure_ascii=False,
                                       allow_nan=False) + "\n")
        return path

    def load_results(self) -> dict[str, Any]:
        """Read ``results.json``; raises when the run has not written it yet."""
        path = self.path / RESULTS_FILE
        if not path.is_file():
            raise WhiteboxError(f"{self.path} has no {RESULTS_FILE} yet: the run did not "
                                "finish; rerun it with --resume to complete it")
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise WhiteboxError(f"{path} is corrupted (not valid JSON: {exc}); restore it, or rerun "
                                "the study with --resume to write it again") from None

    def save_array(self, name: str, array: Any) -> Path:
        """Write a numpy array (or torch tensor) to ``arrays/<name>.npy`` atomically."""
        _check_name(name)
        data = np.asarray(_as_numpy(array))
        if data.dtype == object:
            raise TypeError(f"array {name!r} has dtype object; store numbers only")
        folder = self.path / ARRAYS_DIR
        path = folder / f"{name}.npy"
        with writing(self.path), _AtomicFile(path, "wb") as f:
            np.save(f, data, allow_pickle=False)
        return path

    def load_array(self, name: str) -> np.ndarray:
        """Read ``arrays/<name>.npy``."""
        _check_name(name)
        path = self.path / ARRAYS_DIR / f"{name}.npy"
        if not path.is_file():
            have = sorted(p.stem for p in (self.path / ARRAYS_DIR).glob("*.npy"))
            raise WhiteboxError(f"{self.path} has no array {name!r}; it has: "
                                f"{', '.join(have) or 'none'}")
        return np.load(path, allow_pickle=False)

    def plot_path(self, name: str) -> Path:
        """Where to save plot ``name`` (``plots/<name>``, ``.png`` added if no suffix)."""
        _check_name(name)
        folder = self.path / PLOTS_DIR
        with writing(self.path):
            folder.mkdir(parents=True, exist_ok=True)
        return folder / (name if Path(name).suffix else f"{name}.png")

    def log_progress(self, message: str) -> None:
        """A progress line for ``run.log``; never recreates a folder that is gone, never raises."""
        if self.path.is_dir():
            try:
                self.log(message)
            except OSError:
                pass

    def log(self, message: str) -> None:
        """Append ``<UTC time> <message>`` to ``run.log``."""
        with writing(self.path):
            self.path.mkdir(parents=True, exist_ok=True)
            with open(self.path / LOG_FILE, "a", encoding="utf-8") as f:
                f.write(f"{_iso(datetime.now(UTC))} {message}\n")


# ---------------------------------------------------------------------- listing


def list_runs(root: Path | str) -> list[RunSummary]:
    """Summaries of the run folders directly under ``root``, oldest first."""
    root = Path(root)
    if not root.is_dir():
        raise WhiteboxError(f"no runs folder at {root}; give the folder runs were written to")
    summaries = []
    for path in sorted(p for p in root.iterdir() if (p / CONFIG_FILE).is_file()):
        try:
            config = _read_config(path)
        except WhiteboxError:
            config = {}
        headline = headline_value = None
        results_path = path / RESULTS_FILE
        if results_path.is_file():
            try:
                results = json.loads(results_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                results = {}
            head = results.get("headline") if isinstance(results, dict) else None
            if isinstance(head, dict) and head:
                headline, headline_value = next(iter(head.items()))
        summaries.append(RunSummary(
            id=path.name, path=path, suite=_str_or_none(config.get("suite")),
            model=_str_or_none(config.get("model")),
            task=_str_or_none(config.get("task", config.get("tasks"))),
            created=_str_or_none(config.get("created")),
            n_samples=_count_lines(path / SAMPLES_FILE),
            headline=headline, headline_value=headline_value))
    summaries.sort(key=lambda s: (s.created or "", s.id))
    return summaries


# ---------------------------------------------------------------------- config


def default_run_id(config: Mapping[str, Any], when: datetime | None = None) -> str:
    """``<UTC yyyymmdd-HHMMSS>-<suite>-<model>-<task>`` from whichever keys the config has."""
    when = when or datetime.now(UTC)
    parts = [when.astimezone(UTC).strftime("%Y%m%d-%H%M%S")]
    for key in ("suite", "model", "task"):
        value = config.get(key, config.get("tasks") if key == "task" else None)
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = "_".join(str(v) for v in value)
        text = str(value)
        if key == "model" and _looks_like_path(text):
            text = Path(text.rstrip("/\\")).name.removesuffix(".gguf")
        part = _sanitise(text)
        if part:
            parts.append(part)
    return "-".join(parts)


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any],
                       ignore: Iterable[str] = ()) -> list[tuple[str, Any, Any]]:
    """``(dotted key, old, new)`` for every differing key, skipping ``ignore``d keys.

    A key in ``ignore`` may be top-level (``batch_size``) or dotted (``engine.chunk``).
    A key present on one side only shows ``<absent>`` on the other.
    """
    ignore = set(ignore)
    out: list[tuple[str, Any, Any]] = []

    def walk(a: Any, b: Any, prefix: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                dotted = f"{prefix}{key}"
                if dotted in ignore:
                    continue
                walk(a.get(key, _ABSENT), b.get(key, _ABSENT), dotted + ".")
        elif not _same(a, b):
            out.append((prefix.rstrip("."), a, b))

    walk(dict(old), dict(new), "")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float))
        and not isinstance(a, bool) and not isinstance(b, bool) and a == b)


def _volatile_keys(config: Mapping[str, Any]) -> list[str]:
    keys = config.get(VOLATILE_KEY) or []
    if isinstance(keys, str):
        return [keys]
    return [str(k) for k in keys]


def _config_for_storage(config: Mapping[str, Any]) -> dict[str, Any]:
    plain = plain_value(dict(config), nonfinite_to_none=False)
    for key in RECORDED_KEYS:  # re-recorded by this run (a config read from a run has them)
        plain.pop(key, None)
    return plain


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


@functools.cache
def _git_commit() -> str | None:
    """The commit of the whitebox-eval checkout running this (``+dirty`` with tracked
    changes), or None when it is installed from a wheel or git is unavailable. Asked once
    per process: the code a process runs does not change under it."""
    import subprocess

    root = Path(whitebox_eval.__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "") if head else None


def _versions() -> dict[str, str]:
    """What config.yaml records about the software that made the run (never compared on resume)."""
    out = {"whitebox_eval_version": whitebox_eval.__version__,
           "python_version": platform.python_version(),
           "torch_version": _package_version("torch"),
           "transformers_version": _package_version("transformers")}
    commit = _git_commit()
    if commit:
        out["whitebox_eval_git_commit"] = commit
    return out


def _dump_yaml(config: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(config), sort_keys=True, default_flow_style=False,
                          allow_unicode=True)


def _read_config(path: Path) -> dict[str, Any]:
    try:
        config = yaml.safe_load((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise WhiteboxError(f"{path / CONFIG_FILE} is not valid YAML ({exc}); fix or "
                            "restore it") from None
    if not isinstance(config, dict):
        raise WhiteboxError(f"{path / CONFIG_FILE} does not hold a mapping; fix or restore it")
    return config


# ---------------------------------------------------------------------- files


def _read_samples_file(path: Path) -> Iterator[dict[str, Any]]:
    """The samples of one JSONL file in order; a half-written last line is skipped."""
    if not path.is_file():
        return
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            sample = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            if number == len(lines):  # last line with no newline: killed mid-write
                return
            raise WhiteboxError(
                f"{path} line {number} is not valid JSON ({exc}); the "
                "file was edited or corrupted: fix or delete that line") from None
        yield sample


def _write_atomic(path: Path, text: str) -> None:
    with writing(path.parent), _AtomicFile(path, "w") as f:
        f.write(text)


class _AtomicFile:
    """Write to a temporary file beside ``path``, fsync, then ``os.replace`` it in.

    The temporary file is opened like any new file (mode 0666 less the umask, so a
    colleague can read the run as the umask allows); on any failure it is removed and
    ``path`` keeps its old content.
    """

    def __init__(self, path: Path, mode: str) -> None:
        self.path = Path(path)
        self.mode = mode

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        encoding = None if "b" in self.mode else "utf-8"
        self.file = os.fdopen(fd, self.mode, encoding=encoding)
        return self.file

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.file.flush()
                os.fsync(self.file.fileno())
            self.file.close()
            if exc_type is None:
                os.replace(self.tmp, self.path)
                return
        except BaseException:
            self._discard()
            raise
        self._discard()

    def _discard(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)


@contextlib.contextmanager
def writing(folder: Path) -> Iterator[None]:
    """Turn "disk full" / "read-only" / "permission denied" while writing under ``folder``
    into one :class:`WhiteboxError` naming the folder (finished batches stay; --resume)."""
    try:
        yield
    except OSError as exc:
        error = disk_error(exc, folder)
        if error is None:
            raise
        raise error from exc


def disk_error(exc: BaseException, folder: Path | None = None) -> WhiteboxError | None:
    """The one-line error for an OSError that means the output cannot be written, or None.

    ``folder`` defaults to the run folder this process writes (or the file's folder)."""
    if not isinstance(exc, OSError) or exc.errno not in DISK_ERRNOS:
        return None
    if folder is None and exc.errno in (errno.EACCES, errno.EPERM):  # maybe a read: name the file
        if not exc.filename:
            return None
        return WhiteboxError(f"cannot access {exc.filename}: permission denied; fix its permissions "
                             "(or choose another path)")
    if folder is None:
        folder = _ACTIVE[0] if _ACTIVE else Path(exc.filename).parent if exc.filename else None
    elif _ACTIVE and Path(folder).is_relative_to(_ACTIVE[0]):
        folder = _ACTIVE[0]  # name the run folder (what --resume continues), not a sub-folder
    where = f"cannot write to {folder}" if folder is not None else "cannot write the output"
    return WhiteboxError(
        f"{where}: {DISK_ERRNOS[exc.errno]} ({exc.strerror}); free space or fix the permissions "
        "(or choose another --output), then rerun the same command with --resume: finished "
        "batches are kept")


def start_command() -> None:
    """Forget the run folders of earlier commands in this process (the CLI calls this
    first, so :func:`remove_unused_fresh_folders` and :func:`disk_error` see only its own)."""
    _FRESH.clear()
    _ACTIVE.clear()


def remove_unused_fresh_folders() -> list[Path]:
    """Delete the run folders this process created that hold nothing but ``config.yaml``
    and ``run.log`` (called when a command fails, so a usage error leaves no empty run).
    Returns the folders removed."""
    removed = []
    for path in sorted(_FRESH):
        files = [p for p in path.rglob("*") if not p.is_dir()] if path.is_dir() else []
        if path.is_dir() and all(p.parent == path and p.name in (CONFIG_FILE, LOG_FILE) for p in files):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        _FRESH.discard(path)
    return removed


def _check_output_root(root: Path) -> None:
    """Refuse an ``--output`` that is (or lies inside) a file, before anything is created."""
    for where in (root, *root.parents):
        if where.exists():
            if not where.is_dir():
                raise WhiteboxError(f"--output {root}: {where} is a file, not a folder; give a folder "
                                    "for the run folders (it is created if missing)")
            return


def _has_finished_work(path: Path) -> bool:
    samples = path / SAMPLES_FILE
    return (samples.is_file() and samples.stat().st_size > 0) or (path / RESULTS_FILE).is_file()


def _unused_path(root: Path, run_id: str) -> Path:
    path, n = root / run_id, 2
    while path.exists():
        path, n = root / f"{run_id}-{n}", n + 1
    return path


def _count_lines(path: Path) -> int:
    """Complete lines of a JSONL file (a half-written tail has no newline yet)."""
    if not path.is_file():
        return 0
    count = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            count += block.count(b"\n")
    return count


def _as_numpy(array: Any) -> Any:
    if hasattr(array, "detach") and hasattr(array, "cpu"):  # torch tensor
        tensor = array.detach().cpu()
        if not tensor.dtype.is_floating_point or tensor.dtype.itemsize >= 4:
            return tensor.numpy()
        return tensor.float().numpy()  # bfloat16/float16 -> float32
    return array


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(v) for v in value]
    return value


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"file name {name!r} must use letters, digits, '.', '_' and '-' "
                         "only and start with a letter or digit")


def _sanitise(text: str, limit: int = 48) -> str:
    text = re.sub(r"[^A-Za-z0-9._]+", "-", text)
    return text.strip("-._")[:limit].strip("-._")


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", "./", "../", "~", ".\\")) or text.endswith(".gguf") \
        or "\\" in text or text.count("/") > 1


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _show(value: Any) -> str:
    return "<absent>" if value is _ABSENT else repr(value)


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
