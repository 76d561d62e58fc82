"""A MUI study's results from its finished pass: the key sets in item order, accuracy and MUI with
their intervals, the threshold, truncation, groups, SAE quality and fidelity, warnings and the plot."""

from __future__ import annotations

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.answer_classes import class_results, response_class
from whitebox_eval.mui.config import MUIConfig
from whitebox_eval.mui.statistics import correct_vs_incorrect, jackknife_mui, lm_eval_metrics, samples_budget, threshold_summary
from whitebox_eval.mui.thresholds import DEFAULT_SAE_TOPK
from whitebox_eval.mui.utility_law import Direction, classify_direction, performance_utilization_ratio
from whitebox_eval.mui.utilization import KeySets
from whitebox_eval.runs import RunFolder
from whitebox_eval.runs.passes import iter_parts
from whitebox_eval.sae.encoding import ReconstructionStats
from whitebox_eval.sae.sets import SAESet
from whitebox_eval.sae.sources import feature_links
from whitebox_eval.sae.study import fidelity_summary
from whitebox_eval.tasks.generation import GenItem

PASS = "mui"  # the one pass: responses, then key units per sample

KEY_SETS_FILE = "key_sets.safetensors"


def _sae_quality(folder: RunFolder, sae_set: SAESet) -> dict:
    """Per SAE layer: explained variance and dead features over every token the run encoded."""
    total = [ReconstructionStats() for _ in sae_set.saes]
    for z in iter_parts(folder, PASS):
        for n in range(len(total)):
            if f"sae{n}_n" in z:
                total[n] = total[n].merge(ReconstructionStats(
                    int(z[f"sae{n}_n"]), z[f"sae{n}_sum_x"], float(z[f"sae{n}_sum_sq"]), float(z[f"sae{n}_sse"]),
                    z[f"sae{n}_active"]))
    return {str(layer): q.summary() for layer, q in zip(sae_set.layers, total)}


def _read_parts(folder: RunFolder, ids: list[str]) -> dict[str, np.ndarray]:
    """``{sample id: flat key indices}`` from the pass's parts."""
    out: dict[str, np.ndarray] = {}
    for z in iter_parts(folder, PASS):
        offs = z["offsets"]
        for n, i in enumerate(z["index"].tolist()):
            out[str(ids[i])] = z["indices"][offs[n]:offs[n + 1]].astype(np.int64)
    return out


def _threshold_summary(cfg: MUIConfig, width: int, n_layers: int) -> dict:
    kcfg = cfg.key_neuron_config()
    method, value = kcfg.threshold, kcfg.threshold_value
    if cfg.score == "sae" and method == "top_fraction" and value is None:
        method, value = "topk", DEFAULT_SAE_TOPK  # eq. 9
    out = threshold_summary(method, value, width, n_layers, kcfg.unit)
    out["paper_rule"] = kcfg.unit == "pair" and cfg.score_token == "next"
    return out


def _truncation(items: list[GenItem], samples: dict, cfg: MUIConfig, budget: int | None = None) -> dict:
    """Generated responses that hit the token budget (``stopped_by`` None) instead of EOS / a stop string."""
    if cfg.responses != "model":
        return {"n_truncated_responses": 0, "truncated_ids": []}
    ids = [it.id for it in items if samples[it.id].get("stopped_by") is None]
    return {"n_truncated_responses": len(ids), "truncated_ids": ids, "max_new_tokens": budget or samples_budget(cfg)}


def moves_declaration() -> dict:
    """How ``compare`` and the report name a move between two runs of one task (sec. 3.3):
    the signs of the accuracy and MUI changes, named by :func:`classify_direction`."""
    sign = {"up": 1.0, "down": -1.0}
    names = {f"{a},{m}": classify_direction((0.0, 0.0), (sign[a], sign[m])).value for a in sign for m in sign}
    return {"axes": ["accuracy", "mui"], "names": {**names, "unchanged": Direction.UNDETERMINED.value},
            "note": "directions of paper 001 sec. 3.3: evolving (accuracy up, MUI down), accumulating (both up), "
                    "coarsening (accuracy down, MUI up), collapsing (both down)"}


