"""Run ids: the name of a run (or reproduction) folder directly inside ``--output``.

Checked once, here, for every command that takes ``--run-id`` (the option's callback, so a
bad id stops the command before any work) and for every folder made from Python
(:meth:`RunFolder.create`, ``studies.reproduce``): an id is a plain folder name, so the
folder it names never lies outside ``--output``.
"""

from __future__ import annotations

import re
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.fresh import check_output_root

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MAX_LENGTH = 200  # a file system allows 255 bytes; room is left for the suffixes of child runs


def check_run_id(run_id: str | None) -> str | None:
    """``run_id`` when it is a plain folder name (None stays None); else one line saying why."""
    if run_id is None:
        return None
    if not NAME.match(run_id):
        raise WhiteboxError(f"run id {run_id!r} is not a plain folder name: use letters, digits, '.', '_' and '-' "
                            "only, starting with a letter or digit (no slashes); --output chooses where it goes")
    if len(run_id) > MAX_LENGTH:
        raise WhiteboxError(f"run id {run_id[:40]!r}... is {len(run_id)} characters long; give at most {MAX_LENGTH}")
    return run_id


def run_path(root: str | Path, run_id: str) -> Path:
    """``<root>/<run_id>``, after checking both: ``root`` is (or will be) a folder, ``run_id`` a plain name."""
    root = Path(root)
    check_output_root(root)
    return root / check_run_id(run_id)


def run_id_option(ctx, param, value: str | None) -> str | None:
    """The click callback of every ``--run-id`` option: :func:`check_run_id`."""
    return check_run_id(value)
