"""A paper's transcribed tables, cell by cell (the ``tables`` of a paper's YAML, :mod:`.spec`):
``cite`` (Table N, enforced), the seed text ``region``, per row the published cells, where they
are in the seed text and where ours come from; ``unreadable`` where the extraction garbled a cell."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from whitebox_eval.errors import WhiteboxError

UNREADABLE = "unreadable"
"""A published cell the text extraction garbled: shown as such, never guessed."""


def require(d: dict, key: str, where: str) -> Any:
    if key not in d:
        raise WhiteboxError(f"{where}: missing {key!r}")
    return d[key]


@dataclass(frozen=True)
class Row:
    label: tuple[str, ...]
    published: tuple[Any, ...]
    seed: dict[str, Any] | None
    ours: dict[str, Any] | list[dict[str, Any] | None] | None
    note: str | None = None


@dataclass(frozen=True)
class Table:
    id: str
    cite: str
    title: str
    region: tuple[str, str]
    columns: tuple[dict[str, Any], ...]
    rows: tuple[Row, ...]
    published_model: str | None
    unit: str = "percent"
    ours_by: str = "column"  # "column": ours per published column; "model": one ours column per model; "rows"
    ours_note: str | None = None
    label_header: tuple[str, ...] = ()
    ours_rows: tuple[Row, ...] = ()  # ours_by "rows": rows of ours, one set per model, after the published rows

    @property
    def n_cells(self) -> int:
        return sum(len(r.published) for r in self.rows)


def table(d: dict, where: str) -> Table:
    cite = require(d, "cite", where)
    if not re.match(r"Table \d+", cite):
        raise WhiteboxError(f"{where}: cite must name the table number ('Table N'), got {cite!r}")
    columns = tuple(c if isinstance(c, dict) else {"name": str(c)} for c in require(d, "columns", where))
    rows = []
    for i, r in enumerate(require(d, "rows", where)):
        published = tuple(r.get("published") or ())
        if published and len(published) != len(columns):
            raise WhiteboxError(f"{where} row {i} {r.get('label')}: {len(published)} published cells for "
                                f"{len(columns)} columns")
        ours = r.get("ours")
        if isinstance(ours, list) and len(ours) != len(columns):
            raise WhiteboxError(f"{where} row {i} {r.get('label')}: {len(ours)} cells of ours for {len(columns)} columns")
        rows.append(Row(label=tuple(str(x) for x in require(r, "label", f"{where} row {i}")),
                        published=published, seed=r.get("seed"), ours=r.get("ours"), note=r.get("note")))
    region = tuple(require(d, "region", where))
    if len(region) != 2:
        raise WhiteboxError(f"{where}: region is [start text, end text]")
    ours_by = d.get("ours_by", "column")
    if ours_by not in ("column", "model", "rows"):
        raise WhiteboxError(f"{where}: ours_by is 'column', 'model' or 'rows'")
    ours_rows = []
    for i, r in enumerate(d.get("ours_rows") or ()):
        ours = list(require(r, "ours", f"{where} ours_rows {i}"))
        if len(ours) != len(columns):
            raise WhiteboxError(f"{where} ours_rows {i}: {len(ours)} cells for {len(columns)} columns")
        ours_rows.append(Row(label=tuple(str(x) for x in r.get("label") or ()), published=(), seed=None, ours=ours,
                             note=r.get("note")))
    if ours_by == "rows" and not ours_rows:
        raise WhiteboxError(f"{where}: ours_by rows needs ours_rows")
    return Table(id=require(d, "id", where), cite=cite, title=d.get("title", cite), region=region,
                 columns=columns, rows=tuple(rows), published_model=d.get("published_model"),
                 unit=d.get("unit", "percent"), ours_by=ours_by, ours_note=d.get("ours_note"),
                 label_header=tuple(d.get("label_header") or ()), ours_rows=tuple(ours_rows))
