"""Cache entries filled once (the dequantized GGUF cache, fine-tuned weights, trained SAEs):
a partial folder renamed into place under an exclusive lock."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path


@contextlib.contextmanager
def exclusive_lock(lock: Path):
    """Hold an exclusive ``flock`` on ``lock`` (nothing where the platform has none): one process
    fills a cache entry while the others wait (the GGUF cache, fine-tuned weights, trained SAEs)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: the rename alone keeps the cache whole
        yield
        return
    with open(lock, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def fill_once(target: Path, complete: Callable[[Path], bool], build: Callable[[Path], None]) -> bool:
    """Fill the cache entry ``target`` once: ``build(folder)`` writes it into a fresh partial
    folder that is renamed into place under an exclusive lock, so a killed process leaves no
    half entry and a second process waits and then reuses the first's (where there is no
    ``flock``, the one whose rename loses keeps the winner's). True when built now, False when
    ``complete(target)`` already held (before or after the wait)."""
    if complete(target):
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(target.with_name(target.name + ".lock")):
        if complete(target):  # another process finished it while this one waited
            return False
        tmp = target.with_name(f"{target.name}.partial-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            tmp.mkdir()
            build(tmp)
            if target.exists() and not complete(target):
                shutil.rmtree(target, ignore_errors=True)  # an entry left incomplete by an older version
            try:
                tmp.rename(target)
            except OSError:
                if not complete(target):  # not another process's finished entry
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return True
