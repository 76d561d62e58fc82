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

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.atomic import ACTIVE, AtomicFile, disk_error, write_atomic, writing
from whitebox_eval.runs.fresh import (
    FRESH,
    LOG_FILE,
    check_output_root,
    has_finished_work,
    remove_unused_fresh_folders,
    start_command,
    unused_path,
)
from whitebox_eval.runs.data_files import CONFIG_KEY as DATA_FILES_KEY, data_files_change
from whitebox_eval.runs.listing import RESULTS_FILE, SAMPLES_FILE, RunSummary, list_runs
from whitebox_eval.runs.plain_values import plain_value
from whitebox_eval.runs.progress import log_to as _progress_log_to
from whitebox_eval.runs.samples_file import dumps as _dumps, read_samples_file, repair_tail, sample_line
from whitebox_eval.runs.run_ids import run_path
from whitebox_eval.runs.provenance import (
    ALWAYS_VOLATILE,
    CONFIG_FILE,
    config_differences,
    config_for_storage,
    default_run_id,
    dump_yaml,
    iso,
    read_config,
    show,
    versions,
    volatile_keys,
)

__all__ = ["RunFolder", "RunSummary", "list_runs", "default_run_id", "sample_line", "disk_error", "writing",
           "start_command", "remove_unused_fresh_folders", "ARRAYS_DIR", "PLOTS_DIR", "CONFIG_FILE",
           "SAMPLES_FILE", "RESULTS_FILE", "LOG_FILE"]

ARRAYS_DIR = "arrays"
PLOTS_DIR = "plots"
SHARDS_DIR = "shards"  # per-rank samples of a data-parallel run, merged by rank 0

_ABSENT = object()
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


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
        new = [s for p in shards for s in read_samples_file(p)]
        samples = {s["id"]: s for s in [*self.read_samples(), *new]}
        rank = {i: k for k, i in enumerate(order)}
        ordered = sorted(samples.values(), key=lambda s: (rank.get(s["id"], len(rank)), str(s["id"])))
        write_atomic(self.samples_path, "".join(sample_line(s) for s in ordered))
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
        check_output_root(root)
        created = datetime.now(UTC)
        if resume and run_id is None:
            raise WhiteboxError("--resume needs --run-id naming the run folder to continue "
                                "(`whitebox-eval runs` lists them)")
        path = unused_path(root, default_run_id(config, created)) if run_id is None else run_path(root, run_id)
        if resume and (path / CONFIG_FILE).is_file():
            return cls.open_for_resume(path, config)
        if resume and (has_finished_work(path) or (path / ARRAYS_DIR).is_dir()):
            raise WhiteboxError(
                f"cannot resume {path}: its {CONFIG_FILE} is missing, so the settings of the work it holds cannot "
                f"be checked; nothing else was lost: restore {CONFIG_FILE} (a copy, or a backup) and run again with "
                "--resume, or start afresh with another --run-id")
        if has_finished_work(path):
            raise WhiteboxError(
                f"{path} already holds results of an earlier run; pass --resume to "
                "continue it, or choose another --output (finished work is never "
                "overwritten)")
        stored = config_for_storage(config)
        stored.update(run_id=path.name, created=iso(created), **versions())
        with writing(path):
            if not path.exists():
                path.mkdir(parents=True)
                FRESH.add(path.resolve())
            write_atomic(path / CONFIG_FILE, dump_yaml(stored))
        run = cls(path, stored)
        ACTIVE[:] = [path]
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
        old = read_config(path)
        new = yaml.safe_load(dump_yaml(config_for_storage(config)))
        volatile = ALWAYS_VOLATILE | set(volatile_keys(old)) | set(volatile_keys(new)) | {DATA_FILES_KEY}
        differences = config_differences(old, new, volatile)
        if differences:
            lines = "\n".join(f"  {key}: {show(a)} (this run) -> {show(b)} (now)"
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
        ACTIVE[:] = [path]
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
        return cls(path, read_config(path))

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
                    f"sample {show(plain):.120} has no usable 'id' (needs a str or int); "
                    "give every example an id")
            if sample_id in done or sample_id in batch_ids:
                raise WhiteboxError(
                    f"sample id {sample_id!r} appears twice in {self.path}; example ids "
                    "must be unique (check the dataset for duplicate ids)")
            batch_ids.add(sample_id)
            lines.append(_dumps(plain))
        self.append_lines(lines)
        done.update(batch_ids)

    def append_lines(self, lines: Sequence[str]) -> None:
        """Append finished sample lines (each one :func:`sample_line`) and fsync."""
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
        if self._done_cache is not None:
            self._done_cache.update(json.loads(line)["id"] for line in lines)

    def forget_done(self) -> None:
        """Read the finished ids again at the next question (after samples.jsonl was rewritten)."""
        self._done_cache = None

    def annotate_samples(self, extra: Mapping[str | int, Mapping[str, Any]]) -> None:
        """Add fields to finished samples (by id), e.g. scores known only once the run is
        complete; the file is rewritten atomically, so an interruption loses nothing."""
        lines = []
        for sample in self.read_samples():
            sample.update(plain_value(dict(extra.get(sample["id"], {}))))
            lines.append(_dumps(sample))
        write_atomic(self.samples_path, "".join(lines))

    def read_samples(self) -> Iterator[dict[str, Any]]:
        """Yield the finished samples in the order written (a half-written tail is skipped)."""
        yield from read_samples_file(self.samples_path)

    def done_ids(self) -> set[str | int]:
        """Ids of the finished samples: ``samples.jsonl`` plus any rank's unmerged shard."""
        files = [self.samples_path, *self._shard_files()]
        ids = {sample["id"] for p in files for sample in read_samples_file(p) if "id" in sample}
        self._done_cache = set(ids)
        return ids

    def _done(self) -> set[str | int]:
        if self._done_cache is None:
            self.done_ids()
        assert self._done_cache is not None
        return self._done_cache

    def _repair_samples_tail(self) -> bool:
        """Make the samples file end with a newline; drop a half-written last line (True if dropped)."""
        self._tail_checked = True
        return repair_tail(self.append_path)

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
        write_atomic(path, json.dumps(ordered, indent=2, ensure_ascii=False,
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
        with writing(self.path), AtomicFile(path, "wb") as f:
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
                f.write(f"{iso(datetime.now(UTC))} {message}\n")


# ---------------------------------------------------------------------- files


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
