"""What the report's explorer and a reproduction draw of a toy run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whitebox_eval.runs.items import item_table


def views(folder: Path, results: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, Any]:
    table = item_table(samples)
    for row, s in zip(table["items"], samples):
        row["toy"] = {"draw": s.get("draw")}
    return table


def figures(folder: Path, where: str) -> list[dict[str, Any]]:
    return [{"kind": "toy", "path": f"{where}/results.json"}]
