"""Per suite, what the page's item views draw, read from the run folder's files.

* mcqa (``attention``, ``lens``, ``head-grid``): per item the prompt's own tokens, the
  attention rows of the heads the run kept (``results.explorer.heads``, arrays
  ``attention_rows`` / ``attention_rows_offsets``), each kept head's Attention- and QK-scores per option (arrays
  ``attention`` / ``qk``) and the gold option's logit-lens probability per layer (arrays
  ``lens``, softmax over the option letters); per run the layers x heads accuracy grids.
  A run made before the rows were kept shows the scores and the grid without rows.
* gar intervention runs (``flips``): one item per example, a method per stage (base and
  each arm), the intervened heads' matched attention per example.
* span (``rollout``): the kept rollout matrices (``rollout_<stage>_<i>``) with the
  reference mask (``reference_<stage>_<i>``) and the per-target reference scores.
* mui (``neurons`` / ``features``): each response's key units per layer and the units
  themselves (layer.index), from ``arrays/key_sets.safetensors``; per response token the
  key units peaking there and its top units with scores (samples.jsonl, mui/explorer.py);
  feature runs (``--score sae``) also list each feature's items.
* formats (``formats``): the MCQ letter probabilities beside the free answers.

Each function returns keys merged into the run's entry (``items``/``methods`` when the
suite lays its items out itself, else only the suite's extras).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.report.explorer_data import TEXT_CAP, f32, item_row, item_table, num, nums
from whitebox_eval.report.metrics import cut
from whitebox_eval.report.rundata import RunData
from whitebox_eval.runs import RunFolder
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.estimates import is_number
from whitebox_eval.runs.key_set_file import read_key_set_file

KEY_UNITS_SHOWN = 64
"""Key units listed per response (all are counted per layer)."""

FEATURE_ITEMS = 8
"""Items listed per SAE feature in the features view."""


def page_data(runs: list[RunData]) -> dict[str, Any]:
    """Every run's explorer data, in page order (``key`` matches the run's section id)."""
    out = []
    for i, run in enumerate(runs):
        samples = [s for s in RunFolder.open(run.path).read_samples() if isinstance(s, dict)]
        entry = {"key": f"run{i}", "id": run.run_id, "suite": run.suite, "model": run.model, "task": run.task}
        entry.update(suite_views(run, samples))
        if "items" not in entry:
            entry.update(item_table(samples))
        out.append(entry)
    return {"runs": out}


def suite_views(run: RunData, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The suite's view data for ``run`` ({} for a suite without item views)."""
    suite = run.suite or ""
    if suite == "mcqa" and any("letter_logits" in s for s in samples):
        return _mcqa(run, samples)
    if suite == "gar" and any(":" in str(s.get("id")) and "stage" in s for s in samples):
        return _gar(run, samples)
    if suite == "span":
        return _span(run, samples)
    if suite == "mui":
        return _mui(run, samples)
    if suite == "formats":
        return _formats(samples)
    return {}


def _array(run: RunData, name: str) -> np.ndarray | None:
    path = run.path / "arrays" / f"{name}.npy"
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False) if path.is_file() else None
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------- mcqa


def _mcqa(run: RunData, samples: list[dict[str, Any]]) -> dict[str, Any]:
    table = item_table(samples)
    results = run.results or {}
    kept = [tuple(h) for h in (results.get("explorer") or {}).get("heads", [])]
    chosen = {m: tuple(results[m]["best_head"]) for m in ("attention", "qk")
              if isinstance(results.get(m), dict) and "best_head" in results[m]}
    heads = kept or list(dict.fromkeys(chosen.values()))
    rows, offsets = _array(run, "attention_rows"), _array(run, "attention_rows_offsets")
    before = _array(run, "attention_rows_before")
    scores = {m: _array(run, m) for m in ("attention", "qk")}
    lens = _array(run, "lens")
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
            if (a := _array(run, f"{m}_head_accuracy")) is not None}
    degenerate = {m: np.asarray(d, dtype=bool).tolist() for m in grid
                  if (d := _array(run, f"{m}_degenerate_heads")) is not None}
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


# ---------------------------------------------------------------------- gar


def _gar(run: RunData, samples: list[dict[str, Any]]) -> dict[str, Any]:
    stages: list[str] = []
    by_key: dict[str, dict[str, dict]] = {}
    for s in samples:
        stage, key = str(s["id"]).split(":", 1)
        stages.append(stage) if stage not in stages else None
        by_key.setdefault(key, {})[stage] = s
    results = run.results or {}
    heads = [tuple(h) for h in results.get("heads", [])]
    matched_files = sorted((run.path / "arrays").glob("matched_*.npy"))
    matched = _array(run, matched_files[0].stem) if matched_files else None
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


# ---------------------------------------------------------------------- span


