"""MUI along one training (paper 001 sec. 3.3): every checkpoint a fine-tuning kept, on one held-out task.

The model is a ``finetune`` run folder that kept checkpoints (``--keep-checkpoints``,
:mod:`whitebox_eval.models.checkpoints`: the model before training and at steps spread over it).
Each checkpoint's weights are loaded in turn into one model and run through the MUI study on the
same items (``runs/step-NNNNNN/``, each a resumable run folder whose config.yaml records the
checkpoint's fingerprint): per checkpoint its accuracy, MUI (the study's key-neuron union) and mean
response length (tokens), with each item's correctness, length and key units as evidence.

Sec. 3.3's optimization directions are read as a trend over the checkpoints: Kendall's tau of MUI
(and of accuracy and length, beside) against the step, tested on the checkpoints' order and on
the items (:mod:`whitebox_eval.mui.trend`), and the direction of each move between consecutive checkpoints
(:func:`~whitebox_eval.mui.utility_law.classify_direction`; also where both changes are significant).
A checkpoint that answers no item right is left out of the trend (:data:`EXCLUSION_RULE`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.checkpoints import checkpoint_name, list_checkpoints
from whitebox_eval.models.training import kept_weights, load_weights
from whitebox_eval.mui.finished import load_key_sets
from whitebox_eval.mui.over_runs import paired_tests
from whitebox_eval.mui.statistics import jackknife_mui
from whitebox_eval.mui.study import run_mui
from whitebox_eval.mui.trajectory_config import TrajectoryConfig
from whitebox_eval.mui.trend import mean_trend, mui_trend
from whitebox_eval.mui.utility_law import classify_direction
from whitebox_eval.runs import RunFolder, open_run
from whitebox_eval.runs.finished import is_finished

SUB_RUNS = "runs"
EXCLUSION_RULE = ("a checkpoint with accuracy 0 on the held-out items is left out of the trend (sec. 3.2: as "
                  "performance approaches zero, MUI tends toward infinity, implying evaluation loses its meaning)")
MIN_CHECKPOINTS = 3


def run_trajectory(cfg: TrajectoryConfig, output: str | Path = "runs", *, run_id: str | None = None,
                   resume: bool = False, loaded=None, show_progress: bool | None = None) -> RunFolder:
    """Run (or resume) the MUI study on every checkpoint of ``cfg.model`` and write the trajectory."""
    from whitebox_eval.models import load_model

    cfg.check()
    checkpoints = list_checkpoints(cfg.model)  # one line, before any folder, where it kept none
    folder = open_run(output, cfg.to_dict(), run_id=run_id, resume=resume)
    lm = loaded or load_model(cfg.model, dtype=cfg.dtype)
    runs = folder.path / SUB_RUNS
    with kept_weights(lm.model):
        for c in checkpoints:
            path = runs / checkpoint_name(c["step"])
            if is_finished(path):
                continue
            folder.log(f"MUI of checkpoint step {c['step']} ({c['path']})")
            load_weights(lm.model, c["path"])
            run_mui(cfg.mui_config(c["path"]), runs, run_id=path.name, resume=path.is_dir(), loaded=lm,
                    show_progress=show_progress)
    results, samples = summarize(runs, checkpoints)
    done = folder.done_ids()
    folder.append_samples([s for s in samples if s["id"] not in done])
    folder.save_results(results)
    return folder


def _checkpoint_rows(runs: Path, checkpoints: list[dict]) -> list[dict[str, Any]]:
    """Per checkpoint: its run, key sets and samples by item, in the first run's item order."""
    rows = []
    for c in checkpoints:
        run = RunFolder.open(runs / checkpoint_name(c["step"]))
        ks = load_key_sets(run)
        rows.append({**c, "name": checkpoint_name(c["step"]), "run": run, "key_sets": ks,
                     "samples": {str(s["id"]): s for s in run.read_samples()}})
    ids = list(map(str, rows[0]["key_sets"].sample_ids))
    for r in rows:
        if list(map(str, r["key_sets"].sample_ids)) != ids or set(ids) - set(r["samples"]):
            raise WhiteboxError(f"{r['run'].path} does not hold the items of {rows[0]['run'].path}")
    return rows


