"""Atomic writes, and the one line a run prints when its folder cannot be written.

Every file of a run folder that is replaced as a whole (config.yaml, results.json,
arrays, parts, report.html) goes through :class:`AtomicFile`: a temporary file beside
it, fsync, rename. A write that fails because the disk is full, a quota is used up, the
file system is read-only or a permission is missing -- or because a write came back
short (numpy reports a full disk as ``"N requested and M written"``, with no errno) --
becomes one :class:`WhiteboxError` naming the run folder (:func:`writing`,
:func:`disk_error`): finished batches stay, and ``--resume`` continues.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

from whitebox_eval.errors import WhiteboxError

DISK_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
               errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
               errno.EPERM: "permission denied"}
"""OSError numbers that mean "this folder cannot be written": one line, exit 2, resumable."""

ACTIVE: list[Path] = []  # the run folder this process writes (named when a write fails)
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


def write_atomic(path: Path, text: str) -> None:
    with writing(path.parent), AtomicFile(path, "w") as f:
        f.write(text)


class AtomicFile:
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
    if not isinstance(exc, OSError):
        return None
    if exc.errno not in DISK_ERRNOS:
        if exc.errno is not None or not _SHORT_WRITE.search(str(exc)):
            return None
        exc = OSError(errno.ENOSPC, f"a write came back short ({exc}): the disk is probably full")
    if folder is None and exc.errno in (errno.EACCES, errno.EPERM):  # maybe a read: name the file
        if not exc.filename:
            return None
        return WhiteboxError(f"cannot access {exc.filename}: permission denied; fix its permissions "
                             "(or choose another path)")
    if folder is None:
        folder = ACTIVE[0] if ACTIVE else Path(exc.filename).parent if exc.filename else None
    elif ACTIVE and Path(folder).is_relative_to(ACTIVE[0]):
        folder = ACTIVE[0]  # name the run folder (what --resume continues), not a sub-folder
    where = f"cannot write to {folder}" if folder is not None else "cannot write the output"
    return WhiteboxError(
        f"{where}: {DISK_ERRNOS[exc.errno]} ({exc.strerror}); free space or fix the permissions "
        "(or choose another --output), then rerun the same command with --resume: finished "
        "batches are kept")
