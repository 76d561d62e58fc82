"""``samples.jsonl``: one JSON object per finished item, appended batch by batch.

A kill can leave a half-written last line; readers skip it and a resumed run cuts it
away (:func:`repair_tail`) before appending. Every line is written by
:func:`sample_line` (plain JSON, NaN as null), so a line read back and written again is
the same bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.plain_values import plain_value


def sample_line(record: Mapping[str, Any]) -> str:
    """One line of ``samples.jsonl``: the record as plain JSON (NaN as null), newline-ended."""
    return dumps(plain_value(record))


def dumps(plain: Any) -> str:
    return json.dumps(plain, ensure_ascii=False, allow_nan=False) + "\n"


def read_samples_file(path: Path) -> Iterator[dict[str, Any]]:
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


def repair_tail(path: Path) -> bool:
    """Make ``path`` end with a newline; drop a half-written last line. True when one was dropped."""
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
