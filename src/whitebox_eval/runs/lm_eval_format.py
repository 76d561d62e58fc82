"""Our run files in the layout lm-evaluation-harness (lm-eval 0.4.13) writes, beside our own keys.

- :func:`lm_eval_fields`: the top-level blocks of lm-eval's results file (``results``,
  ``group_subtasks``, ``configs``, ``versions``, ``n-shot``, ``higher_is_better``,
  ``n-samples``, ``config``, ``git_hash``, ``date``, ``transformers_version``), as
  ``lm_eval.evaluator.simple_evaluate`` and ``EvaluationTracker.save_results_aggregated``
  build them, so ``lm_eval.utils.make_table(results)`` prints a run. The task entry
  holds our ``metric,filter`` keys (the filter is our method: ``acc,baseline``,
  ``acc_norm,cloze``) with their ``metric_stderr,filter`` (lm-eval's standard error:
  sample sd / sqrt(n), :func:`whitebox_eval.stats.sample_stderr`).
- :func:`sample_fields`: the fields of lm-eval's ``--log_samples`` records that apply to
  one item (``doc_id``, ``doc``, ``target``, ``arguments``, ``doc_hash``, ``prompt_hash``,
  ``target_hash``), hashed as lm-eval hashes them (``lm_eval.utils.hash_string``: sha256
  hex of the UTF-8 text; the doc as ``json.dumps(doc, indent=2, ensure_ascii=False)``).

Keys that have no meaning for a run are left out, never invented.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from whitebox_eval.stats import derived_key, is_derived, split_key

HIGHER_IS_BETTER = {"acc": True, "acc_norm": True, "pa": True, "p_correct": True, "alignment_error": False}
"""Metric names whose direction is known (alignment error: lower is better); others get no entry."""


def hash_string(text: str) -> str:
    """``lm_eval.utils.hash_string``: the sha256 hex digest of ``text`` in UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def doc_hash(doc: Mapping[str, Any]) -> str:
    """lm-eval's ``doc_hash``: :func:`hash_string` of ``json.dumps(doc, indent=2, ensure_ascii=False)``."""
    return hash_string(json.dumps(doc, indent=2, ensure_ascii=False, default=str))


def log_arguments(requests: Sequence[tuple[str, str]]) -> dict[str, dict[str, str]]:
    """(context, continuation) requests as lm-eval's samples file writes ``arguments``."""
    return {f"gen_args_{i}": {"arg_0": c, "arg_1": x} for i, (c, x) in enumerate(requests)}


def sample_fields(item: Any, doc_id: int, requests: Sequence[tuple[str, str]]) -> dict:
    """lm-eval ``--log_samples`` fields of one multiple-choice item (an ``MCQItem``) whose
    ``requests`` are its (context, continuation) pairs, one per option.

    ``doc`` holds the item as we read it (id, question, choices, gold, context and
    subject where it has them), so ``doc_hash`` is ours, not the hub row's; ``arguments``
    holds every request as lm-eval's samples file writes them (``{"gen_args_0": {"arg_0":
    context, "arg_1": continuation}, ...}``: a task with one context per choice, such as
    winogrande, shows each context); ``prompt`` is the first request's context and
    ``prompt_hash`` its hash (lm-eval hashes ``arguments[0][0]``), ``continuations`` what
    follows the context per option; ``target`` is the gold index as a string, as lm-eval's
    samples file writes it.
    """
    doc: dict[str, Any] = {"id": item.id, "question": item.question, "choices": list(item.options), "gold": int(item.gold)}
    if item.context:
        doc["context"] = item.context
    if item.subject:
        doc["subject"] = item.subject
    target = str(int(item.gold))
    prompt = requests[0][0]
    return {"doc_id": int(doc_id), "doc": doc, "target": target,
            "arguments": log_arguments(requests),
            "prompt": prompt, "doc_hash": doc_hash(doc), "prompt_hash": hash_string(prompt),
            "target_hash": hash_string(target), "continuations": [x for _, x in requests]}


def item_accuracy(gold: int, predictions: Mapping[str, int | None]) -> dict[str, float]:
    """Per-item ``{"acc,<method>": 1.0 or 0.0}`` (lm-eval's per-sample ``acc``) for each
    method's prediction; a None prediction is left out."""
    return {f"acc,{m}" if "," not in m else m: float(int(p) == int(gold)) for m, p in predictions.items() if p is not None}


