"""Heads per task (paper 002 sec. 4): EAP-IG head ranking of every task and the heads
several tasks share, resumable per task."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Mapping, Sequence

from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.roles import encode_examples
from whitebox_eval.gar.selection import select_tasks, task_examples
from whitebox_eval.gar.config import GARAttributeConfig
from whitebox_eval.gar.study_base import coverage_model, open_gar_run, study_engine
from whitebox_eval.gar.tasks import GARTask
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder
from whitebox_eval.runs.pass_plan import plan_passes
from whitebox_eval.runs.passes import run_pass


def attribution_baseline(task: GARTask) -> str:
    """Classification tasks use each example's Yes/No partner as the corrupted input;
    generation tasks have no partner, so they walk from zero input embeddings."""
    return "pair" if task.g2c else "zero"


def shared_heads(rankings: Mapping[str, Sequence[Head]]) -> list[dict]:
    """Heads in the top lists of several tasks, most shared first: the reused core of
    the task circuits (sec. 4: circuits compared across tasks)."""
    count: dict[Head, list[str]] = defaultdict(list)
    for task_id, heads in rankings.items():
        for h in heads:
            count[tuple(h)].append(task_id)
    ordered = sorted(count.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [{"head": list(h), "n_tasks": len(ts), "tasks": ts} for h, ts in ordered if len(ts) > 1]


def run_gar_attribute(cfg: GARAttributeConfig, output: str | Path = "runs", *, run_id: str | None = None,
                      resume: bool = False, loaded: LoadedModel | None = None,
                      show_progress: bool | None = None) -> RunFolder:
    """Rank heads per task by EAP-IG (KL metric) and list the heads several tasks share.

    Resumable per task: each finished task is one sample (its top heads) and one array
    part (mean head_out / q / k / v attribution [L, H] (k, v: [L, H_kv]) and MLP [L])."""
    from whitebox_eval.gar import plots
    from whitebox_eval.gar.heads import attribute_heads

    if cfg.top < 1:
        raise WhiteboxError(f"--top must be >= 1 (got {cfg.top})")
    tasks = select_tasks(cfg.tasks, include_kr=False)
    loaded = coverage_model(cfg, loaded)
    folder = open_gar_run(cfg, output, run_id=run_id, resume=resume, loaded=loaded,
                          examples=[e for t in tasks for e in task_examples([t], cfg.limit, cfg.seed)])
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = study_engine(cfg, loaded)  # --edit: every pass
    ids = [t.task_id for t in tasks]
    folder.log(f"attribute: {len(tasks)} tasks, model {cfg.model}")

    def score(idx: list[int]):
        (k,) = idx
        task = tasks[k]
        encoded = encode_examples(task_examples([task], cfg.limit, cfg.seed), loaded.tokenizer)
        attr = attribute_heads(engine, encoded, baseline=attribution_baseline(task), steps=cfg.steps,
                               batch_size=cfg.batch_size)
        top = attr.ranked_heads(cfg.top)
        record = {"id": ids[k], "baseline": attr.baseline, "n_examples": attr.n_examples, "skipped": attr.skipped,
                  "top_heads": [{"head": list(h), "head_out": float(attr.head_out[h])} for h in top]}
        arrays = {"head_out": attr.head_out, "q": attr.q, "k": attr.k, "v": attr.v, "mlp": attr.mlp}
        return [record], {name: a[None] for name, a in arrays.items() if a is not None}

    plan_passes(folder, [("attribute", len(ids))])  # one pass: a task an item
    head_out = run_pass(folder, "attribute", ids, 1, score, desc="tasks", show_progress=show_progress)["head_out"]
    samples = {s["id"]: s for s in folder.read_samples()}
    folder.save_array("attribution_head_out_per_task", head_out)
    rankings = {t: [tuple(x["head"]) for x in samples[t]["top_heads"]] for t in ids}
    shared = shared_heads(rankings)
    union = list(dict.fromkeys(h for t in ids for h in rankings[t]))
    plots.plot_task_heads(head_out, ids, union, folder.plot_path("attribution_per_task"),
                          title=f"|EAP-IG head_out attribution| per task, top {cfg.top} of each ({cfg.model})")
    mean = head_out.mean(0)
    plots.plot_head_heatmap(mean, folder.plot_path("attribution_mean"), f"mean EAP-IG head_out attribution ({cfg.model})",
                            {"shared": [tuple(s["head"]) for s in shared[:10]]})
    res = {"n_tasks": len(tasks), "tasks": {t: samples[t] for t in ids}, "shared_heads": shared,
           "top": cfg.top, "headline": {"n_shared_heads": len(shared),
                                        "max_tasks_sharing_a_head": max((s["n_tasks"] for s in shared), default=1)}}
    folder.save_results(res)
    return folder
