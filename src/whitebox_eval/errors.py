"""The one exception type for mistakes a user can fix, and how the CLI shows warnings."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

_PACKAGE = str(Path(__file__).resolve().parent)


class WhiteboxError(Exception):
    """A problem the user can fix: the message says what to change.

    The CLI prints the message without a traceback and exits with status 2.
    """


def one_line_warnings():
    """Show whitebox-eval's own warnings (rows skipped, ...) as one ``warning: ...`` line, with
    no source or code line; others as before. Returns the previous ``warnings.showwarning``
    (the CLI puts it back when the command ends)."""
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if not str(Path(filename).resolve()).startswith(_PACKAGE):
            return previous(message, category, filename, lineno, file, line)
        text = " ".join(str(message).split())  # one line
        print(f"warning: {text}", file=file if file is not None else sys.stderr)

    warnings.showwarning = show
    return previous
