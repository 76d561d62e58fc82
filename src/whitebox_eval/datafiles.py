"""Local data files (benchmarks in their published formats): opened and read one way everywhere."""

from __future__ import annotations

import contextlib
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


def open_text(path: str | Path) -> TextIO:
    """Open a UTF-8 text file (a byte-order mark is accepted; newlines left to the reader,
    as csv wants); a file that cannot be opened raises with the reason."""
    path = Path(path)
    try:
        f = path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise WhiteboxError(f"cannot read {path}: {exc}") from exc
    note_read(path)
    return f


def json_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """``(line number, object)`` per non-blank line; a malformed line gives
    ``(line number, what is wrong)`` instead, so the caller decides to skip or stop.

    A UTF-8 byte-order mark is accepted; a file that is not UTF-8 raises.
    """
    with open_text(path) as f:
        try:
            for lineno, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield lineno, f"invalid JSON ({exc.msg} at column {exc.colno})"
                    continue
                if not isinstance(data, dict):
                    yield lineno, f"expected a JSON object, found {type(data).__name__}"
                    continue
                yield lineno, data
        except UnicodeDecodeError as exc:
            raise WhiteboxError(f"{path} is not UTF-8 text ({exc}); re-save it as UTF-8") from exc


def json_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Like :func:`json_lines`, but a malformed line stops with ``path:line: problem``."""
    for lineno, data in json_lines(path):
        if isinstance(data, str):
            raise WhiteboxError(f"{path}:{lineno}: {data}; fix or remove the line")
        yield lineno, data
