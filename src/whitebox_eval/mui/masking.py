"""Masking validation of the key-neuron threshold (paper 001 sec. 3.8, fig. 11, 22-26).

Key neurons are selected on a source task X, on a *selection split* of its items that
is disjoint from the items every evaluation uses (the paper does not say; selecting
and evaluating on the same items would make the key set fit the evaluation). For every
selection sample, each layer's key set at ``k`` is the paper's eq. 8/10 rule (the
neurons of the top-``k`` pooled (response token, neuron) pairs; ``unit="neuron"``
ranks neurons by their best score instead), and the masked set for ``k`` is the
union over the samples. For increasing ``k`` those neurons are set to zero
(``MaskNeurons`` at every position, prompt included) while the model answers the
evaluation items of X and of another task Y; the control masks as many random
neurons, layer by layer, drawn from outside the key set (``matched_random_mask``),
``random_draws`` times (default 5; mean, sd and every draw are reported).

Per item, two metrics are measured under every mask:

* ``answer_logprob``: the mean log-probability per token of a target answer,
  teacher-forced. The target is the model's *own* unmasked greedy answer by default
  (``target="own"``): an instruction-tuned model answers "The answer is 11.", and the
  data's bare gold " 11" is improbable even unmasked (about -5.5 per token on
  SmolLM2), so the own answer measures how much the mask disturbs what the model
  really does on the item. ``target="gold"`` scores the data's reference answer.
  Items whose own answer is empty fall back to the gold answer (counted).
* ``accuracy`` (with ``generate``): greedy engine-decoded answers under the mask.

Key vs random is a paired comparison on the same items: per item, the key-mask value
minus the mean over the random draws, a paired bootstrap over items
(:func:`whitebox_eval.stats.paired_bootstrap`) with its 95% interval.

Every (task, masking, k, draw) condition is one line of ``samples.jsonl`` with the
per-item values, so an interrupted run resumes at the next condition; the
per-sample rankings of X (``arrays/source_rankings.npy``) and the own-answer targets
(``targets.json``) are saved and reused on resume.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from whitebox_eval.datafiles import recording
from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine, MaskNeurons
from whitebox_eval.mui import responses as rsp
from whitebox_eval.internals.prefixes import PrefixCache
from whitebox_eval.mui.masking_config import MaskingConfig
from whitebox_eval.mui.keyneurons import KeyNeuronConfig, ScoredSequence, layer_rankings, token_scores
from whitebox_eval.mui.responses import PreparedTask, prepare_task, respond
from whitebox_eval.mui.study import MUIConfig
from whitebox_eval.mui.utilization import matched_random_mask
from whitebox_eval.runs import RunFolder, open_run
from whitebox_eval.runs.atomic import write_atomic
from whitebox_eval.runs.kept import kept
from whitebox_eval.runs.pass_plan import plan_passes
from whitebox_eval.runs.passes import run_pass
from whitebox_eval.tasks.generation import GenItem



def _study_cfg(cfg: MaskingConfig, task: str, responses: str = "model") -> MUIConfig:
    return MUIConfig(model=cfg.model, task=task, score=cfg.score, activation=cfg.activation,
                     final_norm=cfg.final_norm, shots=cfg.shots, chat=cfg.chat, responses=responses,
                     max_new_tokens=cfg.max_new_tokens, limit=None if cfg.limit is None else 2 * cfg.limit,
                     seed=cfg.seed, batch_size=cfg.batch_size, dtype=cfg.dtype, unit=cfg.unit)


def split_items(items: list[GenItem], limit: int, seed: int) -> tuple[list[GenItem], list[GenItem]]:
    """Disjoint (selection, evaluation) splits of at most ``limit`` items each.

    Items are deduplicated by question text first (generated tasks can repeat a
    question under another id), then a seeded permutation assigns the first half to
    selection and the second half to evaluation.
    """
    seen: set[str] = set()
    unique = []
    for it in items:
        if it.question not in seen:
            seen.add(it.question)
            unique.append(it)
    if len(unique) < 2:
        raise WhiteboxError("masking needs at least 2 distinct items to split into selection and evaluation")
    order = np.random.default_rng(seed).permutation(len(unique))
    half = len(unique) // 2
    sel = [unique[i] for i in order[:half]][:limit]
    ev = [unique[i] for i in order[half:]][:limit]
    return sel, ev


def prepare_split(lm, cfg: MaskingConfig, task: str, which: str, responses: str = "model") -> PreparedTask:
    """The selection (``which="selection"``) or evaluation split of ``task``."""
    prepared = prepare_task(_study_cfg(cfg, task, responses), lm.tokenizer)
    sel, ev = split_items(prepared.items, int(cfg.limit), cfg.seed)
    return dataclasses.replace(prepared, items=sel if which == "selection" else ev)


def source_rankings(lm, engine: Engine, cfg: MaskingConfig, folder: RunFolder, task: PreparedTask,
                    show_progress: bool | None = None) -> tuple[np.ndarray, dict]:
    """Per-sample, per-layer neuron rankings on the source task's selection split,
    ``[n_scored, n_layers, max(ks)]`` (one resumable pass), and the counts of answers that
    hit the budget (``n_truncated``) or came out empty (``n_empty``)."""
    kcfg = KeyNeuronConfig(score=cfg.score, activation=cfg.activation, final_norm=cfg.final_norm,
                           response_level=cfg.response_level, unit=cfg.unit).validate()
    k_max = max(int(k) for k in cfg.ks)
    prefixes = PrefixCache(engine)  # a demonstration the prompts share, computed once

    def score(chunk: list[int]):
        items = [task.items[i] for i in chunk]
        prompts, responses = respond(lm, task, items)
        ranks = np.full((len(items), lm.arch.n_layers, k_max), -1, dtype=np.int64)
        scored = [j for j, r in enumerate(responses) if r.ids]
        if scored:
            seqs = [ScoredSequence(prompts[j], responses[j].ids) for j in scored]
            for j, s in zip(scored, token_scores(engine, seqs, kcfg, prefixes=prefixes)):
                ranks[j] = layer_rankings(s, k_max, response_level=cfg.response_level, unit=cfg.unit).numpy()
        given = task.given is not None
        return None, {"rankings": ranks, "scored": np.array([bool(r.ids) for r in responses]),
                      "truncated": np.array([not given and r.stopped_by is None for r in responses]),
                      "empty": np.array([not given and not r.ids for r in responses])}

    out = run_pass(folder, "source", [it.id for it in task.items], cfg.batch_size, score,
                   desc="source key neurons", show_progress=show_progress, dtype=np.float64)
    scored = out["scored"].astype(bool)
    if not scored.any():
        raise WhiteboxError("no source sample produced a response to score")
    counts = {"n_truncated": int(out["truncated"].sum()), "n_empty": int(out["empty"].sum())} if task.given is None else {}
    return out["rankings"][scored].astype(np.int64), counts


def key_mask_for_k(rankings: np.ndarray, k: int, width: int) -> np.ndarray:
    """Union over samples of each layer's top-``k`` key set (the neurons in the first ``k`` ranking columns)."""
    if k > rankings.shape[2]:
        raise WhiteboxError(f"k={k} exceeds the stored ranking depth {rankings.shape[2]}")
    n, layers, _ = rankings.shape
    mask = np.zeros((layers, width), dtype=bool)
    for l in range(layers):
        mask[l, np.unique(rankings[:, l, :k])] = True
    return mask


