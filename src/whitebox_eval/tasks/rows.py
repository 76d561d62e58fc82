"""The machinery every dataset module shares: rows with file and line, the bad-row
policy, CSV / JSON-lines readers and field checks.

A malformed row (bad JSON, missing field, gold out of range, empty option, wrong
number of CSV fields) is reported as ``file:line: problem`` (1-based line where the row
starts); repeated options are not malformed (lm-eval scores such rows). ``on_bad_row="error"`` raises WhiteboxError at the first one;
``"skip"`` drops it, records a BadRow in the result's ``bad_rows`` and warns once with
a summary (when every row is malformed, that summary is the error). Every other row is
loaded; the whole file is read even with ``limit`` (the first ``limit`` items are
returned), so the same file always gives the same items.
"""

from __future__ import annotations

import csv
import random
import re
import string
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whitebox_eval.datafiles import json_lines, open_text
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem

ON_BAD_ROW = ("error", "skip")



@dataclass(frozen=True)
class BadRow:
    """A malformed row: file, 1-based line where the row starts, and what is wrong."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


class MalformedRowsWarning(UserWarning):
    """Emitted once per load when ``on_bad_row="skip"`` dropped rows."""


class MCQDataset(list[MCQItem]):
    """A list of items that also records the rows skipped while loading (``bad_rows``)."""

    def __init__(self, items: Iterable[MCQItem] = (), bad_rows: Iterable[BadRow] = ()) -> None:
        super().__init__(items)
        self.bad_rows: list[BadRow] = list(bad_rows)


class RowError(Exception):
    """A problem with one row; the message is the reason."""


@dataclass
class Row:
    path: Path
    line: int
    data: Any  # parsed record, or a RowError when reading failed


class Collector:
    """Applies the on_bad_row policy and keeps the bad rows."""

    def __init__(self, on_bad_row: str) -> None:
        if on_bad_row not in ON_BAD_ROW:
            raise WhiteboxError(f"on_bad_row must be one of {list(ON_BAD_ROW)}, got {on_bad_row!r}")
        self.policy = on_bad_row
        self.bad: list[BadRow] = []

    def report(self, path: Path, line: int, reason: str) -> None:
        bad = BadRow(str(path), line, reason)
        if self.policy == "error":
            raise WhiteboxError(f"{bad}  (fix the row, or pass --on-bad-row skip (on_bad_row='skip' from Python) to drop malformed rows)")
        self.bad.append(bad)

    def build(self, row: Row, make: Callable[[Row], MCQItem]) -> MCQItem | None:
        try:
            if isinstance(row.data, RowError):
                raise row.data
            item = make(row)
            item.validate()
            return item
        except (RowError, WhiteboxError) as exc:
            self.report(row.path, row.line, _strip_item_prefix(str(exc)))
            return None

    def finish(self, items: list[MCQItem], name: str, path: Path, limit: int | None) -> MCQDataset:
        if limit is not None:
            items = items[:limit]
        if self.bad:
            if not items:  # the problem is the error, not a warning above it
                raise WhiteboxError(f"{path} gave no {name} items: all {len(self.bad)} row(s) are malformed: "
                                    f"{self.summary()}")
            warnings.warn(f"skipped {len(self.bad)} malformed row(s) loading {name} from {path}: {self.summary()}",
                          MalformedRowsWarning, stacklevel=3)
        return MCQDataset(items, self.bad)

    def summary(self, shown: int = 5) -> str:
        """The bad rows as ``file:line: problem``, rows with the same file and problem as one."""
        groups: dict[tuple[str, str], list[BadRow]] = {}
        for b in self.bad:
            groups.setdefault((b.path, b.reason), []).append(b)
        parts = [str(rows[0]) + (f" (and {len(rows) - 1} more row(s) like it)" if len(rows) > 1 else "")
                 for rows in list(groups.values())[:shown]]
        more = f" (and {len(groups) - shown} more)" if len(groups) > shown else ""
        return "; ".join(parts) + more


def _strip_item_prefix(msg: str) -> str:
    return re.sub(r"^item '[^']*': ", "", msg)




def read_jsonl(path: Path) -> Iterator[Row]:
    """One JSON object per non-blank line; a malformed line becomes a row error."""
    for lineno, data in json_lines(path):
        yield Row(path, lineno, RowError(data) if isinstance(data, str) else data)


def read_csv(path: Path) -> Iterator[Row]:
    """CSV records (quoted fields may span lines); ``line`` is where each record starts. A
    read that fails (EIO, bytes that are not UTF-8) raises :func:`~whitebox_eval.datafiles.read_error`."""
    with open_text(path) as f:
        reader = csv.reader(f)
        start = 1
        try:
            for record in reader:
                line, start = start, reader.line_num + 1
                if not record or all(not c.strip() for c in record):
                    continue
                yield Row(path, line, record)
        except csv.Error as exc:
            yield Row(path, start, RowError(f"unreadable CSV ({exc}); the rest of the file was not read"))


def require(data: dict, key: str, kind: type | tuple[type, ...] = str) -> Any:
    if key not in data or data[key] is None:
        raise RowError(f"missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise RowError(f"field {key!r} should be {names}, found {type(value).__name__}")
    return value


def int_label(value: Any, field: str) -> int:
    if isinstance(value, bool):
        raise RowError(f"field {field!r} should be an integer, found {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise RowError(f"field {field!r} should be an integer option index, found {value!r}")


def letter_index(value: str, n: int) -> int:
    v = value.strip()
    if len(v) == 1 and v.upper() in string.ascii_uppercase[:n]:
        return string.ascii_uppercase.index(v.upper())
    raise RowError(f"answer {value!r} is not an option letter A-{string.ascii_uppercase[n - 1]}")


def text_list(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise RowError(f"field {field!r} should be a list of strings")
    return [x.strip() for x in value]



def existing(path: str | Path, *, file: bool = False) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise WhiteboxError(
            f"{path} does not exist; give a local file (or, for MMLU, a folder of subject CSVs), "
            "or a Hugging Face dataset as hf:DATASET_ID[:CONFIG][@SPLIT] when online")
    if file and not p.is_file():
        raise WhiteboxError(f"{path} is a folder; this dataset is read from a single file")
    return p


def balanced_golds(n: int, n_options: int, rng: random.Random) -> list[int]:
    golds = [i % n_options for i in range(n)]
    rng.shuffle(golds)
    return golds


def candidates(own: list[str], pool: list[str], rng: random.Random) -> Iterator[str]:
    """The row's own distractors, then random draws from ``pool``, then all of it shuffled."""
    yield from own
    for _ in range(min(64, len(pool))):
        yield pool[rng.randrange(len(pool))]
    yield from rng.sample(pool, len(pool))


def strip_cue(text: str) -> str:
    text = text.strip()
    text = re.sub(r"^Question:\s*", "", text)
    text = re.sub(r"\s*Answer:\s*$", "", text)
    return text.strip()