def trend_inputs(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the trend reads, per included checkpoint (accuracy above 0): steps, each item's key
    units, correctness and response length (the per-item evidence)."""
    ids = list(map(str, rows[0]["key_sets"].sample_ids))
    kept = [r for r in rows if any(bool(r["samples"][i]["correct"]) for i in ids)]
    return {"ids": ids, "steps": [r["step"] for r in kept], "checkpoints": [r["name"] for r in kept],
            "left_out": [r["name"] for r in rows if not any(r is k for k in kept)],
            "total_units": int(rows[0]["key_sets"].total_units),
            "units": [[[int(u) for u in r["key_sets"].flat_indices(i)] for i in range(len(ids))] for r in kept],
            "correct": [[float(bool(r["samples"][i]["correct"])) for i in ids] for r in kept],
            "length": [[float(r["samples"][i]["n_response_tokens"]) for i in ids] for r in kept]}


def trends(inputs: dict[str, Any]) -> dict[str, Any]:
    """Kendall's tau against the step of MUI, accuracy and response length over the included
    checkpoints (:mod:`.trend`), or why there is none."""
    if len(inputs["steps"]) < MIN_CHECKPOINTS:
        return {"refused": f"{len(inputs['steps'])} checkpoint(s) with accuracy above 0 "
                           f"({', '.join(inputs['checkpoints']) or 'none'}); a trend needs {MIN_CHECKPOINTS}"}
    return {"mui": mui_trend(inputs["steps"], inputs["units"], inputs["total_units"]).as_dict(),
            "accuracy": mean_trend(inputs["steps"], inputs["correct"]).as_dict(),
            "response_length": mean_trend(inputs["steps"], inputs["length"]).as_dict()}


def summarize(runs: Path, checkpoints: list[dict]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """results.json (per checkpoint its point with intervals and the move from the previous
    included checkpoint; the trends; the exclusion rule) and samples.jsonl (checkpoint x item)."""
    from whitebox_eval.mui.contamination import direction_at_alpha

    rows = _checkpoint_rows(runs, checkpoints)
    inputs = trend_inputs(rows)
    head: dict[str, Any] = {}
    per: dict[str, Any] = {}
    previous = None
    for r in rows:
        lengths = [float(s["n_response_tokens"]) for s in r["samples"].values()]
        point: dict[str, Any] = {"step": r["step"], "sha256": r["sha256"], "run": r["name"],
                                 "included": r["name"] in inputs["checkpoints"]}
        estimates = {"accuracy": stats.proportion([bool(r["samples"][i]["correct"]) for i in inputs["ids"]]),
                     "mui": jackknife_mui(r["key_sets"]), "response_length": stats.bootstrap(lengths)}
        for key, est in estimates.items():
            stats.add_estimate(point, key, est)
            stats.add_estimate(head, f"{key},{r['name']}", est)
        if point["included"] and previous is not None:
            acc, mui = paired_tests(previous["run"].path, r["run"].path)
            before = (100 * per[previous["name"]]["accuracy"], 100 * per[previous["name"]]["mui"])
            point.update(move_from=previous["name"], direction=classify_direction(
                before, (100 * point["accuracy"], 100 * point["mui"])).value,
                direction_at_alpha=direction_at_alpha(acc, mui), accuracy_change=acc, mui_change=mui)
        if point["included"]:
            previous = r
        per[r["name"]] = point
    t = trends(inputs)
    for measure, tr in ({} if "refused" in t else t).items():
        stats.add_estimate(head, f"trend,{measure}",
                           stats.Estimate(tr["value"], tr["lo"], tr["hi"], tr["n"], "item jackknife", tr["se"]))
    moves = [p["direction"] for p in per.values() if "direction" in p]
    results = {"headline": head, "checkpoints": per, "order": [r["name"] for r in rows],
               "included": inputs["checkpoints"], "left_out": inputs["left_out"], "exclusion_rule": EXCLUSION_RULE,
               "trend": t, "directions": {d: moves.count(d) for d in dict.fromkeys(moves)},
               "n_items": len(inputs["ids"]), "task": rows[0]["run"].config.get("task")}
    samples = [{"id": f"{r['name']}/{i}", "checkpoint": r["name"], "step": r["step"], "item": i,
                "correct": bool(r["samples"][i]["correct"]), "n_response_tokens": r["samples"][i]["n_response_tokens"],
                "n_key_units": int(r["key_sets"].flat_indices(j).size)}
               for r in rows for j, i in enumerate(inputs["ids"])]
    return results, samples


def mui_trend_items(study, spec, kit) -> dict[str, Any]:
    """The reproduction's read-back (``derived: mui_trend``): MUI's trend over the checkpoints,
    recomputed from the checkpoints' runs (each item's key units at each included checkpoint, the
    observations) and required to agree with the child's."""
    written = study.results.get("trend") or {}
    if "refused" in written:
        raise kit.TooFew(written["refused"], {"checkpoints": len(study.results.get("included", ()))})
    folder = Path(study.folder) if getattr(study, "folder", None) else None
    if folder is None or not (folder / SUB_RUNS).is_dir():
        raise kit.Missing("the trajectory's checkpoint runs are not readable here")
    checkpoints = [{"step": p["step"], "sha256": p["sha256"]} for p in study.results["checkpoints"].values()]
    inputs = trend_inputs(_checkpoint_rows(folder / SUB_RUNS, checkpoints))
    again = trends(inputs)
    w = written["mui"]
    if "refused" in again or abs(again["mui"]["value"] - w["value"]) > 1e-12 or \
            abs(again["mui"]["p_value"] - w["p_value"]) > 1e-12:
        raise kit.Missing(f"MUI's trend read back from {folder.name}'s checkpoint runs does not match the child's")
    out = {"value": w["value"], "lo": w["lo"], "hi": w["hi"], "p_value": w["p_value"], "n": w["n"],
           "test": w["test"], "source": "trend/mui", "se": w["se"], "n_items": w["n_items"],
           "left_out": inputs["left_out"], "rule": EXCLUSION_RULE,
           "beside": {k: {x: written[k][x] for x in ("value", "lo", "hi", "p_value")}
                      for k in ("accuracy", "response_length")}}
    out["scheme"] = {"order_p": w["order_p"], "item_p": w["item_p"], "se": w["se"],
                     "rule": "p = max(Mann-Kendall order p, item delete-one jackknife p)"}
    out["observations"] = {"ids": inputs["ids"], "steps": inputs["steps"], "checkpoints": inputs["checkpoints"],
                           "total_units": inputs["total_units"], "units": inputs["units"],
                           "correct": inputs["correct"], "length": inputs["length"]}
    return out


def describe(results: dict[str, Any]) -> str:
    """A plain-text table of the trajectory and its trends."""
    lines = [f"{'checkpoint':12s} {'accuracy %':>10s} {'MUI %':>8s} {'length':>7s}  move (at alpha)"]
    for name, p in results["checkpoints"].items():
        lines.append(f"{name:12s} {100 * p['accuracy']:10.1f} {100 * p['mui']:8.3f} {p['response_length']:7.1f}  "
                     + (f"{p['direction']} ({p['direction_at_alpha']})" if "direction" in p
                        else "-" if p["included"] else "left out (accuracy 0)"))
    t = results["trend"]
    if "refused" in t:
        lines.append(f"trend: {t['refused']}")
    for m, tr in ({} if "refused" in t else t).items():
        lines.append(f"trend of {m}: Kendall tau {tr['value']:+.3f} [{tr['lo']:+.3f}, {tr['hi']:+.3f}], "
                     f"p = {tr['p_value']:.3g} (order p {tr['order_p']:.3g}, items p {tr['item_p']:.3g})")
    return "\n".join(lines)
