"""What the report's explorer draws of a mui run (``neurons`` / ``features``, ``data/views.js``), and
each response's answer class (right / wrong / off-format, :mod:`whitebox_eval.mui.answer_classes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.estimates import is_number
from whitebox_eval.runs.items import array, item_table, num, nums
from whitebox_eval.runs.key_set_file import read_key_set_file

KEY_UNITS_SHOWN = 64
"""Key units listed per response (all are counted per layer)."""

FEATURE_ITEMS = 8
"""Items listed per SAE feature in the features view."""


def _key_sets(path: Path) -> tuple[np.ndarray, np.ndarray, dict] | None:
    """(indices, offsets, meta) of ``arrays/key_sets.safetensors``, None when absent or unreadable."""
    if not path.is_file():
        return None
    try:
        return read_key_set_file(path)
    except WhiteboxError:
        return None


def _sae_sources(folder: Path) -> list:
    """config.yaml's ``sae_sources`` (what each SAE is, :mod:`whitebox_eval.sae.sources`), or []."""
    import yaml

    try:
        config = yaml.safe_load((Path(folder) / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return []
    return config.get("sae_sources") or [] if isinstance(config, dict) else []


CLASS_SHOWN = {"right": ("right", True), "wrong": ("wrong", False), "off_format": ("off-format", None)}
"""Each answer class as the item table's ``class`` column shows it: its label and its mark (off-format is
neither correct nor incorrect)."""


def answer_classes(folder: Path, results: dict[str, Any], samples: list[dict[str, Any]]) -> tuple[dict | None, list]:
    """The run's class summary (each class's count, the off-format share with its Wilson interval, the
    definition; ``not_classified`` when its responses cannot be classified) and each sample's class
    (None where unknown). A run written before the class is classified from its texts by the suite's
    read-back (:func:`~whitebox_eval.mui.answer_classes.complete`) on copies: the folder is not written.
    None for a run that is not a finished study of responses."""
    from whitebox_eval.mui.answer_classes import CLASSES, complete
    from whitebox_eval.runs import RunFolder

    results, samples = dict(results or {}), [dict(s) for s in samples]
    read_back = "answer_classes" not in results
    if read_back:
        try:
            config = RunFolder.open(folder).config
        except (WhiteboxError, OSError):
            config = {}
        complete(results, samples, config)
    got = results.get("answer_classes")
    if not isinstance(got, dict):
        return None, [None] * len(samples)
    if "not_classified" in got:
        return {"not_classified": str(got["not_classified"])}, [None] * len(samples)
    summary = {"counts": {c: int(got.get(c, 0)) for c in CLASSES}, "n": sum(int(got.get(c, 0)) for c in CLASSES),
               "off_format": num(results.get("off_format")), "ci": nums(results.get("off_format_ci") or []),
               "definition": got.get("definition"), "read_back": read_back}
    return summary, [s.get("class") for s in samples]


def views(folder: Path, results: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Each response's class (the ``class`` column; the run's counts and off-format share in
    ``answer_classes``), its key units per layer and the units themselves (layer.index), from
    ``arrays/key_sets.safetensors``; per response token the key units peaking there and its top
    units with scores; feature runs (``--score sae``) also list each feature's items
    (``neurons`` / ``features``)."""
    table = item_table(samples)
    summary, classes = answer_classes(folder, results, samples)
    if summary is not None:
        table["answer_classes"] = summary
    for row, c in zip(table["items"], classes):
        if summary is not None:
            row["mui"] = {"class": c}
        if c in CLASS_SHOWN:
            row["pred"]["class"], row["ok"]["class"] = CLASS_SHOWN[c]
    if any(c in CLASS_SHOWN for c in classes):  # a column to filter by, not a method to compare ("methods disagree")
        table["compare"], table["methods"] = table["methods"], [*table["methods"], "class"]
    keys = _key_sets(folder / "arrays" / "key_sets.safetensors")
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
        row["mui"] = {**row.get("mui", {}), "per_layer": per_layer.tolist(), "n": int(units.size),
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
           "layer_mui": nums(a) if (a := array(folder, "layer_mui")) is not None else None}
    if kind != "neuron":  # SAE features: the features used by most items, with those items
        top = sorted(feature_items.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:32]
        out["features"] = []
        sources = _sae_sources(folder)  # config.yaml: each SAE's Neuronpedia page, if any
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