def mask_edits(mask: np.ndarray) -> list[MaskNeurons]:
    """One ``MaskNeurons`` edit per layer with at least one masked neuron (value 0, all positions)."""
    return [MaskNeurons(l, np.flatnonzero(mask[l]).tolist()) for l in range(mask.shape[0]) if mask[l].any()]


def item_correct(lm, engine: Engine, task, edits: list) -> np.ndarray:
    """Per-item correctness (1.0 / 0.0) of greedy engine-decoded responses under ``edits``.

    One item per pass: unpadded, so an item's answer does not depend on the items beside it."""
    generated = dataclasses.replace(task, given=None)
    return np.array([float(generated.score(it, respond(lm, generated, [it], edits=edits, engine=engine)[1][0],
                                           lm.tokenizer)["correct"]) for it in task.items])


def answer_logprobs(lm, engine: Engine, task, targets: list[str], edits: list, batch_size: int = 8) -> np.ndarray:
    """Per item, the mean log-probability per token of ``targets[i]``, teacher-forced under ``edits``.

    A smooth companion to accuracy (one pass per batch, no generation): masking that
    matters lowers it even when few answers flip.
    """
    from whitebox_eval.mui.keyneurons import _layout

    if len(targets) != len(task.items):
        raise WhiteboxError(f"need one target per item: {len(targets)} for {len(task.items)} items")
    out: list[float] = []
    for i in range(0, len(task.items), batch_size):
        items = task.items[i:i + batch_size]
        prompts = [task.prompt(it, lm.tokenizer) for it in items]
        seqs = [ScoredSequence(p, rsp.given_response(lm.tokenizer, t).ids) for p, t in zip(prompts, targets[i:i + batch_size])]
        lay = _layout(engine, seqs)
        with torch.no_grad():
            logits = engine.run(lay.batch, edits=edits, logits=lay.positions).logits.float()
        logp = torch.log_softmax(logits, -1).gather(-1, lay.targets.to(logits.device).unsqueeze(-1)).squeeze(-1)
        valid = lay.valid.to(logp.device).float()
        out += ((logp * valid).sum(1) / valid.sum(1)).cpu().tolist()
    return np.array(out)


