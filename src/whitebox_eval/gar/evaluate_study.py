"""The GAR benchmark evaluation (paper 002 sec. 3, App. C), resumable and sharded over
torchrun ranks.

Every example of the chosen tasks is scored from one engine pass per batch (batches of
examples sorted by token length, so little padding): first-token probabilities of the
target and its alternatives at the last position (App. C), streamed to
``samples.jsonl`` in that order.  ``results.json`` holds accuracy (App. C rule and
argmax) overall, by form, by difficulty (n_r x negate), by syntactic variation, on
knowledge-recall sub-problems, and the compositionality gap; plots are fig. 2 and the
accuracy by difficulty.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar import evaluation as ev
from whitebox_eval.gar.generator import GARExample
from whitebox_eval.gar.metrics import METRICS, record_metrics
from whitebox_eval.gar.roles import EncodedExample, encode_examples
from whitebox_eval.gar.scoring import ExampleScore, score_batch
from whitebox_eval.gar.elements import element_half, split_record
from whitebox_eval.gar.selection import example_id, select_tasks, task_examples
from whitebox_eval.gar.config import GARConfig
from whitebox_eval.gar.study_base import coverage_model, estimate, open_gar_run, study_engine
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder
from whitebox_eval.runs.distributed import world as current_world
from whitebox_eval.runs.pass_plan import plan_passes
from whitebox_eval.runs.passes import run_pass


def _score_record(ex: GARExample, enc: EncodedExample, s: ExampleScore) -> dict:
    t = ex.task
    return {"id": example_id(ex), "task_id": ex.task_id, "index": ex.index, "n_r": t.n_r,
            "negate": t.negate, "g2c": t.g2c, "syntactic": None if t.is_kr else t.syntactic,
            "kr": t.is_kr, "prompt": ex.prompt, "target": ex.target, "label": ex.label,
            "alternatives": list(ex.alternatives), "n_tokens": enc.n_tokens, **s.to_dict()}


def run_gar(cfg: GARConfig, output: str | Path = "runs", *, run_id: str | None = None,
            resume: bool = False, loaded: LoadedModel | None = None,
            show_progress: bool | None = None) -> RunFolder:
    """Evaluate the model on the GAR tasks and write (or resume) the run folder."""
    if cfg.rule not in ev.RULES:
        raise WhiteboxError(f"unknown App. C rule {cfg.rule!r}; use one of {ev.RULES}")
    tasks = select_tasks(cfg.tasks, include_kr=cfg.include_kr)
    half = element_half(cfg.elements, cfg.seed)
    examples = task_examples(tasks, cfg.limit, cfg.seed, half)
    if cfg.batch_size < 1:
        raise WhiteboxError(f"batch size must be >= 1 (got {cfg.batch_size})")
    ranks = current_world()
    loaded = coverage_model(cfg, loaded)
    folder = open_gar_run(cfg, output, run_id=run_id, resume=resume, world=ranks, loaded=loaded, examples=examples)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = study_engine(cfg, loaded)  # --edit: every pass
    encoded = encode_examples(examples, loaded.tokenizer)
    ids = [example_id(e) for e in examples]
    if len(set(ids)) != len(ids):
        raise WhiteboxError("two examples share an id; check the task list for duplicates")
    order = sorted(range(len(examples)), key=lambda i: (encoded[i].n_tokens, i))  # batches of similar length
    folder.log(f"{len(tasks)} tasks, {len(examples)} examples, model {cfg.model}"
               + (f", rank {ranks.rank} of {ranks.size}" if ranks.distributed else ""))

    def score(idx: list[int]):
        chunk = [order[j] for j in idx]
        scores = score_batch(engine, [encoded[i] for i in chunk], rule=cfg.rule)
        return [_score_record(examples[i], encoded[i], s) for i, s in zip(chunk, scores)], {}

    plan_passes(folder, [("evaluate", len(order))])  # one pass
    run_pass(folder, "evaluate", [ids[i] for i in order], cfg.batch_size, score, world=ranks if ranks.distributed
             else None, desc="gar batches", show_progress=show_progress if ranks.main else False)
    if not ranks.main:
        return folder
    return finalize_gar(folder, examples, cfg.model, {} if half is None else {"element_split": {
        **split_record(cfg.seed), "elements": half.name}})


def _difficulty_key(k: tuple[int, bool]) -> str:
    return f"n_r={k[0]}" + (",negate" if k[1] else "")


def _accuracy_tables(examples: Sequence[GARExample], corr: Sequence[bool], gar: Sequence[bool]) -> dict[str, Any]:
    """Accuracy under one correctness rule: overall (GAR tasks), by form, by difficulty,
    by syntactic variation, on KR sub-problems and the compositionality gap."""
    r: dict[str, Any] = {
        "overall": ev.accuracy([c for c, g in zip(corr, gar) if g]),
        "by_form": ev.accuracy_by_form(examples, corr),
        "by_difficulty": {form: {_difficulty_key(k): v for k, v in
                                 sorted(ev.accuracy_by_difficulty(examples, corr, form).items())}
                          for form in ("generation", "classification")},
        "by_syntactic_variation": ev.accuracy_by_syntactic_variation(examples, corr),
        "kr": ev.kr_accuracy(examples, corr),
    }
    try:
        r["compositionality_gap"] = ev.compositionality_gap(examples, corr)
    except WhiteboxError:
        r["compositionality_gap"] = None
    return r


def _form(e: GARExample) -> str:
    return "kr" if e.task.is_kr else ("classification" if e.task.g2c else "generation")


def gar_results(examples: Sequence[GARExample], samples: dict[str, dict]) -> dict:
    """results.json content from the examples and their sample records (by id)."""
    missing = [example_id(e) for e in examples if example_id(e) not in samples]
    if missing:
        raise WhiteboxError(f"{len(missing)} examples have no score yet (e.g. {missing[0]}); "
                            "rerun with --resume to finish them")
    recs = [samples[example_id(e)] for e in examples]
    gar = [not e.task.is_kr for e in examples]
    res: dict[str, Any] = {"n_examples": len(examples), "n_tasks": len({e.task_id for e in examples})}
    res["appc"] = _accuracy_tables(examples, [bool(r["correct"]) for r in recs], gar)
    res["argmax"] = _accuracy_tables(examples, [bool(r["correct_argmax"]) for r in recs], gar)
    probs = defaultdict(list)
    for e, rec in zip(examples, recs):
        probs[_form(e)].append(rec["target_prob"])
    res["mean_target_prob"] = {k: float(np.mean(v)) for k, v in probs.items()}
    res["shared_first_token_examples"] = sum(bool(r.get("shared_first_token")) for r in recs)
    groups: dict[str, list[dict]] = defaultdict(list)
    for e, rec in zip(examples, recs):
        if not e.task.is_kr:
            groups["overall"].append(rec)
        groups[_form(e)].append(rec)
    res["metrics"] = {k: record_metrics(v) for k, v in groups.items()}  # with intervals (gar.metrics)
    res["error_analysis"] = ev.error_analysis(examples, samples)
    head: dict[str, Any] = {}
    overall = res["metrics"].get("overall", {})
    for key in METRICS:  # the paper's rule first, then the metrics that can move on small models
        if key in overall:
            stats.add_estimate(head, key, estimate(overall, key))
    head.update({"acc,generation": res["appc"]["by_form"].get("generation"),
                 "acc,classification": res["appc"]["by_form"].get("classification"),
                 "compositionality_gap": res["appc"]["compositionality_gap"]})
    res["headline"] = head
    return res


def finalize_gar(folder: RunFolder, examples: Sequence[GARExample], model: str,
                 extra: dict | None = None) -> RunFolder:
    """Write results.json (with ``extra``) and the plots from the streamed samples."""
    from whitebox_eval.gar.plots import plot_accuracy_by_difficulty

    samples = {s["id"]: s for s in folder.read_samples()}
    res = {**gar_results(examples, samples), **(extra or {})}
    folder.save_results(res)
    correct = [bool(samples[example_id(e)]["correct"]) for e in examples]
    if any(not e.task.is_kr for e in examples):
        ev.plot_gar_summary({model: (list(examples), correct)}, folder.plot_path("gar_summary"))
    kr = res["appc"]["kr"]
    plot_accuracy_by_difficulty(res["appc"]["by_difficulty"], folder.plot_path("accuracy_by_difficulty"),
                                title=f"GAR accuracy by difficulty ({model})",
                                kr=None if kr is None or (isinstance(kr, float) and math.isnan(kr)) else kr)
    folder.log("results written")
    return folder
