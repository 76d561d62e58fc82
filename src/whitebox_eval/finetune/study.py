"""A fine-tuning as a study: a model trained on a task into a run folder that loads as ``--model``.

The task's items (:mod:`.sources`) are split three ways (:mod:`.splits`: train, validation,
test, deduplicated, the demonstration pool kept out); the test split is checked before
training (``check_before.json``); the one loop (:func:`whitebox_eval.models.training.train_rows`)
trains on the training split, saving its state atomically every ``save_every`` steps
(``state/loop.pt``: ``--resume`` after a kill continues to the same weights) and the validation
loss every ``eval_every`` steps (early stopping after ``patience`` evaluations without a new
best; arithmetic text: also the validation split's greedy exact match in 004's free format, the
best that early stopping follows); the weights go into the run folder itself (``model.safetensors``, config.json, the
tokenizer: ``--model RUN_FOLDER`` loads it in every command) with ``trained.json`` (steps,
losses, the weights' SHA-256, also recorded in config.yaml as ``trained_weights`` and in every
consumer's config.yaml as ``model_weights``); then the test split is checked again
(``check_after.json``). results.json: accuracy before and after with Wilson intervals, the
exact McNemar test of the change, the split hashes, the recipe; ``plots/loss.png``: the curve.
Planted facts also get question-form recall before and after (``question_before.json`` /
``question_after.json``; results.json's ``question_recall``: descriptive, not the check;
:func:`.planted_facts.questions`).
With ``keep_checkpoints`` the weights along the way are kept too (:mod:`whitebox_eval.models.checkpoints`:
``checkpoints/step-NNNNNN/``, each loadable as ``--model``); off, every output is as without the option.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune import check, gar_tasks
from whitebox_eval.finetune.config import FinetuneConfig
from whitebox_eval.finetune.planted_facts import (QUESTION_NOTE, QUESTION_PROMPT, RECALL_CHECK, questions,
                                                  template_splits)
from whitebox_eval.finetune.sources import (ARITH, FACTS, GAR, TEXT, Item, answer_end_id, encode, load_items,
                                           parse_source)
from whitebox_eval.finetune.splits import context_draw, make_splits
from whitebox_eval.models.checkpoints import checkpoint_steps, list_checkpoints, save_checkpoint
from whitebox_eval.models.training import (TRAINED_FILE, WEIGHTS_FILE, Recipe, kept_weights, load_weights,
                                           save_weights, train_rows, weights_file_sha256)
from whitebox_eval.runs import RunFolder, open_run, progress
from whitebox_eval.runs.atomic import AtomicFile, write_atomic, writing
from whitebox_eval.runs.kept import kept
from whitebox_eval.runs.provenance import CONFIG_FILE, dump_yaml, read_config

STATE_FILE = Path("state") / "loop.pt"


def run_finetune(cfg: FinetuneConfig, output: str | Path = "runs", *, run_id: str | None = None,
                 resume: bool = False, loaded=None, show_progress: bool | None = None) -> RunFolder:
    """Fine-tune ``cfg.model`` on ``cfg.task`` into a run folder (or continue one with ``resume``)."""
    from whitebox_eval.datafiles import recording
    from whitebox_eval.models import load_model

    cfg.check()
    source = parse_source(cfg.task)
    with recording() as read:
        items, task = load_items(source, cfg.limit, cfg.seed, cfg.test, cfg.line_style)
    splits = template_splits(items) if source.kind == FACTS else \
        gar_tasks.splits(items, validation=cfg.validation, seed=cfg.seed) if source.kind == GAR else \
        make_splits(items, validation=cfg.validation, test=cfg.test, shots=cfg.shots, seed=cfg.seed)
    folder = open_run(output, cfg.to_dict(), run_id=run_id, resume=resume, data_files=read)
    record = splits.record(cfg.seed)
    kept_record = kept(folder.path, "splits", lambda: record)
    if {k: v["sha256"] for k, v in kept_record.items() if isinstance(v, dict)} != \
            {k: v["sha256"] for k, v in record.items() if isinstance(v, dict)}:
        raise WhiteboxError(f"cannot resume {folder.path}: the task's items changed since its splits were drawn")
    folder.log(f"splits: train {len(splits.train)}, validation {len(splits.validation)}, test {len(splits.test)}, "
               f"demonstrations {len(splits.demos)}, {splits.duplicates} duplicates dropped")
    lm = loaded or load_model(cfg.model, dtype=cfg.dtype)
    tok = lm.tokenizer
    eos = answer_end_id(cfg.answer_end, lm)

    def enc(part, demos=()):
        return [encode(source, it, tok, list(demos), eos) for it in part]

    def in_context(part, name):  # --train-context: other training lines before each, the loss on its own answer
        return [encode(source, it, tok, context_draw(splits.train, cfg.train_context,
                                                     f"finetune/context/{cfg.seed}/{name}/{i}",
                                                     exclude=i if name == "train" else None), eos)
                for i, it in enumerate(part)]

    train, val = in_context(splits.train, "train"), in_context(splits.validation, "validation")
    test = enc(splits.test, splits.demos)

    def run_check() -> list[dict]:
        return check.held_out_check(lm, source, splits.test, test, task, batch_size=cfg.batch_size,
                                    max_new_tokens=cfg.max_new_tokens, demos=splits.demos,
                                    samples=cfg.check_samples, seed=cfg.seed)

    asked = [Item(q.id, q.prompt, q.answer, q.prompt, q) for q in questions(cfg.limit or 0)] \
        if source.kind == FACTS else []

    def run_questions() -> list[dict]:  # planted facts: the MCQ's question, no options (descriptive)
        return check.held_out_check(lm, source, asked, enc(asked), task, batch_size=cfg.batch_size,
                                    max_new_tokens=cfg.max_new_tokens)

    guard = kept_weights(lm.model) if loaded is not None else _nothing()
    with guard:
        before = kept(folder.path, "check_before", run_check)
        q_before = kept(folder.path, "question_before", run_questions) if asked else None
        info = _trained(folder, lm, cfg, train, val, show_progress,
                        splits.validation if source.kind == ARITH else None, splits.demos)
        after = kept(folder.path, "check_after", run_check)
        q_after = kept(folder.path, "question_after", run_questions) if asked else None
    folder.save_array("losses", np.asarray(info["losses"], dtype=np.float64))
    check.plot_losses(info["losses"], info["validation"], folder.plot_path("loss.png"))
    done = folder.done_ids()
    folder.append_samples([
        {"id": b["id"], "stage": "test", **{f"{k},before": v for k, v in b.items() if k != "id"},
         **{f"{k},after": v for k, v in a.items() if k != "id"}}
        for b, a in zip(before, after) if b["id"] not in done])
    results = _results(cfg, source, splits, record, before, after, info)
    if asked:
        results["question_recall"] = question_recall(q_before, q_after)
    folder.save_results(results)
    return folder


def question_recall(before: list[dict], after: list[dict]) -> dict[str, Any]:
    """results.json's ``question_recall``: the facts recalled from their MCQ question (no options)
    before and after, k/n with Wilson intervals, and the exact McNemar test of the change (as the
    check's)."""
    b, a = [bool(r["correct"]) for r in before], [bool(r["correct"]) for r in after]
    block: dict[str, Any] = {"prompt": QUESTION_PROMPT, "note": QUESTION_NOTE,
                             "before": f"{sum(b)}/{len(b)}", "after": f"{sum(a)}/{len(a)}"}
    stats.add_proportion(block, "accuracy,before", b)
    stats.add_proportion(block, "accuracy,after", a)
    stats.add_paired(block, "accuracy,after_vs_before", stats.mcnemar(a, b))
    return block


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _trained(folder: RunFolder, lm, cfg: FinetuneConfig, train, val, show_progress, val_items=None,
             demos=()) -> dict[str, Any]:
    """The training's record: read back with the weights when trained already, else trained now
    (from the saved state where there is one) and written into the folder. With ``val_items``
    (arithmetic text) each evaluation also scores their greedy exact match in 004's free format
    (:func:`.check.free_exact_match`, ``demos`` shown), and early stopping follows it rather than
    the loss (a lower answer loss on bare lines went with fewer right answers in the pilot)."""
    marker = folder.path / TRAINED_FILE
    if marker.is_file():
        load_weights(lm.model, folder.path)
        return json.loads(marker.read_text(encoding="utf-8"))
    steps = cfg.steps(len(train))
    recipe = Recipe(cfg.learning_rate, cfg.betas, cfg.weight_decay, cfg.train_batch_size, steps, cfg.seed,
                    f"finetune/{cfg.seed}", cfg.grad_clip)
    every = cfg.eval_every or cfg.save_every or steps
    state_path = folder.path / STATE_FILE
    start = state_path.read_bytes() if state_path.is_file() else None
    history: dict[str, Any] = {"validation": []}
    if start is not None:
        folder.log(f"training continues from the state saved in {state_path}")

    keep = set(checkpoint_steps(steps, cfg.keep_checkpoints))
    if keep and start is None:
        save_checkpoint(lm, folder.path, 0, folder.run_id)

    def after_step(step: int, loss: float) -> bool:
        stop = _evaluated(step, loss)
        if keep and (step in keep or stop):
            save_checkpoint(lm, folder.path, step, folder.run_id)
        return stop

    def _evaluated(step: int, loss: float) -> bool:
        if step % every and step != steps:
            return False
        point = {"step": step, "loss": check.mean_loss(lm, val, cfg.batch_size)}
        if val_items is not None:  # arithmetic text: the greedy answer in 004's free format
            hits = check.free_exact_match(lm, val_items, demos, cfg.batch_size)
            point["exact"] = sum(hits) / len(hits)
        history["validation"].append(point)
        folder.log(f"step {step}/{steps}: training loss {loss:.4f}, validation loss {point['loss']:.4f}"
                   + (f", validation exact match {point['exact']:.1%}" if "exact" in point else ""))
        points = history["validation"]
        best = (max(range(len(points)), key=lambda i: points[i]["exact"]) if "exact" in point
                else min(range(len(points)), key=lambda i: points[i]["loss"]))
        return bool(cfg.patience and len(points) - 1 - best >= cfg.patience)

    def save_state(data: bytes) -> None:
        with writing(folder.path), AtomicFile(state_path, "wb") as f:
            f.write(data)

    seqs = check.sequences(train)
    result = train_rows(lm, seqs, recipe, after_step=after_step, save_state=save_state, save_every=cfg.save_every,
                        start=start, extra=history,
                        bar=lambda r: progress(r, desc="fine-tuning (steps)", enabled=show_progress))
    _write_weights(lm, folder.path)
    info = {"steps": result.steps, "planned_steps": steps, "examples_seen": result.seen,
            "stopped_early": result.stopped and result.steps < steps, "validation": history["validation"], "losses": result.losses,
            "seconds_last_call": round(result.seconds, 1), "sha256": weights_file_sha256(folder.path),
            "run_id": folder.run_id}
    if keep:
        info["checkpoints"] = [{k: c[k] for k in ("step", "sha256")} for c in list_checkpoints(folder.path)]
    write_atomic(marker, json.dumps(info, indent=1) + "\n")
    config = read_config(folder.path)
    config["trained_weights"] = {"sha256": info["sha256"], "steps": result.steps}
    write_atomic(folder.path / CONFIG_FILE, dump_yaml(config))
    state_path.unlink(missing_ok=True)
    if state_path.parent.is_dir() and not any(state_path.parent.iterdir()):
        state_path.parent.rmdir()
    return info


def _write_weights(lm, path: Path) -> None:
    """The model's Hugging Face files into the run folder: written beside it, then moved in with
    config.json last, so the folder loads only once every weight is there."""
    tmp = path / ".weights.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    with writing(path):
        save_weights(lm, tmp)
        names = sorted(p.name for p in tmp.iterdir())
        for name in sorted(names, key=lambda n: n == "config.json"):
            os.replace(tmp / name, path / name)
        tmp.rmdir()
    if not (path / WEIGHTS_FILE).is_file():
        raise WhiteboxError(f"the trained weights were not written to {path}")


def _results(cfg: FinetuneConfig, source, splits, record, before, after, info) -> dict[str, Any]:
    b, a = check.outcomes(source, before), check.outcomes(source, after)
    head: dict[str, Any] = {}
    stats.add_proportion(head, "accuracy,before", b)
    stats.add_proportion(head, "accuracy,after", a)
    results: dict[str, Any] = {
        "headline": head, "task": source.label, "check": "next-token accuracy on the test lines (per token)"
        if source.kind == TEXT else RECALL_CHECK if source.kind == FACTS
        else "greedy generation on the test split, the task's answer check",
        "splits": {k: {"n": v["n"], "sha256": v["sha256"]} for k, v in record.items() if isinstance(v, dict)},
        "duplicates_dropped": splits.duplicates,
        "recipe": {k: getattr(cfg, k) for k in ("learning_rate", "betas", "weight_decay", "train_batch_size",
                                                 "epochs", "max_steps", "grad_clip", "seed", "patience")},
        "training": {k: info[k] for k in ("steps", "planned_steps", "examples_seen", "stopped_early", "validation",
                                          "sha256")},
        "loss_first": info["losses"][0] if info["losses"] else None,
        "loss_last": info["losses"][-1] if info["losses"] else None,
    }
    if info.get("checkpoints"):
        results["checkpoints"] = info["checkpoints"]
    if source.kind != TEXT:
        stats.add_paired(results, "accuracy,after_vs_before", stats.mcnemar(a, b))
    if before and "p_correct" in before[0]:  # arithmetic text: 004's free P(correct), sampled
        pb, pa = [r["p_correct"] for r in before], [r["p_correct"] for r in after]
        stats.add_mean(head, "p_correct,before", pb)
        stats.add_mean(head, "p_correct,after", pa)
        stats.add_paired(results, "p_correct,after_vs_before", stats.paired_bootstrap(pa, pb))
        results["check"] = (f"paper 004's free format, {cfg.shots}-shot: free P(correct) over {cfg.check_samples} "
                            "answers drawn at T = 1 per test problem, the greedy answer's exact match beside it")
    if source.kind == GAR:  # per format, against its uninformed level
        gar_tasks.add_results(results, before, after, cfg.seed)
    return results
