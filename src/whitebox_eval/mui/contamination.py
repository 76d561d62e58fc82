"""Data contamination, simulated (paper 001 sec. 3.4, Table 10, Fig. 8; App. A.6).

A model is fine-tuned on a task's test items ("test samples are concatenated with answers",
App. A.6): every evaluated item of the contaminated task, prompted exactly as the MUI study
prompts it, followed by its gold response and the end-of-turn token; the loss is on the
answer tokens only. Checkpoints are saved along the way; each (and the model before
training, step 0) is run through the MUI study on the contaminated task and on
out-of-domain tasks (the paper: GSM8K against ARC and MMLU). Per task and checkpoint:
accuracy and MUI with their intervals, the change from step 0 by an exact McNemar test on
the same items (accuracy) and a paired delete-one jackknife (MUI, as ``mui compare``), and
the direction of sec. 3.3 (:func:`~whitebox_eval.mui.utility_law.classify_direction`),
also stated only where both changes are significant (``direction_at_alpha``).

The paper expects the contaminated task to gain accuracy and MUI (accumulating, after an
early coarsening) and the out-of-domain tasks to lose both (collapsing).

No stopping rule reads the tested items: trained until significant (``until_significant``), the
model trains on every item of the contaminated task, but the stopping rule reads only a seeded
half of them (:func:`stopping_split`), and every change of the contaminated task (its paired tests,
accuracies and MUIs, and the claims resting on them) is computed on the other half. A fixed epoch
count tests every item.

The trained weights are cached under the cache root (:mod:`whitebox_eval.models.training`,
keyed by the model and its weights, the training sequences and the optimiser settings), so
two runs with the same training train once; each (checkpoint, task) MUI run is a resumable
run folder inside this run's ``runs/``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import torch

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.training import (
    Recipe,
    data_digest,
    kept_weights,
    load_weights,
    save_weights,
    train_rows,
    trained,
    weights_fingerprint,
)
from whitebox_eval.mui.contamination_config import ContaminationConfig
from whitebox_eval.mui.over_runs import paired_tests
from whitebox_eval.mui.finished import load_key_sets
from whitebox_eval.mui.statistics import jackknife_mui
from whitebox_eval.mui.study import MUIConfig, prepare_task, run_mui
from whitebox_eval.mui.utility_law import Direction, classify_direction
from whitebox_eval.runs import RunFolder, open_run, progress
from whitebox_eval.runs.finished import is_finished

SUB_RUNS = "runs"
BASE = "step-0"


def task_label(task: str) -> str:
    """A task's short name in result keys (``gsm8k`` for ``gsm8k=path/test.jsonl``)."""
    return MUIConfig(task=task).spec.name


def training_sequences(cfg: ContaminationConfig, lm) -> list[tuple[list[int], list[int], list[int]]]:
    """Each evaluated item of the contaminated task as prompted, then its gold response and the
    end-of-turn token: ``(ids, prediction rows, answer ids)`` for :func:`row_batch`."""
    tok = lm.tokenizer
    prepared = prepare_task(cfg.mui_config(cfg.model, cfg.task), tok)
    eos = lm.end_id
    out = []
    for it in prepared.items:
        prompt = list(prepared.prompt(it, tok))
        text = it.gold_response.strip() if prepared.fmt.chat else it.gold_response
        answer = list(tok(text, add_special_tokens=False)["input_ids"]) + ([int(eos)] if eos is not None else [])
        if not answer:
            raise WhiteboxError(f"item {it.id} of {cfg.task} has no gold response to train on")
        ids = prompt + answer
        out.append((ids, list(range(len(prompt) - 1, len(ids) - 1)), answer))
    return out