def _estimates(headline: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    """``metric,filter`` values that carry a standard error, each followed by it."""
    out: dict[str, Any] = {}
    for key, value in headline.items():
        if "," not in key or is_derived(key) or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        se_key = derived_key(key, "stderr")
        se = headline.get(se_key, results.get(se_key))
        if isinstance(se, (int, float)) and not isinstance(se, bool):
            out[key], out[se_key] = float(value), float(se)
    return out


def _metric_counts(headline: Mapping[str, Any], results: Mapping[str, Any], metrics: Mapping[str, Any]) -> dict[str, int]:
    """``{metric,filter: n}`` from the ``metric_n,filter`` keys beside each estimate."""
    out = {}
    for key in metrics:
        if is_derived(key):
            continue
        n = headline.get(derived_key(key, "n"), results.get(derived_key(key, "n")))
        if isinstance(n, int) and not isinstance(n, bool):
            out[key] = n
    return out


def _count(results: Mapping[str, Any], key: str, task: str) -> int | None:
    value = results.get(key)
    if isinstance(value, Mapping):
        value = value.get(task, next(iter(value.values())) if len(value) == 1 else None)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _timestamp(created: Any) -> float | None:
    if isinstance(created, datetime):
        return created.timestamp()
    if isinstance(created, str):
        try:
            return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def lm_eval_fields(results: Mapping[str, Any], config: Mapping[str, Any], task: str) -> dict[str, Any]:
    """lm-eval's results-file blocks for one run of task ``task`` (a pure function).

    ``results`` is our results.json (its ``headline`` holds ``metric,filter`` estimates;
    ``n_total`` / ``n_evaluated`` if present, else ``n_items``, give ``n-samples``),
    ``config`` our config.yaml (model, dtype, batch_size, seed, shots, limit, task,
    versions, created). ``n-samples`` needs the task's total: ``n_total``, or
    ``n_items`` when no ``limit`` cut the task; otherwise it is left out. Merge the result into results.json: no key of ours is replaced.
    """
    head = results.get("headline")
    metrics = _estimates(head if isinstance(head, Mapping) else {}, results)
    effective = _count(results, "n_evaluated", task)
    if effective is None:
        effective = _count(results, "n_items", task)
    original = _count(results, "n_total", task)
    if original is None and config.get("limit") is None:
        original = effective  # nothing cut off: every item of the task was evaluated
    entry: dict[str, Any] = {"alias": task, "name": task}
    if effective is not None:
        entry["sample_len"] = effective
    entry.update(metrics)
    counts = _metric_counts(head if isinstance(head, Mapping) else {}, results, metrics)
    if counts:  # lm-eval's per-metric counts (its groups write them): ours differ by method (test split)
        entry["sample_count"] = counts
    names = sorted({split_key(k)[0] for k in metrics if not is_derived(k)})
    shots = config.get("shots")
    task_config: dict[str, Any] = {"task": task, "output_type": "multiple_choice"}
    recorded = config.get("task_spec")
    if isinstance(recorded, Mapping) and recorded.get("path"):
        task_config["dataset_path"] = recorded["path"]
    if isinstance(shots, int):
        task_config["num_fewshot"] = shots
    task_config["metric_list"] = [{"metric": m, "aggregation": "mean", **(
        {"higher_is_better": HIGHER_IS_BETTER[m]} if m in HIGHER_IS_BETTER else {})} for m in names]
    task_config["metadata"] = {k: config[k] for k in ("suite", "task", "prompt", "methods") if k in config}
    out: dict[str, Any] = {
        "results": {task: entry},
        "group_subtasks": {},
        "configs": {task: task_config},
        "versions": {task: None},  # our tasks carry no lm-eval task version
        "higher_is_better": {task: {m: HIGHER_IS_BETTER[m] for m in names if m in HIGHER_IS_BETTER}},
    }
    if isinstance(shots, int):
        out["n-shot"] = {task: shots}
    if effective is not None and original is not None:  # a --limit run without n_total: the total is unknown
        out["n-samples"] = {task: {"original": original, "effective": effective}}
    run: dict[str, Any] = {}
    if config.get("model") is not None:
        run["model"] = str(config["model"])
        run["model_args"] = {"pretrained": str(config["model"]), **({"dtype": config["dtype"]} if config.get("dtype") else {})}
    if config.get("dtype"):
        run["model_dtype"] = f"torch.{config['dtype']}"
    for ours, theirs in (("batch_size", "batch_size"), ("device", "device")):
        if config.get(ours) is not None:
            run[theirs] = config[ours]
    if "limit" in config:
        run["limit"] = config["limit"]
    if isinstance(config.get("seed"), int):  # one seed drives every draw of a run (split, demos, ties)
        run.update(random_seed=config["seed"], numpy_seed=config["seed"], fewshot_seed=config["seed"])
    out["config"] = run
    if config.get("whitebox_eval_git_commit"):
        out["git_hash"] = str(config["whitebox_eval_git_commit"])
    date = _timestamp(config.get("created"))
    if date is not None:
        out["date"] = date
    if config.get("transformers_version"):
        out["transformers_version"] = str(config["transformers_version"])
    if config.get("model") is not None:
        out["model_name"] = str(config["model"])
    return out


def add_lm_eval_fields(results: dict[str, Any], config: Mapping[str, Any], task: str) -> dict[str, Any]:
    """Merge :func:`lm_eval_fields` into ``results`` (in place, never replacing a key of ours); returns it."""
    for key, value in lm_eval_fields(results, config, task).items():
        results.setdefault(key, value)
    return results
