"""What an AttentionSpan run reports (paper 003): per-stage accuracy with intervals, accuracy
by input length, reference attention scores, the reinforcement sweep chosen on the
selection split and reported on the evaluation split, and attention heat maps."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from whitebox_eval.span import plots, protocol
from whitebox_eval.span.evaluation import (
    summarize,
)
from whitebox_eval.span.metrics import generation_correctness, generation_exact
from whitebox_eval.span.reinforcement import (
    CONTROL_RULE,
    FEWER_HEADS,
    KeyHeads,
    Reinforcement,
)
from whitebox_eval.span.tokenization import TokenizedExample
from whitebox_eval import controls, stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs import RunFolder
from whitebox_eval.span.config import SpanConfig

SPLITS_FILE = "splits.json"


def _stage_file_name(stage: str) -> str:
    return stage.replace("/", "_").replace(".", "p")


def _records_by_stage(folder: RunFolder) -> dict[str, list[dict]]:
    by_stage: dict[str, list[dict]] = defaultdict(list)
    for rec in folder.read_samples():
        by_stage[rec["stage"]].append(rec)
    for recs in by_stage.values():
        recs.sort(key=lambda r: r["index"])
    return by_stage




def selection_grid(cfg: SpanConfig, by_stage: Mapping[str, list[dict]]) -> list[dict]:
    """The key-head grid's selection-split accuracies (:func:`protocol.selection_table`)."""
    return protocol.selection_table(
        [(n, c, by_stage[f"select/{protocol.label('key', n, c, cfg.mode)}"])
         for n in cfg.heads for c in cfg.values])


def evaluation_settings(cfg: SpanConfig, heads: KeyHeads, n: int, c: float, n_layers: int,
                        n_heads: int) -> list[tuple[str, int | None, Reinforcement]]:
    """(source, seed, reinforcement) of the chosen point and its controls on the evaluation split."""
    key = tuple(heads.top(n))
    r = lambda hs, source, d=None: Reinforcement(  # noqa: E731
        tuple(hs), c, cfg.mode, cfg.threshold, protocol.label(source, n, c, cfg.mode, d),
        cells="shifted" if source == "shifted" else "reference", shift=cfg.shift)
    out = [("key", None, r(key, "key")), ("shifted", None, r(key, "shifted"))]
    drawn = controls.random_heads(key, (n_layers, n_heads), cfg.random_draws, cfg.seed, CONTROL_RULE, fix=FEWER_HEADS)
    for d, hs in enumerate(drawn):
        out.append(("random", controls.draw_seed(cfg.seed, d), r(hs, "random", d)))
    return out




def _nan_array(values: list | None) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in (values or [])], dtype=np.float64)


def _stage_summary(records: list[dict], test: str) -> dict:
    correct = [np.asarray(r["correct"], dtype=bool) for r in records]
    has_rollout = all(r.get("rollout_scores") is not None for r in records)
    rollout = [_nan_array(r["rollout_scores"]) for r in records] if has_rollout else None
    has_gen = all("generated" in r for r in records)
    gen = [generation_correctness(r["generated"], r["target"]) for r in records] if has_gen else None
    exact = [generation_exact(r["generated"], r["target"]) for r in records] if has_gen else None
    return summarize(correct, rollout_scores=rollout, generation_correct=gen,
                     generation_exact=exact, test=test).to_dict()


def _length_bins(lengths: np.ndarray, max_bins: int = 8) -> list[tuple[int, int]]:
    uniq = np.unique(lengths)
    if len(uniq) <= max_bins:
        return [(int(u), int(u)) for u in uniq]
    edges = np.unique(np.quantile(lengths, np.linspace(0, 1, max_bins + 1)).round().astype(int))
    return [(int(edges[k]) + (k > 0), int(edges[k + 1])) for k in range(len(edges) - 1)]


def accuracy_by_length(records: list[dict], bins: list[tuple[int, int]], key: str = "exact") -> list[float]:
    """Exact-match accuracy (``key="exact"``, fig. 2) or partial accuracy
    (``key="partial"``) per input-length bin; NaN for an empty bin."""
    out = []
    for lo, hi in bins:
        hits = [float(r[key]) for r in records if lo <= r["input_length"] <= hi]
        out.append(float(np.mean(hits)) if hits else float("nan"))
    return out


