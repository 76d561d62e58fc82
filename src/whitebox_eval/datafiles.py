"""Local data files (benchmarks in their published formats): opened and read one way everywhere.

A file that cannot be opened or read (a missing file, a failing disk (EIO), bytes that are
not UTF-8, a damaged Parquet file) is one :class:`WhiteboxError` line from
:func:`read_error`, naming the file (and, for text that is not UTF-8, the line).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
from pathlib import Path
from typing import Any, Iterator, TextIO

from whitebox_eval.errors import WhiteboxError

_RECORDERS: list[list[Path]] = []  # open recording() blocks, innermost last


@contextlib.contextmanager
def recording() -> Iterator[list[Path]]:
    """Collect every data file :func:`open_text` opens inside the block (in the order
    first opened, each once), so a run can record what it read (config.yaml ``data_files``)."""
    read: list[Path] = []
    _RECORDERS.append(read)
    try:
        yield read
    finally:
        del _RECORDERS[next(i for i, r in enumerate(_RECORDERS) if r is read)]


def note_read(path: str | Path) -> None:
    """Record ``path`` as read by the open :func:`recording` blocks (a file another library
    reads for us, such as lm-eval's dataset files)."""
    path = Path(path)
    for read in _RECORDERS:
        if path not in read:
            read.append(path)


def read_error(path: str | Path, exc: BaseException) -> WhiteboxError:
    """The one line for a data file that cannot be opened or read: ``exc`` is the OSError
    (a failed open, EIO), the UnicodeDecodeError, or a reader's error for a damaged file."""
    path = Path(path)
    if isinstance(exc, UnicodeDecodeError):
        where = _first_undecodable(path)
        if where is None:  # the file changed, or cannot be read again
            return WhiteboxError(f"{path} is not UTF-8 text ({exc.reason}); re-save it as UTF-8")
        line, byte = where
        return WhiteboxError(f"{path}:{line}: not UTF-8 text (byte 0x{byte:02X}); re-save the file as UTF-8")
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EIO:
            return WhiteboxError(f"cannot read {path}: {reason} (the disk or file system failed while reading it); "
                                 "restore the file, or copy it to a healthy disk, and run again")
        return WhiteboxError(f"cannot read {path}: {reason}")
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return WhiteboxError(f"cannot read {path}: it is damaged or not in the format its name says ({detail}); "
                         "write it again, or give the data as JSON lines or CSV")


@contextlib.contextmanager
def reading(path: str | Path, damaged: type[BaseException] | tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Turn a read error inside the block into :func:`read_error`'s line; ``damaged``: the
    exception types a binary reader (pyarrow) raises for a file it cannot parse."""
    try:
        yield
    except (OSError, UnicodeDecodeError, *((damaged,) if isinstance(damaged, type) else damaged)) as exc:
        raise read_error(path, exc) from exc


class _TextFile(io.TextIOWrapper):
    """A data file opened by :func:`open_text`: every read that fails raises :func:`read_error`."""

    def __init__(self, path: Path) -> None:
        super().__init__(open(path, "rb"), encoding="utf-8-sig", newline="")
        self.path = path

    def __next__(self) -> str:
        try:
            return super().__next__()
        except (OSError, UnicodeDecodeError) as exc:
            raise read_error(self.path, exc) from exc

    def read(self, size: int | None = -1) -> str:
        try:
            return super().read(size)
        except (OSError, UnicodeDecodeError) as exc:
            raise read_error(self.path, exc) from exc

    def readline(self, size: int = -1) -> str:
        try:
            return super().readline(size)
        except (OSError, UnicodeDecodeError) as exc:
            raise read_error(self.path, exc) from exc


def open_text(path: str | Path) -> TextIO:
    """Open a UTF-8 text file (a byte-order mark is accepted; newlines left to the reader,
    as csv wants). A file that cannot be opened, or a read that fails later (EIO, bytes
    that are not UTF-8), raises :func:`read_error`'s one line."""
    path = Path(path)
    try:
        f = _TextFile(path)
    except OSError as exc:
        raise read_error(path, exc) from exc
    note_read(path)
    return f


def check_readable(path: str | Path, *, text: bool = True) -> None:
    """Read ``path`` to its end (decoded as UTF-8 when ``text``), so a file that would fail
    halfway fails now, in :func:`read_error`'s one line."""
    if text:
        with open_text(path) as f:
            while f.read(1 << 20):
                pass
        return
    with reading(path), open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def _first_undecodable(path: Path) -> tuple[int, int] | None:
    """(1-based line, byte) of the first byte of ``path`` that is not UTF-8, read in 1 MiB
    pieces (a character cut between two pieces is carried over); None if all of it is."""
    line, carry = 1, b""
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                data, carry = carry + chunk, b""
                try:
                    data.decode("utf-8")
                    good = len(data)
                except UnicodeDecodeError as exc:
                    if exc.reason != "unexpected end of data" or exc.end != len(data):
                        return line + data.count(b"\n", 0, exc.start), data[exc.start]
                    good, carry = exc.start, data[exc.start:]
                line += data.count(b"\n", 0, good)
    except OSError:
        return None
    return (line, carry[0]) if carry else None


def json_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """``(line number, object)`` per non-blank line; a malformed line gives
    ``(line number, what is wrong)`` instead, so the caller decides to skip or stop.

    A UTF-8 byte-order mark is accepted; a file that is not UTF-8 raises (:func:`read_error`).
    """
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                yield lineno, f"invalid JSON ({_json_problem(exc)})"
                continue
            if not isinstance(data, dict):
                yield lineno, f"expected a JSON object, found {type(data).__name__}"
                continue
            yield lineno, data


def _json_problem(exc: json.JSONDecodeError) -> str:
    """``Expecting value at column 5``; json's own "Unterminated string starting at" ends in "at"."""
    return f"{exc.msg}{'' if exc.msg.endswith(' at') else ' at'} column {exc.colno}"


def json_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Like :func:`json_lines`, but a malformed line stops with ``path:line: problem``."""
    for lineno, data in json_lines(path):
        if isinstance(data, str):
            raise WhiteboxError(f"{path}:{lineno}: {data}; fix or remove the line")
        yield lineno, data
