"""``--task lm-eval:NAME`` for a suite that generates: lm-eval's ``generate_until`` tasks through
its own task objects (the optional extra ``whitebox-eval[lm-eval]``).

Nothing of a task is re-written. lm-eval's ``TaskManager`` builds the task (or every task of
a group or tag) from its installed YAML, :func:`~.lm_eval_tasks.build_requests` does what
``lm_eval.simple_evaluate`` does before it calls a model (shots, the few-shot seed 1234,
``build_all_requests``), and each document becomes a :class:`~.generation.GenItem` whose
``prompt`` is lm-eval's context (description, demonstrations drawn by lm-eval's sampler, the
document's ``doc_to_text``), ``stops`` its ``until`` strings and ``max_new_tokens`` its
``max_gen_toks`` (lm-eval's default 256). The response is generated greedily by the engine's
one decoder and turned into lm-eval's text as its HF backend does (decoded without special
tokens, cut at the first ``until`` string: :func:`lm_eval_text`); then the task's own filter
pipelines (regex extraction, take-first, ...) and metrics (``exact_match`` with its options), or
its own ``process_results`` (hendrycks_math, minerva_math), score it (:class:`LmEvalScorer`),
exactly as lm-eval's evaluator does per document. An item is correct when the task's first
metric under its first filter is 1 (gsm8k: ``exact_match`` of ``strict-match``); every
filter's metrics are kept.

Tasks whose metric executes model output (``unsafe_code: true`` in their YAML: HumanEval,
MBPP) are refused unless the caller allows code execution; then each document's metric runs in
a forked subprocess killed after a timeout. A task whose generation samples (``do_sample``) is
generated greedily here and says so; ``repeats`` above 1 is refused. A multiple-choice task
is asked with its options lettered (:func:`~.generation.letter_items`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import registry
from whitebox_eval.tasks.generation import GenItem, GenTask, letter_items
from whitebox_eval.tasks.spec import TaskSpec

DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's HFLM.max_gen_toks
CODE_TIMEOUT_S = 60.0  # per document, when code execution is allowed


def lm_eval_text(decoded: str, until: list[str] | tuple[str, ...]) -> str:
    """The text lm-eval's HF backend keeps of a generation: the continuation decoded without
    special tokens, cut at the first occurrence of each ``until`` string in turn
    (``postprocess_generated_text``)."""
    for term in until:
        if term:
            decoded = decoded.split(term)[0]
    return decoded


@dataclass
class LmEvalScorer:
    """Scores a response to an lm-eval document with the task's own filters and metrics."""

    tasks: dict[str, Any] = field(default_factory=dict)  # task name -> lm-eval task object
    instances: dict[str, Any] = field(default_factory=dict)  # item id -> its lm-eval Instance
    unsafe: bool = False  # metrics execute model output: run them in a subprocess
    timeout_s: float = CODE_TIMEOUT_S

    def filtered(self, item_id: str, text: str) -> dict[str, Any]:
        """``{filter name: filtered response}`` of lm-eval's pipelines on ``text``."""
        inst = self.instances[item_id]
        task = self.tasks[inst.task_name]
        inst.resps, inst.filtered_resps = [text], {}
        for f in task._filters:
            f.apply([inst])
        return dict(inst.filtered_resps)

    def __call__(self, item: GenItem, text: str) -> dict[str, Any]:
        """``{"correct": bool, "filters": {filter: {"filtered": .., metric: value}}}``."""
        inst = self.instances[item.id]
        task = self.tasks[inst.task_name]
        out: dict[str, Any] = {}
        for key, resp in self.filtered(item.id, text).items():
            call = (lambda d=inst.doc, r=resp: task.process_results(d, [r]))
            metrics = _isolated(call, self.timeout_s) if self.unsafe else call()
            out[key] = {"filtered": _plain(resp), **{m: _plain(v) for m, v in metrics.items()}}
        first = next(iter(out.values()), {})
        metric = next((m for m in first if m != "filtered"), None)
        correct = metric is not None and _is_one(first[metric])
        return {"correct": correct, "filters": out, "primary": f"{metric},{next(iter(out), '')}"}


def _is_one(value: Any) -> bool:
    try:
        return float(value) == 1.0
    except (TypeError, ValueError):
        return False


def _plain(value: Any) -> Any:
    """A JSON-ready copy (numpy scalars, tuples)."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _isolated(fn, timeout_s: float):
    """``fn()`` in a forked subprocess, killed after ``timeout_s`` (then: a failed metric)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child():
        try:
            send.send(("ok", fn()))
        except BaseException as e:  # the child reports any failure of the executed code
            send.send(("error", f"{type(e).__name__}: {e}"))

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    ready = receive.poll(timeout_s)
    result = receive.recv() if ready else ("timeout", f"no result within {timeout_s:g} s")
    proc.kill() if proc.is_alive() else None
    proc.join()
    if result[0] != "ok":
        raise WhiteboxError(f"the task's metric failed in its subprocess ({result[1]})")
    return result[1]


