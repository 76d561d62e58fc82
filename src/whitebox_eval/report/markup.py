"""Escaping by default: the only way report text becomes HTML.

Every value that reaches the page goes through :func:`esc` unless it is already
:class:`Markup` (HTML built by these helpers). Page code writes literal templates and
passes the data as arguments::

    render("<td class={cls}>{text}</td>", cls="gold", text=sample["gold"])

so dataset, model and config text can never be glued into the page raw.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any


class Markup(str):
    """A string that already is safe HTML (made by :func:`esc`, :func:`render` or :func:`join`).

    Only this module creates it from templates written in the code; never wrap data in it.
    """

    __slots__ = ()


def esc(value: Any) -> Markup:
    """``value`` as HTML text: ``& < > " '`` escaped; :class:`Markup` passes unchanged."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def render(template: str, **values: Any) -> Markup:
    """Fill ``{name}`` fields of a literal HTML ``template`` with escaped ``values``.

    ``template`` must be a string literal of the report code (never data). Values that are
    :class:`Markup` are inserted as they are; everything else is escaped first.
    """
    return Markup(template.format_map({k: esc(v) for k, v in values.items()}))


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    """Concatenate parts (each escaped unless already :class:`Markup`) with a literal ``sep``."""
    return Markup(esc(sep).join(esc(p) for p in parts))
