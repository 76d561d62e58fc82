"""One way to keep a step's output: computed once, written atomically, read back on resume.

A *kept* output is that of a step outside the resumable pass (:mod:`.passes`), one file:
``kept(folder, name, compute, kind=JSON)`` returns the content of ``folder/name.json``
when it is there, readable and ``valid``; otherwise it calls ``compute()``, writes the
result atomically (:mod:`.atomic`) and returns it as read back (so a first run and a
resumed one continue from the same value). A torn or damaged file is computed again,
with a line in the current run's log. ``kind=NPY`` keeps a numpy array (``mmap=True``
maps a large one instead of reading it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from whitebox_eval.runs.atomic import AtomicFile, writing
from whitebox_eval.runs.progress import log_line

JSON, NPY = "json", "npy"
KINDS = (JSON, NPY)


def kept_path(folder: str | Path, name: str, kind: str = JSON) -> Path:
    """Where step ``name`` of ``kind`` keeps its output in ``folder``."""
    if kind not in KINDS:
        raise ValueError(f"unknown kept kind {kind!r}; one of {', '.join(KINDS)}")
    return Path(folder) / f"{name}.{kind}"


def _read(path: Path, kind: str, mmap: bool) -> Any:
    if kind == JSON:
        return json.loads(path.read_text(encoding="utf-8"))
    import numpy as np

    return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)


def _write(path: Path, kind: str, value: Any) -> None:
    with writing(path.parent), AtomicFile(path, "w" if kind == JSON else "wb") as f:
        if kind == JSON:
            f.write(json.dumps(value, indent=1) + "\n")
        else:
            import numpy as np

            np.save(f, np.asarray(value), allow_pickle=False)


def kept(folder: str | Path, name: str, compute: Callable[[], Any], *, kind: str = JSON,
          valid: Callable[[Any], bool] | None = None, mmap: bool = False) -> Any:
    """Stage ``name``'s output: read from ``folder`` when present and ``valid``, else computed,
    written atomically and read back."""
    path = kept_path(folder, name, kind)
    if path.is_file():
        try:
            kept = _read(path, kind, mmap)
        except (OSError, ValueError, EOFError) as e:  # torn or damaged: computed again
            log_line(f"kept {path.name} unreadable ({type(e).__name__}: {e}); computing it again")
        else:
            if valid is None or valid(kept):
                return kept
            log_line(f"kept {path.name} does not match this run; computing it again")
    _write(path, kind, compute())
    return _read(path, kind, mmap)

