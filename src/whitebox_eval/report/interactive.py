"""The interactive page's script, style and data block (``report --static`` leaves them out).

The script is package data (``data/explorer/*.js``, concatenated in ``SCRIPT_FILES`` order),
the style ``data/explorer/explorer.css``. The page's Content-Security-Policy lets only that
script run, by its SHA-256; the run data ride in a ``<script type="application/json">``
block (never executed, :func:`~whitebox_eval.report.explorer_data.embed`) that the script
parses and renders with ``textContent`` and attribute values only.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources

from whitebox_eval.report.explorer_data import embed
from whitebox_eval.report.explorer_views import page_data
from whitebox_eval.report.markup import Markup
from whitebox_eval.report.rundata import RunData

SCRIPT_FILES = ("common.js", "items.js", "mcqa.js", "suites.js", "compare.js", "main.js")


def _asset(name: str) -> str:
    return (resources.files("whitebox_eval.report") / "data" / "explorer" / name).read_text(encoding="utf-8")


@cache
def script() -> str:
    """The page's one script (every file of ``SCRIPT_FILES`` in order)."""
    text = "\n".join(_asset(name) for name in SCRIPT_FILES)
    assert "</script" not in text.lower()
    return text


@cache
def style() -> str:
    return _asset("explorer.css")


def csp() -> str:
    """No network; inline style, data: images, and only the page's own script (by hash)."""
    digest = base64.b64encode(hashlib.sha256(script().encode("utf-8")).digest()).decode("ascii")
    return ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


def body_end(runs: list[RunData]) -> Markup:
    """The data block and the script, placed after the page's sections."""
    return Markup(f'<script type="application/json" id="wb-data">{embed(page_data(runs))}</script>\n'
                  f"<script>{script()}</script>\n")