def _expected_count(cfg: SpanConfig, stage: str) -> int:
    return cfg.select_limit if stage.startswith("select/") else cfg.limit


def finalize(folder: RunFolder, cfg: SpanConfig,
             tokenized: dict[str, list[TokenizedExample]] | None = None) -> RunFolder:
    """Summaries per stage, the reinforcement report, headline numbers and plots."""
    by_stage = _records_by_stage(folder)
    results: dict[str, Any] = {"task": cfg.task, "model": cfg.model, "n_per_split": cfg.n_per_split,
                               "stages": {}}
    for stage, recs in by_stage.items():
        if len(recs) < _expected_count(cfg, stage):
            raise WhiteboxError(f"stage {stage} has {len(recs)} of {_expected_count(cfg, stage)} "
                                "samples; run again with --resume to finish it")
        results["stages"][stage] = _stage_summary(recs, cfg.test)
    phase = "finetuned" if cfg.finetune_examples else "base"
    results["phase"] = phase  # the stages the headline reads (a paper's claims name them as {phase})
    headline: dict[str, Any] = {}
    for split in cfg.splits:
        recs = by_stage.get(f"{phase}/{split}")
        if recs:
            stats.add_proportion(headline, f"acc,{split}", protocol.exact_vector(recs))
            stats.add_mean(headline, f"partial,{split}", [float(r["partial"]) for r in recs])
    losses_path = folder.path / "arrays" / "finetune_losses.npy"
    if losses_path.is_file():
        losses = folder.load_array("finetune_losses")
        w = min(20, len(losses))
        results["finetune"] = {"steps": int(len(losses)), "loss_first": float(losses[:w].mean()),
                               "loss_last": float(losses[-w:].mean()), **cfg.finetune.to_dict(),
                               "examples": cfg.finetune_examples}
        record = folder.path / "finetune.json"  # the cache entry the run evaluated (study.FINETUNE_FILE)
        if record.is_file():
            results["finetune"]["cache_key"] = json.loads(record.read_text(encoding="utf-8")).get("cache_key")
    if cfg.reinforce:
        _reinforcement_results(folder, cfg, by_stage, results, headline, phase)
    results["headline"] = headline
    folder.save_results(results)
    _heatmaps(folder, cfg, by_stage, tokenized)
    return folder