def _span(run: RunData, samples: list[dict[str, Any]]) -> dict[str, Any]:
    table = item_table(samples)
    for row, s in zip(table["items"], samples):
        stage, i = s.get("stage"), s.get("index")
        view: dict[str, Any] = {"scores": nums(s["rollout_scores"]) if s.get("rollout_scores") else None,
                                "correct": s.get("correct"), "target": s.get("target"), "predicted": s.get("predicted")}
        if isinstance(stage, str) and isinstance(i, int):
            name = f"{stage.replace('/', '_').replace('.', 'p')}_{i}"
            roll, ref = _array(run, f"rollout_{name}"), _array(run, f"reference_{name}")
            if roll is not None:
                view["rollout"] = [nums(r) for r in np.asarray(roll)]
                view["tokens"] = s.get("tokens")
                view["rows"] = s.get("prediction_positions")
                if ref is not None:
                    view["reference"] = np.asarray(ref, dtype=np.int8).tolist()
        row["span"] = view
    return table


# ---------------------------------------------------------------------- mui


def _key_sets(path: Path) -> tuple[np.ndarray, np.ndarray, dict] | None:
    """(indices, offsets, meta) of ``arrays/key_sets.safetensors``, None when absent or unreadable."""
    if not path.is_file():
        return None
    try:
        return read_key_set_file(path)
    except WhiteboxError:
        return None


def _mui(run: RunData, samples: list[dict[str, Any]]) -> dict[str, Any]:
    table = item_table(samples)
    keys = _key_sets(run.path / "arrays" / "key_sets.safetensors")
    if keys is None:
        return table
    indices, offsets, meta = keys
    width, n_layers, kind = int(meta["width"]), int(meta["n_layers"]), str(meta.get("kind", "neuron"))
    where = {str(sid): k for k, sid in enumerate(meta.get("sample_ids", []))}
    by_id = {str(s.get("id")): s for s in samples}
    feature_items: dict[int, list[str]] = {}
    activations: dict[str, list[tuple[float, str, str]]] = {}
    for row in table["items"]:
        k = where.get(row["id"])
        if k is None:
            continue
        units = np.asarray(indices[offsets[k]:offsets[k + 1]], dtype=np.int64)
        per_layer = np.bincount(units // width, minlength=n_layers)
        s = by_id[row["id"]]
        row["mui"] = {"per_layer": per_layer.tolist(), "n": int(units.size),
                      "units": [f"{u // width}.{u % width}" for u in units[:KEY_UNITS_SHOWN].tolist()],
                      "tokens": s.get("response_tokens"), "token_keys": s.get("token_key_units"),
                      "token_top": s.get("token_top_units")}
        for u in units.tolist():
            feature_items.setdefault(u, []).append(row["id"])
        texts, tops = by_id[row["id"]].get("response_tokens"), by_id[row["id"]].get("token_top_units") or []
        for j, top in enumerate(tops):  # where each unit is among a token's top units: its activating tokens
            for unit, score in top:
                if texts and is_number(score) and score > 0:
                    activations.setdefault(unit, []).append((float(score), texts[j], row["id"]))
    out = {**table, "unit_kind": kind, "n_layers": n_layers, "width": width,
           "unit_label": "layer.neuron" if kind == "neuron" else "sae.feature (sae: its place in --sae)",
           "layer_mui": nums(a) if (a := _array(run, "layer_mui")) is not None else None}
    if kind != "neuron":  # SAE features: the features used by most items, with those items
        top = sorted(feature_items.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:32]
        out["features"] = []
        sources = (run.config or {}).get("sae_sources") or []  # config.yaml: each SAE's Neuronpedia page, if any
        for u, ids in top:
            name = f"{u // width}.{u % width}"
            best = sorted(activations.get(name, []), key=lambda a: -a[0])[:FEATURE_ITEMS]
            feat = {"unit": name, "n": len(ids), "items": ids[:FEATURE_ITEMS], "tokens": [[num(x), t, i] for x, t, i in best]}
            src = sources[u // width] if u // width < len(sources) and isinstance(sources[u // width], dict) else {}
            if str(src.get("neuronpedia_url", "")).startswith("https://www.neuronpedia.org/"):  # never another scheme
                feat["neuronpedia"] = f"{src['neuronpedia']}/{u % width}"
                feat["link"] = f"{src['neuronpedia_url']}/{u % width}"
            out["features"].append(feat)
    return out


# ---------------------------------------------------------------------- formats


def _formats(samples: list[dict[str, Any]]) -> dict[str, Any]:
    table = item_table(samples)
    for row, s in zip(table["items"], samples):
        p = s.get("p_correct") if isinstance(s.get("p_correct"), dict) else {}
        for fmt, value in p.items():
            row["pred"][fmt], row["ok"][fmt] = None if num(value) is None else f"{num(value):.3g}", None
            row["num"][f"p_correct {fmt}"] = num(value)
        prompts = s.get("prompts") if isinstance(s.get("prompts"), dict) else {}
        if prompts.get("mcq_plain"):
            row["text"] = cut(str(prompts["mcq_plain"]), TEXT_CAP)
        row["formats"] = {"mcq": {k: num(v) for k, v in (s.get("mcq") or {}).items()}, "p_correct": {k: num(v) for k, v in p.items()},
                          "answer": s.get("answer"),
                          "generations": {f: [cut(str(g), 600) for g in gens] for f, gens in (s.get("generations") or {}).items()}}
    table["methods"] = list(dict.fromkeys(m for row in table["items"] for m in row["pred"]))
    return table