def gold_logprob(lm, engine: Engine, task, edits: list, batch_size: int = 8) -> float:
    """Mean over items of the gold answers' per-token log-probability under ``edits``."""
    return float(answer_logprobs(lm, engine, task, [it.gold_response for it in task.items], edits, batch_size).mean())


def answer_targets(lm, cfg: MaskingConfig, task: PreparedTask) -> dict:
    """The teacher-forced targets of the evaluation items: the model's own unmasked greedy answers
    (``target="own"``; empty ones fall back to gold) or the gold answers."""
    gold = [it.gold_response for it in task.items]
    if cfg.target == "gold":
        return {"targets": gold, "n_gold_fallback": 0, "n_truncated": 0}
    texts, fallback, truncated = [], 0, 0
    for i in range(0, len(task.items), cfg.batch_size):
        items = task.items[i:i + cfg.batch_size]
        _, responses = respond(lm, dataclasses.replace(task, given=None), items)
        for it, r in zip(items, responses):
            truncated += r.stopped_by is None
            if r.text.strip():
                texts.append(r.text)
            else:
                texts.append(it.gold_response)
                fallback += 1
    return {"targets": texts, "n_gold_fallback": fallback, "n_truncated": truncated}


def run_masking(
    cfg: MaskingConfig, output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
    loaded=None, show_progress: bool | None = None,
) -> RunFolder:
    """Run (or resume) the masking validation; writes curves, paired tests, results.json and the plots."""
    from whitebox_eval.models import load_model

    cfg.validate()
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    with recording() as read:  # every data file opened, for config.yaml's data_files
        selection = prepare_split(loaded, cfg, cfg.source_task, "selection", cfg.source_responses)
        tasks = {t: prepare_split(loaded, cfg, t, "evaluation") for t in cfg.eval_tasks}
    folder = open_run(output, cfg.to_dict(), run_id=run_id, resume=resume, data_files=read)
    conditions = [(t, "none", 0, 0) for t in cfg.eval_tasks]
    for k in cfg.ks:
        for t in cfg.eval_tasks:
            conditions.append((t, "key", int(k), 0))
            conditions += [(t, "random", int(k), d) for d in range(cfg.random_draws)]
    ids = [f"{t}|{kind}|k={k}|draw={d}" for t, kind, k, d in conditions]
    plan_passes(folder, [("source", len(selection.items)), ("masking", len(ids))])  # progress: pass k of N
    engine = Engine(loaded)
    width = loaded.arch.d_ff
    source_path = folder.path / "source.json"
    rankings, counts = source_rankings(loaded, engine, cfg, folder, selection, show_progress)
    folder.save_array("source_rankings", rankings)
    write_atomic(source_path, json.dumps(counts))
    split_path = folder.path / "splits.json"
    splits = {"selection": {cfg.source_task: [it.id for it in selection.items]},
              "evaluation": {t: [it.id for it in task.items] for t, task in tasks.items()}}
    write_atomic(split_path, json.dumps(splits, indent=1))
    targets = kept(folder.path, "targets", lambda: {t: answer_targets(loaded, cfg, task) for t, task in tasks.items()},
                    valid=lambda kept: set(tasks) <= set(kept))

    def score(chunk: list[int]):
        (i,) = chunk
        t, kind, k, d = conditions[i]
        if kind == "none":
            mask = np.zeros((loaded.arch.n_layers, width), dtype=bool)
        else:
            mask = key_mask_for_k(rankings, k, width)
            if kind == "random":
                mask = matched_random_mask(mask, seed=cfg.seed + 1000 * d + k, per_layer=True, exclude_key=True)
        edits = mask_edits(mask)
        row = {"id": ids[i], "task": t, "masking": kind, "k": k, "draw": d, "n_masked": int(mask.sum())}
        if cfg.generate:
            correct = item_correct(loaded, engine, tasks[t], edits)
            row.update(accuracy=float(correct.mean()), item_accuracy=correct.astype(float).tolist())
        lp = answer_logprobs(loaded, engine, tasks[t], targets[t]["targets"], edits, cfg.batch_size)
        row.update(answer_logprob=float(lp.mean()), item_answer_logprob=lp.tolist())
        return [row], {}

    run_pass(folder, "masking", ids, 1, score, desc="masking conditions", show_progress=show_progress)
    source = json.loads(source_path.read_text()) if source_path.is_file() else None
    return finalize_masking(folder, cfg, splits, targets, source)


