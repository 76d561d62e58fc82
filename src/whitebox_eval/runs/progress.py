"""Progress bars on stderr for long loops over batches."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


def progress(iterable: Iterable[T], total: int | None = None, desc: str | None = None,
             enabled: bool | None = None) -> Iterator[T]:
    """Wrap ``iterable`` in a tqdm bar written to stderr.

    ``enabled=None`` shows the bar only when stderr is a terminal (so logs and CI
    output stay clean); True forces it, False hides it.
    """
    if enabled is None:
        enabled = sys.stderr.isatty()
    return iter(tqdm(iterable, total=total, desc=desc, file=sys.stderr,
                     disable=not enabled, dynamic_ncols=True))
