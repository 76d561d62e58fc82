"""The interactive page's script, style and data block (``report --static`` leaves them out).

The script is package data (``data/explorer/*.js`` in ``SCRIPT_FILES`` order, each suite's
``data/views.js`` after ``items.js``),
the style ``data/explorer/explorer.css``. The page's Content-Security-Policy lets only that
script run, by its SHA-256; the run data ride in a ``<script type="application/json">``
block (never executed, :func:`embed`) that the script
parses and renders with ``textContent`` and attribute values only.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any
from functools import cache
from importlib import resources

from whitebox_eval.report.explorer_views import page_data, scripts
from whitebox_eval.report.markup import Markup
from whitebox_eval.report.rundata import RunData


def embed(payload: Mapping[str, Any]) -> str:
    """``payload`` as JSON safe inside ``<script type=application/json>``: ``<``, ``>`` and ``&``
    written as ``\\u`` escapes, so no data string can close the element."""
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


SCRIPT_FILES = ("common.js", "items.js", "compare.js", "main.js")
"""The page's own script files; each suite's view script (its record's ``script``) comes after
``items.js``."""


def _asset(name: str) -> str:
    return (resources.files("whitebox_eval.report") / "data" / "explorer" / name).read_text(encoding="utf-8")


def script() -> str:
    """The page's one script: ``common.js``, ``items.js``, every registered suite's view script,
    ``compare.js``, ``main.js``."""
    return _script(tuple(scripts()))


@cache
def _script(suite_scripts: tuple[tuple[str, str], ...]) -> str:
    parts = [_asset(name) for name in SCRIPT_FILES[:2]]
    parts += [(resources.files(package) / name).read_text(encoding="utf-8") for package, name in suite_scripts]
    parts += [_asset(name) for name in SCRIPT_FILES[2:]]
    text = "\n".join(parts)
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
