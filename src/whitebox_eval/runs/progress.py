"""Progress of long loops, wherever the output goes.

- stderr is a terminal: a tqdm bar.
- anything else (``nohup``, a scheduler, CI, ``> log 2>&1``): one plain line every 10%
  of the loop or every minute, whichever comes first, and at the end: items done, rate,
  elapsed and ETA.
- the run folder opened last (:func:`log_to`, set by ``RunFolder``) gets the same lines in
  ``run.log``, bar or not, so a long run's log shows where it is.

``WHITEBOX_PROGRESS=bar|lines|off`` overrides the choice for stderr.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

LINE_EVERY_FRACTION = 0.10
LINE_EVERY_SECONDS = 60.0

_log_sink: Callable[[str], None] | None = None
#: the logger whose INFO lines say a model is loading (models/loading.py)
MODEL_LOGGER = "whitebox_eval.models.loading"


def log_to(sink: Callable[[str], None] | None) -> None:
    """Send progress lines to ``sink`` too (``RunFolder.log`` of the run in progress); from the
    first run on, the model loader's lines (``loading MODEL ...``) are shown as notes."""
    global _log_sink
    _log_sink = sink
    _show_model_loading()


class _Notes(logging.Handler):
    """The model loader's INFO lines as :func:`note` lines (stderr and run.log) while this command
    writes a run folder (a model loaded to check input before it is not announced: a mistake
    found then stays one line)."""

    def emit(self, record: logging.LogRecord) -> None:
        from whitebox_eval.runs.atomic import ACTIVE

        if ACTIVE:
            note(record.getMessage())


def _show_model_loading() -> None:
    logger = logging.getLogger(MODEL_LOGGER)
    if not any(isinstance(h, _Notes) for h in logger.handlers):
        logger.addHandler(_Notes(logging.INFO))
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)


def log_line(line: str) -> None:
    """One line in the current run's ``run.log`` (nothing when no run is open)."""
    if _log_sink is not None:
        _log_sink(line)


def _stderr_mode(enabled: bool | None) -> str:
    if enabled is False:
        return "off"
    forced = os.environ.get("WHITEBOX_PROGRESS", "").strip().lower()
    if forced in ("bar", "lines", "off"):
        return forced
    if enabled is None and sys.stderr.isatty():
        return "bar"
    return "bar" if enabled and sys.stderr.isatty() else "lines"


def duration(seconds: float) -> str:
    """``1:05`` / ``2:03:04``: seconds as a progress line writes them."""
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def progress_line(desc: str | None, done: int, total: int | None, elapsed: float) -> str:
    """``mcqa main: 12/40 (30%), 2.5 s/it, elapsed 0:30, ETA 1:10``."""
    head = f"{desc or 'progress'}: {done}" + (f"/{total} ({100 * done / total:.0f}%)" if total else "")
    if done == 0:
        return head
    per = elapsed / done
    rate = f"{per:.3g} s/it" if per >= 1 else f"{1 / per:.3g} it/s" if per > 0 else "-"
    eta = f", ETA {duration(per * (total - done))}" if total and done < total else ""
    return f"{head}, {rate}, elapsed {duration(elapsed)}{eta}"


def _lines(iterable: Iterable[T], total: int | None, desc: str | None, to_stderr: bool, to_log: bool,
           clock: Callable[[], float], after: Callable[[int, int | None, float], str] | None = None,
           bar=None) -> Iterator[T]:
    start = last = clock()
    step = max(1, int(total * LINE_EVERY_FRACTION)) if total else None
    done = 0

    def emit() -> None:
        extra = after(done, total, clock() - start) if after is not None and done else ""
        line = progress_line(desc, done, total, clock() - start) + extra
        if bar is not None and extra:
            bar.set_postfix_str(extra.lstrip(", "), refresh=False)
        if to_stderr:
            print(line, file=sys.stderr, flush=True)
        if to_log and _log_sink is not None:
            _log_sink(line)

    for item in iterable:
        yield item  # the caller's work on this item happens here
        done += 1
        now = clock()
        if (step and (done % step == 0 or done == total)) or now - last >= LINE_EVERY_SECONDS:
            emit()
            last = now
    if total is None or done != total:
        emit()  # the loop ended early or had no known length: say where it stopped


def progress(iterable: Iterable[T], total: int | None = None, desc: str | None = None,
             enabled: bool | None = None, clock: Callable[[], float] = time.monotonic,
             after: Callable[[int, int | None, float], str] | None = None) -> Iterator[T]:
    """Wrap ``iterable`` with progress on stderr (a bar on a terminal, lines elsewhere) and
    in the current run's ``run.log``. ``enabled=False`` silences both (e.g. non-zero ranks).
    ``after(done, total, elapsed)``: text each line ends with (a study's overall estimate)."""
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    mode = _stderr_mode(enabled)
    to_log = enabled is not False
    if mode == "bar":
        from tqdm import tqdm

        bar = tqdm(iterable, total=total, desc=desc, file=sys.stderr, dynamic_ncols=True)
        return _lines(bar, total, desc, to_stderr=False, to_log=to_log, clock=clock, after=after, bar=bar)
    return _lines(iterable, total, desc, to_stderr=mode == "lines", to_log=to_log, clock=clock, after=after)


def note(line: str, enabled: bool | None = None) -> None:
    """One line of what a study is doing (a model loading, a pass starting) on stderr, unless
    progress is off, and in the current run's ``run.log``."""
    if _stderr_mode(enabled) != "off" and os.environ.get("RANK", "0") == "0":
        print(line, file=sys.stderr, flush=True)
    if enabled is not False:
        log_line(line)
