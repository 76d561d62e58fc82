"""CosmosQA (Huang et al.): csv or jsonl with ``id, context, question, answer0..3, label``;
paper 000 Listing 2."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.rows import (
    Collector, MCQDataset, Row, RowError, existing, int_label, read_csv, read_jsonl, require)

def records(path: Path) -> Iterator[Row]:
    """Rows of a headered CSV (as dicts) or of a jsonl file, chosen by extension."""
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        yield from read_jsonl(path)
        return
    header: list[str] | None = None
    for row in read_csv(path):
        if isinstance(row.data, RowError):
            yield row
            continue
        if header is None:
            header = [c.strip() for c in row.data]
            continue
        if len(row.data) != len(header):
            yield Row(path, row.line, RowError(f"expected {len(header)} fields as in the header, found {len(row.data)}"))
        else:
            yield Row(path, row.line, dict(zip(header, row.data)))


def load_cosmosqa(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
                  seed: int = 0) -> MCQDataset:
    """CosmosQA (Huang et al.; paper 000 Listing 2), csv or jsonl with
    ``id, context, question, answer0..answer3, label``. ``seed`` is unused."""
    path = existing(path, file=True)
    col = Collector(on_bad_row)

    def make(r: Row) -> MCQItem:
        d = r.data
        keys = sorted((k for k in d if re.fullmatch(r"answer\d+", k)), key=lambda k: int(k[6:]))
        if not keys:
            raise RowError("missing fields 'answer0'..'answer3'")
        opts = []
        for k in keys:
            opts.append(str(require(d, k)).strip())
        gold = int_label(require(d, "label", (str, int)), "label")
        return MCQItem(id=f"cosmosqa/{d.get('id') or r.line}", question=str(require(d, "question")).strip(),
                       options=opts, gold=gold, context=str(require(d, "context")).strip())

    items = [i for r in records(path) if (i := col.build(r, make)) is not None]
    return col.finish(items, "cosmosqa", path, limit)