def stopping_split(ids: list[str], seed: int) -> tuple[list[str], list[str]]:
    """The contaminated task's items dealt once by a seeded shuffle into the stopping half (the only
    items a stopping rule reads) and the tested half (every claim's items; it takes the odd item of
    an odd count): disjoint, together every item, each in the task's own order."""
    order = sorted(map(str, ids))
    random.Random(f"mui/contamination/split/{seed}").shuffle(order)
    stop = set(order[: len(order) // 2])
    return [str(i) for i in ids if str(i) in stop], [str(i) for i in ids if str(i) not in stop]


def task_item_ids(cfg: ContaminationConfig, tokenizer) -> list[str]:
    """The contaminated task's evaluated item ids, in the MUI study's order."""
    return [str(it.id) for it in prepare_task(cfg.mui_config(cfg.model, cfg.task), tokenizer).items]


def trained_item_accuracy(lm, cfg: ContaminationConfig, ids: list[str]) -> list[bool]:
    """Whether each of the trained items ``ids`` of the contaminated task is answered right now, read
    exactly as the MUI study reads it: its prompt, greedy generation within the study's budget and
    stop strings, the task's answer check (no MUI is scored)."""
    from whitebox_eval.mui.responses import respond

    task = prepare_task(cfg.mui_config(cfg.model, cfg.task), lm.tokenizer)
    by_id = {str(it.id): it for it in task.items}
    items = [by_id[i] for i in ids]
    was = lm.model.training
    lm.model.eval()
    try:
        with torch.no_grad():
            _, responses = respond(lm, task, items)
    finally:
        lm.model.train(was)
    return [bool(task.score(it, r, lm.tokenizer)["correct"]) for it, r in zip(items, responses)]


def gain_test(before: list[bool], after: list[bool]) -> dict[str, Any]:
    """Accuracy after against before on the same items: exact McNemar; ``significant`` when p < 0.05
    and more items were gained than lost."""
    t = stats.mcnemar(after, before)
    return {"accuracy_before": float(sum(before)) / len(before), "accuracy_after": float(sum(after)) / len(after),
            "b": t.b, "c": t.c, "n": t.n, "p_value": t.p_value, "test": t.test,
            "significant": bool(t.p_value < stats.ALPHA and t.diff > 0)}


def _train(lm, seqs, cfg: ContaminationConfig, dest: Path, show_progress: bool | None, log,
           stop_ids: list[str] | None = None) -> dict:
    """Full-parameter AdamW on the answer tokens of every item (the one loop,
    :func:`whitebox_eval.models.training.train_rows`); weights saved at ``cfg.checkpoints`` and at
    the end. With ``until_significant``, epoch by epoch until the accuracy of the stopping items
    ``stop_ids`` (and of no other) is significantly up (:func:`gain_test`) or ``max_epochs`` (the
    record says which, with each epoch's test and time)."""
    steps_per_epoch = -(-len(seqs) // cfg.train_batch_size)
    epochs = cfg.max_epochs if cfg.until_significant else cfg.epochs
    total = steps_per_epoch * epochs
    recipe = Recipe(cfg.learning_rate, (0.9, 0.999), cfg.weight_decay, cfg.train_batch_size, total, cfg.seed,
                    f"mui/contamination/{cfg.seed}")
    start = time.perf_counter()
    if cfg.until_significant and not stop_ids:
        raise WhiteboxError("a stopping rule needs its own stopping items (stopping_split)")
    before = trained_item_accuracy(lm, cfg, stop_ids) if cfg.until_significant else None
    per_epoch: list[dict[str, Any]] = []
    saved: list[int] = []

    def after_step(step: int, loss: float) -> bool:
        stop = False
        if before is not None and step % steps_per_epoch == 0:
            t = gain_test(before, trained_item_accuracy(lm, cfg, stop_ids))
            per_epoch.append({"epoch": step // steps_per_epoch, "step": step, "loss": loss, **t})
            log(f"contamination epoch {step // steps_per_epoch}: stopping-half accuracy {t['accuracy_before']:.3f} -> "
                f"{t['accuracy_after']:.3f} (b={t['b']}, c={t['c']}, exact McNemar p = {t['p_value']:.3g}), "
                f"{time.perf_counter() - start:.0f} s since training began")
            stop = t["significant"]
        if step in cfg.checkpoints or step == total or stop:
            lm.model.eval()
            save_weights(lm, dest / f"step-{step}")
            saved.append(step)
            log(f"contamination step {step}/{total}: loss {loss:.4f}, checkpoint saved")
            lm.model.train()
        return stop

    result = train_rows(lm, seqs, recipe, after_step=after_step,
                        bar=lambda r: progress(r, desc="contamination fine-tuning (steps)", enabled=show_progress))
    losses = result.losses
    (dest / "losses.json").write_text(json.dumps(losses) + "\n", encoding="utf-8")
    info = {"steps": result.steps, "examples": len(seqs), "checkpoints": [f"step-{s}" for s in saved],
            "loss_first": losses[0], "loss_last": losses[-1], "seconds": round(time.perf_counter() - start, 1)}
    if before is not None:
        reached = bool(per_epoch and per_epoch[-1]["significant"])
        info["until_significant"] = {
            "cap_epochs": cfg.max_epochs, "epochs": len(per_epoch), "reached": reached, "per_epoch": per_epoch,
            "rule": f"train on all {len(seqs)} items epoch by epoch until the accuracy of the {len(stop_ids)} "
                    "stopping items (the MUI study's prompts, greedy, the task's check) is significantly above "
                    f"before (exact McNemar p < 0.05, more gained than lost), at most {cfg.max_epochs} epochs; "
                    f"the other {len(seqs) - len(stop_ids)} items are the tested half",
            "stop_items": list(stop_ids),
            "text": (f"significant after {len(per_epoch)} epoch(s)" if reached else
                     f"not significant within the cap of {cfg.max_epochs} epochs: the contamination did not take")}
    return info


def training_key(cfg: ContaminationConfig, lm, seqs, stop_ids: list[str] | None = None) -> dict:
    """What sets the contaminated weights (the cache key)."""
    return {"suite": "contamination", "model": lm.spec, "weights": weights_fingerprint(lm.model), "dtype": cfg.dtype,
            "task": cfg.task, "seed": cfg.seed, "epochs": cfg.epochs, "learning_rate": cfg.learning_rate,
            **({"until_significant": True, "max_epochs": cfg.max_epochs, "max_new_tokens": cfg.max_new_tokens,
                "mui": cfg.mui, "stop_ids": list(stop_ids or ())} if cfg.until_significant else {}),
            "weight_decay": cfg.weight_decay, "train_batch_size": cfg.train_batch_size,
            "checkpoints": list(cfg.checkpoints), "data": data_digest([s[0] + [-1] + s[2] for s in seqs])}


def run_contamination(cfg: ContaminationConfig, output: str | Path = "runs", *, run_id: str | None = None,
                      resume: bool = False, loaded=None, show_progress: bool | None = None) -> RunFolder:
    """Run (or resume) a contamination study and write its run folder (sec. 3.4)."""
    from whitebox_eval.models import load_model

    cfg.check()
    folder = open_run(output, cfg.to_dict(), run_id=run_id, resume=resume)
    lm = loaded or load_model(cfg.model, dtype=cfg.dtype)
    runs = folder.path / SUB_RUNS
    labels = {t: task_label(t) for t in cfg.tasks}
    if len(set(labels.values())) != len(labels):
        raise WhiteboxError(f"two tasks share a name ({', '.join(labels.values())}): give different tasks")

    def evaluate(name: str, model_spec: str) -> dict[str, str]:
        out = {}
        for task in cfg.tasks:
            path = runs / f"{name}-{labels[task]}"
            if not is_finished(path):
                folder.log(f"MUI of {name} on {labels[task]}")
                run_mui(cfg.mui_config(model_spec, task), runs, run_id=path.name, resume=path.is_dir(), loaded=lm,
                        show_progress=show_progress)
            out[labels[task]] = str(path)
        return out

    folders = {BASE: evaluate(BASE, cfg.model)}
    split = stopping_split(task_item_ids(cfg, lm.tokenizer), cfg.seed) if cfg.until_significant else None
    stop_ids = split[0] if split else None
    with kept_weights(lm.model):
        seqs = training_sequences(cfg, lm)
        entry = trained("contamination", training_key(cfg, lm, seqs, stop_ids), f"{cfg.model}-{labels[cfg.task]}",
                        lambda dest: _train(lm, seqs, cfg, dest, show_progress, folder.log, stop_ids), log=folder.log)
        for name in entry.info["checkpoints"]:
            path = entry.path / name
            if not all(is_finished(runs / f"{name}-{labels[t]}") for t in cfg.tasks):
                load_weights(lm.model, path)
            folders[name] = evaluate(name, str(path))
    results = summarize(cfg, folders, labels, entry.info, split)
    results["finetune"]["cache_key"] = entry.digest
    done = folder.done_ids()
    halves = {i: half for half, ids in zip(("stop", "tested"), split) for i in ids} if split else {}
    folder.append_samples([s for s in _samples(folders, labels[cfg.task], halves) if s["id"] not in done])
    folder.save_results(results)
    folder.log(f"fine-tuned weights: {entry.path} ({'reused' if entry.reused else 'trained here'})")
    return folder


def _samples(folders: dict[str, dict[str, str]], contaminated: str, halves: dict[str, str]) -> list[dict]:
    """One line per checkpoint, task and item: whether it was answered correctly, and for the
    contaminated task's items under a stopping rule, their half (``stop`` or ``tested``)."""
    out = []
    for name, by_task in folders.items():
        for label, path in by_task.items():
            for s in RunFolder.open(path).read_samples():
                row = {"id": f"{name}/{label}/{s['id']}", "stage": f"{name}/{label}", "checkpoint": name,
                       "task": label, "item": s["id"], "correct": bool(s["correct"]),
                       "n_key_units": s.get("n_key_units")}
                if label == contaminated and halves:
                    row["half"] = halves[str(s["id"])]
                out.append(row)
    return out


def _point(run: str, ids: list[str] | None) -> dict[str, Any]:
    """A run's accuracy and MUI with their intervals: as its results.json holds them (every item), or
    recomputed on ``ids`` alone (Wilson; delete-one jackknife, as the MUI study computes them)."""
    folder = RunFolder.open(run)
    if ids is None:
        res = folder.load_results()
        return {k: res[k] for key in ("accuracy", "mui")
                for k in (key, *(stats.derived_key(key, s) for s in stats.DERIVED_SUFFIXES)) if k in res}
    correct = {str(s["id"]): bool(s["correct"]) for s in folder.read_samples()}
    out: dict[str, Any] = {}
    stats.add_proportion(out, "accuracy", [correct[i] for i in ids])
    stats.add_estimate(out, "mui", jackknife_mui(ks := load_key_sets(folder), ks.positions(ids)))
    return out


def _significant(t: dict) -> int:
    """+1 / -1 where the change is significant (p < alpha) up / down, else 0."""
    if t.get("p_value") is None or t["p_value"] >= stats.ALPHA:
        return 0
    return 1 if t["diff"] > 0 else -1


def direction_at_alpha(acc: dict, mui: dict) -> str:
    """Sec. 3.3's direction where both changes are significant, else ``undetermined``."""
    a, m = _significant(acc), _significant(mui)
    if not a or not m:
        return Direction.UNDETERMINED.value
    return classify_direction((0, 0), (a, m)).value


def summarize(cfg: ContaminationConfig, folders: dict[str, dict[str, str]], labels: dict[str, str],
              info: dict, split: tuple[list[str], list[str]] | None = None) -> dict[str, Any]:
    """results.json: per task and checkpoint the point with intervals, the change from step 0
    (``paired_tests``: ``accuracy,<task>`` / ``mui,<task>`` for the final checkpoint, and
    ``...,<checkpoint>`` for each), the direction; the headline holds the final checkpoint's.
    Under a stopping rule (``split``: stopping and tested items) the contaminated task's points
    and tests are on its tested half alone (``split`` says so)."""
    final = info["checkpoints"][-1]
    results: dict[str, Any] = {"task": labels[cfg.task], "ood_tasks": [labels[t] for t in cfg.ood_tasks],
                               "checkpoints": [BASE, *info["checkpoints"]], "final": final,
                               "finetune": dict(info, seconds=None), "tasks": {}, "paired_tests": {}}
    if split:
        results["split"] = {"stop": list(split[0]), "tested": list(split[1]), "seed": cfg.seed,
                            "text": f"{labels[cfg.task]}: trained on all {len(split[0]) + len(split[1])} items, "
                                    f"stopped on {len(split[0])}, tested on the other {len(split[1])}"}
    head: dict[str, Any] = {}
    for task in cfg.tasks:
        label = labels[task]
        role = "contaminated" if task == cfg.task else "out of domain"
        ids = split[1] if split and task == cfg.task else None
        per: dict[str, Any] = {}
        base_run = folders[BASE][label]
        base_row = _point(base_run, ids)
        base_point = (100 * base_row["accuracy"], 100 * base_row["mui"])
        for name, by_task in folders.items():
            row = _point(by_task[label], ids)
            if name != BASE:
                acc, mui = paired_tests(base_run, by_task[label], ids)
                point = (100 * row["accuracy"], 100 * row["mui"])
                row.update(direction=classify_direction(base_point, point).value,
                           direction_at_alpha=direction_at_alpha(acc, mui), accuracy_change=acc, mui_change=mui)
                stats_names = [f"accuracy,{label},{name}", f"mui,{label},{name}"]
                results["paired_tests"][stats_names[0]], results["paired_tests"][stats_names[1]] = acc, mui
                if name == final:
                    results["paired_tests"][f"accuracy,{label}"] = acc
                    results["paired_tests"][f"mui,{label}"] = mui
                    stats.add_difference(head, f"accuracy_change,{label}", acc)
                    stats.add_difference(head, f"mui_change,{label}", mui)
                    head[f"direction,{label}"] = row["direction"]
                    head[f"direction_at_alpha,{label}"] = row["direction_at_alpha"]
            per[name] = row
            for key in ("accuracy", "mui"):
                which = "base" if name == BASE else ("final" if name == final else name)
                if key in row:
                    head_key = f"{key},{label},{which}"
                    head[head_key] = row[key]
                    for suffix in stats.DERIVED_SUFFIXES:
                        if f"{key}_{suffix}" in row:
                            head[stats.derived_key(head_key, suffix)] = row[f"{key}_{suffix}"]
        results["tasks"][label] = {"role": role, "spec": task, "runs": {k: Path(v[label]).name for k, v in folders.items()},
                                   "items": "tested half" if ids is not None else "all", "checkpoints": per}
    results["headline"] = head
    return results


def describe(results: dict[str, Any]) -> str:
    """A plain-text table of every task's move from step 0 to each checkpoint."""
    lines = [f"{'task':10s} {'checkpoint':11s} {'accuracy %':>11s} {'MUI %':>8s}  direction (at alpha)"]
    for label, t in results["tasks"].items():
        for name, row in t["checkpoints"].items():
            lines.append(f"{label[:10]:10s} {name:11s} {100 * row.get('accuracy', float('nan')):10.1f} "
                         f"{100 * row.get('mui', float('nan')):8.3f}  "
                         + (f"{row['direction']} ({row['direction_at_alpha']})" if "direction" in row else "-"))
    return "\n".join(lines)
