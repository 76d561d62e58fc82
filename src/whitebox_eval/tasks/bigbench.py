"""BIG-Bench tasks in their published ``task.json`` (``examples``: an ``input`` with
``target_scores`` (multiple choice) or ``target`` (exact string match)), asked as BIG-Bench Hard
asks them.

Paper 001 uses BBH as one of its general benchmarks, with "3-shot examples from the original
benchmark" for every model (sec. 3.1, App. A.6), and scores accuracy. BBH re-selects items of
BIG-Bench tasks, writes the options into the question and checks the answer by exact match; the
files here are BIG-Bench's own, so each item is laid out the BBH way from its task's JSON:

- the task's ``task_prefix`` (else its ``description``), then three demonstrations (the file's
  first three examples, never evaluated) and the question, each ``Q: <input>`` and, for a
  multiple-choice task, ``Options:`` with one ``(A) <choice>`` line per choice, then ``A:``;
- multiple choice (``multiple_choice_grade``): the choices in an order shuffled per item (seeded:
  BIG-Bench files often list the correct choice first, which BBH's own layout does not), answered
  with the letter, correct when the letter read from the response (:mod:`.answer_checks` ``choice``) is
  the choice whose target score is highest;
- exact string match (``exact_str_match``): the answer is the response's first line, correct when
  it equals one of the targets after the TriviaQA normalisation (``exact``); a demonstration answers
  with the first target that is a numeral (BBH's object counting answers "6"), else the first target.

The answers are short, so a response ends at its line break. The demonstrations are answer-only
(BBH also publishes chain-of-thought prompts; those are not in BIG-Bench's files).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from whitebox_eval.datafiles import open_text
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.generation import LETTERS, GenItem
from whitebox_eval.tasks.spec import TaskSpec

SHOTS = 3
"""001 App. A.6: "For BBH, 3-shot examples from the original benchmark are used"."""
STOPS = ("\n", "\n\n", "\nQ:")


def task_files(path: str | Path) -> list[Path]:
    """A ``task.json`` file, or every ``*.json`` file in a folder (sorted by name)."""
    path = Path(path).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".json")
        if not files:
            raise WhiteboxError(f"{path} holds no BIG-Bench task.json file")
        return files
    if not path.is_file():
        raise WhiteboxError(f"{path} does not exist; give a BIG-Bench task.json file or a folder of them")
    return [path]


def task_name(path: Path, doc: dict) -> str:
    """The task's name: the file's stem without ``.task`` (``date_understanding.task.json``), the
    folder's name for ``<task>/task.json``."""
    stem = path.name[: -len(".json")]
    if stem == "task":
        return path.parent.name
    return stem[: -len(".task")] if stem.endswith(".task") else stem


def read_task(path: Path) -> tuple[str, dict, list[dict]]:
    """(name, the task's JSON, its examples); one line for a file that is not a BIG-Bench task."""
    with open_text(path) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise WhiteboxError(f"{path}: invalid JSON ({e.msg} at line {e.lineno})") from None
    examples = doc.get("examples") if isinstance(doc, dict) else None
    if not isinstance(examples, list) or not examples:
        raise WhiteboxError(f"{path}: a BIG-Bench task.json needs a non-empty 'examples' list")
    for n, ex in enumerate(examples):
        ok = isinstance(ex, dict) and isinstance(ex.get("input"), str) and (
            (isinstance(ex.get("target_scores"), dict) and len(ex["target_scores"]) >= 2)
            or isinstance(ex.get("target"), (str, list)))
        if not ok:
            raise WhiteboxError(f"{path}: example {n} needs an 'input' and 'target_scores' (2+ choices) or 'target'")
    if len(examples) <= SHOTS:
        raise WhiteboxError(f"{path}: {len(examples)} examples; {SHOTS} are demonstrations and at least one is asked")
    return task_name(path, doc), doc, examples


def _choices(ex: dict, rng: random.Random) -> tuple[list[str], int]:
    """The choices in a shuffled order and the index of the best-scored one."""
    choices = list(ex["target_scores"])
    rng.shuffle(choices)
    scores = [float(ex["target_scores"][c]) for c in choices]
    return choices, scores.index(max(scores))


def _targets(ex: dict) -> list[str]:
    t = ex["target"]
    return [t] if isinstance(t, str) else [str(x) for x in t]


def _answer(targets: list[str]) -> str:
    return next((t for t in targets if t.strip().isdigit()), targets[0])


def _block(ex: dict, choices: list[str] | None) -> str:
    lines = [f"Q: {ex['input'].strip()}"]
    if choices is not None:
        lines.append("Options:")
        lines += [f"({LETTERS[i]}) {c}" for i, c in enumerate(choices)]
    return "\n".join(lines) + "\nA:"


def task_items(path: Path, seed: int = 0) -> list[GenItem]:
    """Every example of one task file but the demonstrations, as GenItems with their whole prompt."""
    name, doc, examples = read_task(path)
    mc = "target_scores" in examples[0]
    prefix = str(doc.get("task_prefix") or doc.get("description") or "").strip()
    demos = []
    for i, ex in enumerate(examples[:SHOTS]):
        if mc:
            choices, gold = _choices(ex, random.Random(f"{seed}:{name}:{i}"))
            demos.append(f"{_block(ex, choices)} ({LETTERS[gold]})")
        else:
            demos.append(f"{_block(ex, None)} {_answer(_targets(ex))}")
    head = (prefix + "\n\n" if prefix else "") + "\n\n".join(demos) + "\n\n"
    items = []
    for i, ex in enumerate(examples[SHOTS:], start=SHOTS):
        if "target_scores" in ex:
            choices, gold = _choices(ex, random.Random(f"{seed}:{name}:{i}"))
            labels = list(LETTERS[: len(choices)])
            items.append(GenItem(id=f"{name}/{i}", question=_block(ex, choices), check="choice", gold=labels[gold],
                                 gold_response=f" ({labels[gold]})", references=[labels[gold]], labels=labels,
                                 options=choices, group=name, prompt=head + _block(ex, choices), stops=STOPS,
                                 meta={"bigbench_metric": "multiple_choice_grade"}))
        else:
            targets = _targets(ex)
            items.append(GenItem(id=f"{name}/{i}", question=_block(ex, None), check="exact", gold=targets[0],
                                 gold_response=f" {_answer(targets)}", references=targets, group=name,
                                 prompt=head + _block(ex, None), stops=STOPS, meta={"bigbench_metric": "exact_str_match"}))
    return items


def gen_items(spec: TaskSpec, *, limit: int | None = None, seed: int = 0, **_: Any) -> list[GenItem]:
    """``bigbench=PATH``: a task.json's items (a folder: every task's, dealt round-robin over the
    tasks so a small ``limit`` still mixes them), the first ``limit``."""
    per_task = [task_items(p, seed) for p in task_files(spec.path)]
    dealt = [t[i] for i in range(max(map(len, per_task))) for t in per_task if i < len(t)]
    return dealt if limit is None else dealt[:limit]
