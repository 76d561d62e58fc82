"""Array parts of resumable passes (``arrays/parts/<pass>/*.npz``): one file per batch.

A part is written atomically (temporary file, fsync, rename), so a kill or a full disk
leaves either the whole part or none. A part that still cannot be read (written by an
older version, or damaged on disk) counts as not done: :func:`read_parts` skips it, says
so in ``run.log`` and renames it ``*.npz.unreadable``, and the pass recomputes its batch.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from whitebox_eval.runs.atomic import AtomicFile, writing

UNREADABLE_SUFFIX = ".unreadable"


def write_part(path: Path | str, **arrays: np.ndarray) -> Path:
    """Write ``arrays`` to the ``.npz`` file ``path`` atomically; returns ``path``."""
    path = Path(path)
    with writing(path.parent), AtomicFile(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def read_parts(folder: Path | str, log: Callable[[str], None] | None = None, *,
               set_aside: bool = True) -> Iterator[tuple[Path, dict[str, np.ndarray]]]:
    """``(path, arrays)`` for every readable ``*.npz`` in ``folder``, in name order.

    An unreadable part is skipped and reported through ``log``; with ``set_aside`` it is
    renamed ``<name>.npz.unreadable`` so later reads do not meet it again (its batch is
    recomputed by the pass that finds it missing).
    """
    for path in sorted(Path(folder).glob("*.npz")):
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {key: z[key] for key in z.files}
        except FileNotFoundError:  # set aside by another rank meanwhile
            continue
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as exc:
            if log is not None:
                log(f"part {path} is unreadable ({type(exc).__name__}: {exc}); its batch is recomputed")
            if set_aside:
                try:
                    path.replace(path.with_name(path.name + UNREADABLE_SUFFIX))
                except OSError:
                    pass
            continue
        yield path, arrays
