"""``--limit N`` or ``--limit F``: a number of items, or a fraction of them.

A whole number ``N >= 1`` is that many items (as each suite has always read it). A fraction
``0 < F < 1`` is that share of the items the run evaluates without ``--limit``, rounded up
(at least one): a file's items (mcqa, after its demonstrations; mui), a generated task's default
count (mcqa's 500 ssd/arithmetic items, formats' 160 arithmetic / up to 1,000 text questions),
each task's default set in gar (8 / 16 per task, rounded up to Yes/No pairs where the task has
them), the default 100 examples of each split in span. config.yaml records the limit as given.
"""

from __future__ import annotations

import math
from fractions import Fraction

from whitebox_eval.errors import WhiteboxError

USAGE = "a whole number of items (>= 1) or a fraction of them between 0 and 1 (0.1 = a tenth)"


def checked(limit):
    """``limit`` as an int (a whole number, ``2.0`` included) or a float fraction in (0, 1); None stays None."""
    if limit is None:
        return None
    if isinstance(limit, bool):
        raise WhiteboxError(f"--limit must be {USAGE}; got {limit!r}")
    try:
        value = float(limit)
    except (TypeError, ValueError):
        raise WhiteboxError(f"--limit must be {USAGE}; got {limit!r}") from None
    if value >= 1 and value.is_integer():
        return int(value)
    if 0 < value < 1:
        return value
    raise WhiteboxError(f"--limit must be {USAGE}; got {limit!r}")


def is_fraction(limit) -> bool:
    return limit is not None and not isinstance(limit, bool) and 0 < float(limit) < 1


def taken(limit, n: int) -> int:
    """Items a limit keeps of the ``n`` the run has without one: a fraction of ``n`` rounded up
    (at least 1; computed on the decimal as written, so 0.1 x 30 is 3), a number as it is, all
    ``n`` without a limit."""
    if limit is None:
        return n
    if is_fraction(limit):
        return max(1, math.ceil(Fraction(repr(float(limit))) * n))
    return int(limit)


def offered(n_made: int, default: int | None = None, limit=None) -> int:
    """The items a run has without ``--limit``, for "evaluated K of N": a file's ``n_made``; a
    generated task (``default``: its count without a limit) made only its share under a limit,
    so it offers ``default`` (or more, where a larger limit made more)."""
    if default is None or limit is None:
        return n_made
    return max(n_made, default)