def finalize(folder: RunFolder, items: list[GenItem], n_layers: int, width: int, kind: str, cfg: MUIConfig,
             sae_set: SAESet | None = None, sae_fidelity: dict | None = None, budget: int | None = None, extra=None) -> RunFolder:
    """Assemble the key sets in item order; write key_sets, arrays, results.json and plots."""
    from whitebox_eval.mui.plots import plot_layer_utilization

    samples = {str(s["id"]): s for s in folder.read_samples()}
    flats = _read_parts(folder, [it.id for it in items])
    missing = [it.id for it in items if it.id not in samples or it.id not in flats]
    if missing:
        raise WhiteboxError(f"{len(missing)} samples are not finished yet; run again with --resume to finish them")
    ks = KeySets(n_layers, width, kind)
    for it in items:
        ks._append_flat(flats[it.id], it.id)
    ks.save(folder.path / "arrays" / KEY_SETS_FILE)
    rows = [samples[it.id] for it in items]
    classes = [s["class"] if "class" in s else response_class(it, s) for it, s in zip(items, rows)]
    unclassed = {s["id"]: {"class": c} for s, c in zip(rows, classes) if "class" not in s}
    if unclassed:  # parts written before the class (a resumed run): each by the study's rule, its item's own check
        folder.annotate_samples(unclassed)
    correct = np.array([bool(s["correct"]) for s in rows])
    off = np.array([c == "off_format" for c in classes])
    wrong = ~correct & ~off
    folder.save_array("correct", correct.astype(np.int8))
    acc = float(correct.mean())
    mui_est = jackknife_mui(ks)
    mui = mui_est.value
    layer = ks.layer_mui()
    folder.save_array("layer_mui", layer)
    results: dict = {"n_items": len(items)}
    head: dict = {}  # accuracy and MUI as fractions with their intervals (the stats contract)
    stats.add_proportion(head, "accuracy", correct)
    if any(it.check == "execution" for it in items):  # HumanEval: one greedy completion each, pass@1 = accuracy
        stats.add_proportion(head, "pass@1", correct)
    stats.add_estimate(head, "mui", mui_est)
    results.update(head)
    results.update({
        "n_activated": ks.n_activated(), "total_units": ks.total_units, "n_layers": n_layers, "width": width,
        "kind": kind, "mean_key_units_per_sample": float(ks.counts().mean()),
        "n_empty_responses": int(sum(1 for it in items if samples[it.id]["n_response_tokens"] == 0)),
        "threshold": _threshold_summary(cfg, width, n_layers),
    })
    results.update(_truncation(items, samples, cfg, budget))
    by_task = lm_eval_metrics(items, samples)
    if by_task:
        results["lm_eval_metrics"] = by_task
        results["accuracy_rule"] = ("correct = the task's first metric under its first filter is 1 "
                                    f"({next(iter(samples.values()))['lm_eval']['primary']}); every filter's metrics: "
                                    "lm_eval_metrics")
    if mui > 0:
        results["pur"] = float(performance_utilization_ratio(100 * acc, 100 * mui))
    if correct.any():
        stats.add_estimate(results, "mui,correct", jackknife_mui(ks, correct))
        results["n_correct"] = int(correct.sum())
    if wrong.any():  # incorrect = wrong: an off-format response is its own class (mui/answer_classes.py)
        stats.add_estimate(results, "mui,incorrect", jackknife_mui(ks, wrong))
        results["n_incorrect"] = int(wrong.sum())
    results.update(class_results(classes))
    results["correct_vs_incorrect"] = correct_vs_incorrect(ks, correct, off_format=off, seed=cfg.seed)
    groups: dict[str, list[int]] = {}
    for n, it in enumerate(items):
        groups.setdefault(it.group or "", []).append(n)
    if len(groups) > 1:
        by_group = {}
        for g, ix in groups.items():
            entry = {"n": len(ix)}
            stats.add_proportion(entry, "accuracy", correct[ix])
            stats.add_estimate(entry, "mui", jackknife_mui(ks, ix))
            by_group[g] = entry
        results["by_group"] = by_group
        results["by_group_note"] = "MUI is a union and grows with n: compare groups of equal n only"
    warnings = []
    if sae_set is not None:
        results["sae_quality"] = _sae_quality(folder, sae_set)
        results["sae_features"] = feature_links(sae_set.sources, map(ks.flat_indices, range(len(items))), width)
    if sae_fidelity is not None:
        results["sae_fidelity"] = sae_fidelity
        results["sae_summary"] = fidelity_summary(sae_fidelity, sae_set.paths if sae_set is not None else [])
        warnings += [f"layer {l}, fidelity on this task's tokens: {q['warning']}"
                     for l, q in sae_fidelity.items() if "warning" in q]
    scored = [i for i, it in enumerate(items) if samples[it.id]["n_response_tokens"] > 0]
    if len(scored) > 1 and len({ks.flat_indices(i).tobytes() for i in scored}) == 1:
        warnings.append(f"all {len(scored)} samples have the same key set: the scores do not tell samples apart")
    if results["n_truncated_responses"]:
        warnings.append(f"{results['n_truncated_responses']} of {len(items)} responses hit the "
                        f"{results['max_new_tokens']}-token budget and are truncated")
    results["warnings"] = warnings
    results["moves"] = moves_declaration()
    results["headline"] = head
    folder.save_results({**results, **(extra or {})})  # extra: --save-activations' record
    plot_layer_utilization(layer, folder.plot_path("layer_utilization"),
                           title=f"{cfg.model} on {cfg.task}: MUI {100 * mui:.2f}%, accuracy {100 * acc:.1f}%")
    return folder
