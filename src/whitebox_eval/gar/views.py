"""What the report's explorer draws of a gar intervention run (``flips``, ``data/views.js``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whitebox_eval.runs.items import array, item_row, num


def views(folder: Path, results: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """An intervention run (``flips``): one item per example, a method per pass (base and each
    arm), the intervened heads' matched attention per example."""
    if not any(":" in str(s.get("id")) and "stage" in s for s in samples):
        return {}
    stages: list[str] = []
    by_key: dict[str, dict[str, dict]] = {}
    for s in samples:
        stage, key = str(s["id"]).split(":", 1)
        stages.append(stage) if stage not in stages else None
        by_key.setdefault(key, {})[stage] = s
        heads = [tuple(h) for h in results.get("heads", [])]
    matched_files = sorted((folder / "arrays").glob("matched_*.npy"))
    matched = array(folder, matched_files[0].stem) if matched_files else None
    items = []
    for n, (key, arms) in enumerate(by_key.items()):
        first = next(iter(arms.values()))
        row = item_row({**first, "id": key})
        row["num"] = {f"p(target) {st}": num(a.get("target_prob")) for st, a in arms.items()}
        for st, a in arms.items():
            row["pred"][st], row["ok"][st] = a.get("prediction"), a.get("correct")
        row["gold"] = first.get("target")
        row["gar"] = {"arms": [{"stage": st, "pred": a.get("prediction"), "ok": a.get("correct"),
                                "p": num(a.get("target_prob")), "probs": {k: num(v) for k, v in (a.get("probs") or {}).items()}}
                               for st, a in arms.items()],
                      "matched": [num(float(matched[n, l, h])) for l, h in heads] if matched is not None and n < len(matched) else None}
        items.append(row)
    return {"methods": stages, "items": items, "heads": [list(h) for h in heads],
            "pattern": results.get("pattern")}
