"""The data files a run read, by content: config.yaml ``data_files: [{path, sha256, bytes}]``.

Every task file (each file of an MMLU folder, the dev-split files demonstrations came
from, the exported cache file of an ``hf:`` spec) is hashed in 1 MiB chunks, so large
files cost one read. ``--resume`` refuses a run whose data changed under it
(:func:`data_files_change`, called by :meth:`RunFolder.open_for_resume`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from whitebox_eval.datafiles import reading

CONFIG_KEY = "data_files"
CHUNK = 1 << 20


def file_record(path: str | Path) -> dict[str, Any]:
    """``{"path", "sha256", "bytes"}`` of one file, read in :data:`CHUNK`-byte pieces."""
    path = Path(path)
    digest, size = hashlib.sha256(), 0
    with reading(path), path.open("rb") as f:  # a failed open or read: the one line of every data file
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return {"path": str(path), "sha256": digest.hexdigest(), "bytes": size}


def data_file_records(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """:func:`file_record` of every path, each once, in the order given."""
    seen: set[str] = set()
    out = []
    for p in paths:
        if str(p) not in seen:
            seen.add(str(p))
            out.append(file_record(p))
    return out


def data_files_change(old: Sequence[Mapping[str, Any]] | None, new: Sequence[Mapping[str, Any]] | None) -> str | None:
    """Why ``new`` (this command's data files) differs from ``old`` (the run's), in one
    line naming the first file that changed, was added or is gone; None when they agree.
    A run written before data files were recorded (``old`` None) is not compared."""
    if old is None or new is None:
        return None
    before = {str(r.get("path")): r for r in old}
    after = {str(r.get("path")): r for r in new}
    for path, rec in before.items():
        if path not in after:
            return f"data file {path} was read by this run but not by this command"
        if rec.get("sha256") != after[path].get("sha256"):
            return (f"data file {path} changed since the run started (sha256 {str(rec.get('sha256'))[:12]}... "
                    f"-> {str(after[path].get('sha256'))[:12]}..., {rec.get('bytes')} -> {after[path].get('bytes')} bytes)")
    for path in after:
        if path not in before:
            return f"data file {path} is read now but was not read by this run"
    return None