def _reinforcement_results(folder: RunFolder, cfg: SpanConfig, by_stage: dict[str, list[dict]],
                           results: dict, headline: dict, phase: str) -> None:
    """``results["reinforcement"]``: protocol, selection grid, the chosen point on the
    evaluation split beside its controls, paired tests; fig. 2 by input length."""
    from whitebox_eval.span.metrics import rank_key_heads

    scores = folder.load_array("key_head_scores")
    heads = KeyHeads(scores, rank_key_heads(scores), cfg.key_samples)
    splits = json.loads((folder.path / SPLITS_FILE).read_text(encoding="utf-8"))
    grid = selection_grid(cfg, by_stage)
    chosen = protocol.choose_setting(grid)
    n, c = chosen["n_heads"], chosen["value"]
    n_layers, n_heads = scores.shape
    settings = evaluation_settings(cfg, heads, n, c, n_layers, n_heads)
    recs = {r.label: by_stage[f"reinforce/{r.label}"] for _, _, r in settings}
    key_label, shifted_label = protocol.label("key", n, c, cfg.mode), protocol.label("shifted", n, c, cfg.mode)
    base_recs = by_stage[f"{phase}/ood"]
    randoms = [(seed, r.heads, recs[r.label]) for src, seed, r in settings if src == "random"]
    evaluation = protocol.evaluation_report(base_recs, recs[key_label], recs[shifted_label], randoms, results)
    control = controls.control_record(CONTROL_RULE, heads.top(n), (n_layers, n_heads), cfg.seed,
                                      [r.heads for src, _, r in settings if src == "random"])
    evaluation["random_heads"]["band"] = control["band"]
    evaluation["random_heads"]["band_rule"] = ("layers of the key heads (min..max), widened by one "
                                               "on each side until it holds N non-key heads")
    evaluation["random_heads"]["control"] = control
    out = {
        "mode": cfg.mode, "threshold": cfg.threshold, "shift": cfg.shift,
        "protocol": {
            "rule": "N and C chosen on the selection split (highest accuracy; ties: partial "
                    "accuracy, fewer heads, smaller C), reported on the disjoint evaluation split",
            **{k: {f: v[f] for f in ("n", "split", "seed")} for k, v in splits.items() if k != "overlap"},
            "overlap": splits["overlap"], "splits_file": SPLITS_FILE},
        "key_heads": [{"layer": l, "head": h, "score": float(scores[l, h])} for l, h in heads.top(n)],
        "selection": {"grid": grid, "no_intervention": protocol.accuracy_block(by_stage["select/none"]),
                      "chosen": {"n_heads": n, "value": c, "setting": key_label}},
        "evaluation": evaluation,
    }
    results["reinforcement"] = out
    stats.add_proportion(headline, "acc,ood_reinforced", protocol.exact_vector(recs[key_label]))
    stats.add_proportion(headline, "acc,ood_shifted_reference", protocol.exact_vector(recs[shifted_label]))
    rnd = evaluation["random_heads"]["accuracy"]
    headline["acc,ood_random_heads"] = rnd["mean"]
    headline["acc_sd,ood_random_heads"] = rnd["sd"]
    headline["acc_draws,ood_random_heads"] = rnd["draws"]
    if cfg.reinforce_generation:
        out["generation"] = protocol.generation_report(
            by_stage["generate/none"], by_stage[f"generate/{key_label}"],
            by_stage[f"generate/{shifted_label}"], results)
        for name, stage in (("none", "generate/none"), ("reinforced", f"generate/{key_label}"),
                            ("shifted_reference", f"generate/{shifted_label}")):
            stats.add_proportion(headline, f"acc_generated,ood_{name}",
                                 protocol.exact_vector(by_stage[stage], "generation_exact"))
    # fig. 2: OOD accuracy vs input length, evaluation split
    bins = _length_bins(np.array([r["input_length"] for r in base_recs]))
    centers = [(lo + hi) / 2 for lo, hi in bins]
    results["accuracy_by_length"] = {"bins": bins}
    for key, name, ylabel in (("exact", "ood_accuracy_vs_length", "accuracy"),
                              ("partial", "ood_partial_accuracy_vs_length", "partial accuracy")):
        curves = {"no intervention": accuracy_by_length(base_recs, bins, key),
                  f"top-{n} key heads, C={c:g}": accuracy_by_length(recs[key_label], bins, key),
                  f"shifted reference (same heads, C={c:g})": accuracy_by_length(recs[shifted_label], bins, key)}
        per = np.array([accuracy_by_length(r, bins, key) for _, _, r in randoms])
        curves[f"{n} random heads (mean of {len(randoms)})"] = list(np.nanmean(per, axis=0))
        results["accuracy_by_length"][key] = curves
        plots.plot_accuracy_vs_length(centers, curves, folder.plot_path(name),
                                      title=f"{cfg.task}: OOD {ylabel} vs input length ({cfg.model})",
                                      xlabel="input length (characters)", ylabel=ylabel)


def _heatmaps(folder: RunFolder, cfg: SpanConfig, by_stage: dict[str, list[dict]],
              tokenized: dict[str, list[TokenizedExample]] | None) -> None:
    """fig. 1 / fig. 3: rollout heatmaps of the first examples with the reference mask."""
    if tokenized is None or not cfg.rollout:
        return
    for stage in by_stage:
        if stage.split("/", 1)[0] in ("reinforce", "select", "generate"):
            continue
        split = stage.split("/", 1)[1]
        for i in range(min(cfg.heatmaps, len(tokenized.get(split, [])))):
            name = f"rollout_{_stage_file_name(stage)}_{i}"
            if not (folder.path / "arrays" / f"{name}.npy").is_file():
                continue
            rec = by_stage[stage][i]
            ok = f"{sum(rec['correct'])}/{len(rec['correct'])} target tokens right"
            plots.plot_attention_with_reference(
                folder.load_array(name), tokenized[split][i], folder.plot_path(name),
                title=f"{stage} #{i}: rollout vs reference ({ok})")