def _rows(rows: list[dict], t: str, kind: str, k: int) -> list[dict]:
    sel = sorted((r for r in rows if r["task"] == t and r["masking"] == kind and r["k"] == int(k)), key=lambda r: r["draw"])
    if not sel:
        raise WhiteboxError("the run is not finished; rerun with --resume")
    return sel


def finalize_masking(folder: RunFolder, cfg: MaskingConfig, splits: dict | None = None,
                     targets: dict | None = None, source: dict | None = None) -> RunFolder:
    """Curves per evaluation task (key vs random, every draw), paired tests, results.json and the plots."""
    from whitebox_eval.mui.plots import MaskingCurve, plot_masking_curves

    rows = list(folder.read_samples())
    metrics = cfg.metrics
    results: dict = {"source_task": cfg.source_task, "ks": list(cfg.ks), "target": cfg.target, "unit": cfg.unit,
                     "random_draws": cfg.random_draws, "curves": {}}
    if splits is not None:
        results["splits"] = {w: {t: len(v) for t, v in d.items()} for w, d in splits.items()}
        results["split_ids"] = splits
        results["splits_disjoint"] = not (set(splits["selection"][cfg.source_task])
                                          & set(splits["evaluation"].get(cfg.source_task, [])))
    if source is not None:
        results["source_answers"] = {"n_truncated": source.get("n_truncated", 0), "n_empty": source.get("n_empty", 0),
                                     "n_scored": int(folder.load_array("source_rankings").shape[0])}
    if targets is not None:
        results["targets"] = {t: {"n_gold_fallback": v["n_gold_fallback"], "n_truncated": v["n_truncated"]}
                              for t, v in targets.items()}
    panels: dict[str, list[MaskingCurve]] = {m: [] for m in metrics}
    for t in cfg.eval_tasks:
        base = _rows(rows, t, "none", 0)[0]
        entry: dict = {"baseline": {m: base[m] for m in metrics}, "n_items": len(base["item_answer_logprob"]),
                       "key": [], "random": []}
        for k in cfg.ks:
            key = _rows(rows, t, "key", k)[0]
            rnd = _rows(rows, t, "random", k)
            entry["key"].append({"k": int(k), "n_masked": key["n_masked"], **{m: key[m] for m in metrics}})
            r_entry = {"k": int(k), "n_masked": rnd[0]["n_masked"]}
            for m in metrics:
                dr = stats.draws([r[m] for r in rnd])
                r_entry[m] = dr.mean
                r_entry[f"{m},draws"] = dr.as_dict()
                per_item_random = np.mean([r[f"item_{m}"] for r in rnd], axis=0)
                test = stats.paired_bootstrap(np.asarray(key[f"item_{m}"]), per_item_random)
                stats.add_paired(results, f"key_vs_random,{m},{t},k={k}", test)
                r_entry[f"{m},key_minus_random"] = test.as_dict()
            entry["random"].append(r_entry)
        for m in metrics:
            drop_key = entry["baseline"][m] - float(np.mean([p[m] for p in entry["key"]]))
            drop_rand = entry["baseline"][m] - float(np.mean([p[m] for p in entry["random"]]))
            entry[f"mean_drop_key,{m}"] = drop_key
            entry[f"mean_drop_random,{m}"] = drop_rand
            scale = 100.0 if m == "accuracy" else 1.0
            for kind in ("key", "random"):
                panels[m].append(MaskingCurve(
                    t + (" (random)" if kind == "random" else ""), [0] + [int(k) for k in cfg.ks],
                    [scale * entry["baseline"][m]] + [scale * p[m] for p in entry[kind]], random=kind == "random"))
        results["curves"][t] = entry
    head: dict = {}  # each key-minus-random difference with its paired-bootstrap interval and n
    for m in metrics:
        for t in cfg.eval_tasks:
            for k in cfg.ks:
                stats.add_difference(head, f"key_minus_random,{m},{t},k={k}",
                                     results["paired_tests"][f"key_vs_random,{m},{t},k={k}"])
    results["headline"] = head
    folder.save_results(results)
    for m in metrics:
        plot_masking_curves({f"masked: {cfg.source_task} key neurons ({cfg.model})": panels[m]},
                            folder.plot_path(f"masking_{m}"), selected_k=1,
                            y_label="Accuracy (%)" if m == "accuracy" else f"{cfg.target} answer log-prob per token")
    return folder
