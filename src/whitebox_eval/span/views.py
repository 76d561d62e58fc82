"""What the report's explorer draws of a span run (``rollout``, ``data/views.js``) and a
reproduction's reference-attention maps of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.runs.items import array, item_table, nums


def views(folder: Path, results: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The kept rollout matrices (``rollout_<pass>_<i>``) beside the reference mask
    (``reference_<pass>_<i>``) and the per-target reference scores (``rollout``)."""
    table = item_table(samples)
    for row, s in zip(table["items"], samples):
        stage, i = s.get("stage"), s.get("index")
        view: dict[str, Any] = {"scores": nums(s["rollout_scores"]) if s.get("rollout_scores") else None,
                                "correct": s.get("correct"), "target": s.get("target"), "predicted": s.get("predicted")}
        if isinstance(stage, str) and isinstance(i, int):
            name = f"{stage.replace('/', '_').replace('.', 'p')}_{i}"
            roll, ref = array(folder, f"rollout_{name}"), array(folder, f"reference_{name}")
            if roll is not None:
                view["rollout"] = [nums(r) for r in np.asarray(roll)]
                view["tokens"] = s.get("tokens")
                view["rows"] = s.get("prediction_positions")
                if ref is not None:
                    view["reference"] = np.asarray(ref, dtype=np.int8).tolist()
        row["span"] = view
    return table


def figures(folder: Path, where: str) -> list[dict[str, Any]]:
    """A reproduction's reference-attention maps: the run's plots/rollout_*.png, by path."""
    return [{"kind": "image", "path": f"{where}/plots/{png.name}"} for png in sorted((folder / "plots").glob("rollout_*.png"))]
