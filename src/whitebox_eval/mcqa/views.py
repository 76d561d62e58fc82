"""What the report's explorer draws of an mcqa run (``attention``, ``lens``, ``head-grid``,
drawn by ``data/views.js``) and a reproduction's head heatmap of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.runs.items import array, f32, item_table, num, nums


def views(folder: Path, results: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per item the kept heads' attention rows over the prompt's own tokens, their option scores
    and the gold option's lens probability per layer; per run the head accuracy grids (a run made
    before the rows were kept shows the scores and the grid without rows)."""
    if not any("letter_logits" in s for s in samples):
        return {}
    table = item_table(samples)
    kept = [tuple(h) for h in (results.get("explorer") or {}).get("heads", [])]
    chosen = {m: tuple(results[m]["best_head"]) for m in ("attention", "qk")
              if isinstance(results.get(m), dict) and "best_head" in results[m]}
    heads = kept or list(dict.fromkeys(chosen.values()))
    rows, offsets = array(folder, "attention_rows"), array(folder, "attention_rows_offsets")
    before = array(folder, "attention_rows_before")
    scores = {m: array(folder, m) for m in ("attention", "qk")}
    lens = array(folder, "lens")
    for row, s in zip(table["items"], samples):
        i = s.get("doc_id")
        if not isinstance(i, int):
            continue
        n = len(s.get("labels") or [])
        row["num"].update(_gold_scores(s))
        view: dict[str, Any] = {"labels": s.get("labels"), "gold": s.get("gold"),
                                "pred": {m: (s.get(f"{m}_head") or {}).get("pred") for m in chosen}}
        if "prompt_tokens" in s and rows is not None and offsets is not None and i + 1 < len(offsets):
            mine = np.asarray(rows[offsets[i]:offsets[i + 1]])  # [own tokens, kept heads]
            view.update(tokens=s["prompt_tokens"], start=s["prompt_tokens_from"],
                        options=s["option_token_positions"], rows=[f32(r) for r in mine.T],
                        before=nums(before[i]) if before is not None else None)
        for m, arr in scores.items():
            if arr is not None and i < len(arr):
                view[m] = [nums(arr[i, l, h, :n]) for l, h in heads]
        if lens is not None and i < len(lens) and isinstance(s.get("gold"), int):
            logits = np.asarray(lens[i, :, :n], dtype=np.float64)
            p = np.exp(logits - logits.max(-1, keepdims=True))
            view["lens"] = nums((p / p.sum(-1, keepdims=True))[:, s["gold"]])
        row["mcqa"] = view
    grid = {m: [nums(r) for r in np.asarray(a)] for m in ("attention", "qk")
            if (a := array(folder, f"{m}_head_accuracy")) is not None}
    degenerate = {m: np.asarray(d, dtype=bool).tolist() for m in grid
                  if (d := array(folder, f"{m}_degenerate_heads")) is not None}
    return {**table, "heads": [list(h) for h in heads], "chosen": {m: list(h) for m, h in chosen.items()},
            "rows_kept": bool(kept) and rows is not None, "grid": grid, "degenerate": degenerate}


def _gold_scores(s: dict[str, Any]) -> dict[str, float | None]:
    """Numbers to sort mcqa items by: the baseline's probability of the gold letter (softmax
    over the letters) and each head's score of the gold option."""
    gold, out = s.get("gold"), {}
    if not isinstance(gold, int):
        return out
    logits = np.asarray(s.get("letter_logits") or [], dtype=np.float64)
    if gold < len(logits) and np.isfinite(logits).all():
        p = np.exp(logits - logits.max())
        out["p(gold) baseline"] = num(p[gold] / p.sum())
    for key, value in s.items():
        if key.endswith("_head") and isinstance(value, dict) and isinstance(value.get("scores"), list) \
                and gold < len(value["scores"]):
            out[f"gold score {key[:-5]} head"] = num(value["scores"][gold])
    return out


def figures(folder: Path, where: str) -> list[dict[str, Any]]:
    """A reproduction's head heatmap: QK-score accuracy per head over all items
    (arrays/qk_head_accuracy.npy, degenerate heads as None), the chosen head and chance."""
    from whitebox_eval.runs.folder import RunFolder

    table = folder / "arrays" / "qk_head_accuracy.npy"
    if not table.is_file():
        return []
    m = np.load(table)
    deg_path = folder / "arrays" / "qk_degenerate_heads.npy"
    deg = np.load(deg_path).astype(bool) if deg_path.is_file() else np.zeros(m.shape, dtype=bool)
    res = RunFolder.open(folder).load_results()
    return [{"kind": "heatmap",
             "matrix": [[None if deg[i, j] else round(float(v), 4) for j, v in enumerate(row)] for i, row in enumerate(m)],
             "chosen": (res.get("qk") or {}).get("best_head"), "chance": float(res.get("chance") or 0.0),
             "source": f"{where}/arrays/qk_head_accuracy.npy"}]