def check_code_execution(name: str, allow: bool) -> bool:
    """Whether the tasks under ``name`` execute model output; refused in one line unless ``allow``."""
    from whitebox_eval.tasks.lm_eval_tasks import _task_manager, _leaves

    tm = _task_manager()
    unsafe = [leaf for leaf in _leaves(tm, name) if (tm.task_index[leaf].cfg or {}).get("unsafe_code")]
    if unsafe and not allow:
        raise WhiteboxError(f"lm-eval's {', '.join(unsafe)} scores by executing the model's code; run it only with "
                            "--allow-code-execution (each document's test runs in a subprocess with a timeout)")
    if unsafe:
        os.environ["HF_ALLOW_CODE_EVAL"] = "1"  # HF evaluate's code_eval refuses to run without it
    return bool(unsafe)


def gen_items(spec: TaskSpec, *, limit: int | None = None, shots: int | None = None,
              lm_eval_data: str | Path | None = None, allow_code_execution: bool = False,
              **_: Any) -> GenTask:
    """Every document of lm-eval's task (the first ``limit``), scored by its generate_until
    tasks' own filters and metrics (:class:`LmEvalScorer`; a multiple-choice task: by the letter)."""
    from whitebox_eval.tasks.lm_eval_tasks import build_requests, build_tasks, load_items, output_types

    name = spec.lm_eval_task
    kinds = set(output_types(name).values())
    if kinds <= {"multiple_choice"}:  # asked with lettered options, answered by a letter
        mc, infos = load_items(name, shots=shots, data=lm_eval_data)
        mc = mc if limit is None else mc[:limit]
        return GenTask(spec, letter_items(mc, registry.letters()),
                       {"lm_eval_tasks": [t.to_config() for t in infos], "lm_eval_view": "letters (multiple-choice task)"})
    if kinds != {"generate_until"}:
        raise WhiteboxError(f"lm-eval's {name} mixes output types ({', '.join(sorted(map(str, kinds)))}); run its "
                            "generate_until tasks one by one")
    scorer = LmEvalScorer(unsafe=check_code_execution(name, allow_code_execution))
    items: list[GenItem] = []
    infos: list[dict] = []
    for task, files in build_tasks(name, lm_eval_data, allowed=("generate_until",)):
        tname = task.task_name
        if int(task.config.repeats or 1) != 1:
            raise WhiteboxError(f"lm-eval's {tname} draws {task.config.repeats} generations per document; only tasks "
                                "with one generation per document are run here")
        k, _, by_doc = build_requests(task, shots)
        scorer.tasks[tname] = task
        kwargs: dict[str, Any] = {}
        for doc_id in sorted(by_doc):
            inst = by_doc[doc_id][0]
            context, kwargs = inst.arguments[0], dict(inst.arguments[1] or {})
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            target = task.doc_to_target(inst.doc)
            item = GenItem(id=f"{tname}/{doc_id}", question=str(task.doc_to_text(inst.doc)), check="lm-eval",
                           gold=str(target), references=[str(target)],
                           gold_response=str(task.config.target_delimiter) + str(target), group=tname,
                           prompt=str(context), stops=tuple(until),
                           max_new_tokens=int(kwargs.get("max_gen_toks") or DEFAULT_MAX_GEN_TOKS),
                           meta={"lm_eval_task": tname, "doc_id": int(doc_id),
                                 "sampled_in_lm_eval": bool(kwargs.get("do_sample")),
                                 # the request as lm-eval's --log_samples writes it (samples.jsonl "arguments")
                                 "lm_eval_arguments": {"gen_args_0": {"arg_0": str(context), "arg_1": kwargs}}})
            scorer.instances[item.id] = inst
            items.append(item)
        infos.append({"name": tname, "version": (task.config.metadata or {}).get("version"), "num_fewshot": k,
                      "n_docs": len(by_doc), "until": list(item.stops) if by_doc else [],
                      "max_gen_toks": int(kwargs.get("max_gen_toks") or DEFAULT_MAX_GEN_TOKS),
                      "lm_eval_do_sample": bool(kwargs.get("do_sample")),
                      "filters": [f.name for f in task._filters], "metrics": list(task._metric_fn_list),
                      "process_results": "the task's own" if callable(task.config.process_results) else "lm-eval's",
                      "data_files": files})
    if not items:
        raise WhiteboxError(f"lm-eval's {name} gave no documents")
    items = items if limit is None else items[:limit]
    return GenTask(spec, items, {"lm_eval_tasks": infos,
                                 "lm_eval_generation": "lm-eval's context, until and max_gen_toks; greedy decoding by "
                                                       "the engine; lm-eval's filters and metrics on the text its HF "
                                                       "backend keeps (decoded without special tokens, cut at until)"},
                   scorer)
