"""Free-generation items: the :class:`GenItem` record and every task's generation items.

A suite that generates (``mui``, paper 001; masking) asks each item, reads the response and
scores it by the task's answer check (:mod:`.answer_checks`) or the task's own scoring (lm-eval).
:func:`load_generation` gives the :class:`GenTask` (items and scoring) of any task whose record
has a :class:`~whitebox_eval.tasks.registry.Generation`:

* ``arithmetic-gen[:cats]``: paper 004's arithmetic questions answered in free text;
* ``gsm8k=PATH``: GSM8K (``question``, ``answer`` ending in ``#### N``), the final number;
* ``triviaqa=PATH``: the question, its answer and aliases, exact match after normalisation;
* ``gen=PATH``: your own file (:mod:`.gen_file`), the check chosen with ``--answer``;
* ``lm-eval:TASK``: lm-eval's own prompts, stop strings, filters and metrics
  (:mod:`.lm_eval_generation`);
* every multiple-choice dataset (``ssd``, ``mmlu=PATH``, ``arc=PATH``, ``mcq=PATH``, ...): the
  question with its options lettered, answered by a letter (``choice``). A file's items are
  dealt round-robin over its subjects, so a small ``limit`` still mixes domains (sec. 3.6).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import registry
from whitebox_eval.tasks.answer_checks import is_correct
from whitebox_eval.tasks.loading import load_mcq
from whitebox_eval.tasks.spec import TaskSpec

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DEFAULT_ITEMS = 200  # items of a generated task when no limit is given


@dataclass
class GenItem:
    """One prompt of a free-generation task with what is needed to check a response.

    ``question``: the task text shown to the model without the answer cue (the suite adds its
    own prompt format), unless ``prompt`` holds the whole prompt the task fixes (lm-eval's
    context, demonstrations included); ``check``: the answer check (:mod:`.answer_checks`);
    ``gold``: the gold answer as text (a number, a label); ``references``: the accepted
    answers of text checks (gold first); ``gold_response``: the response used when
    responses come from the data; ``labels`` / ``options``: lettered options; ``group``: a
    domain / category for subset MUIs (001 sec. 3.6); ``stops`` / ``max_new_tokens``: the
    task's own stop strings and budget, where it fixes them (lm-eval's ``until`` and
    ``max_gen_toks``); ``meta``: anything else the source carried.
    """

    id: str
    question: str
    check: str
    gold: str
    gold_response: str
    references: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    group: str | None = None
    prompt: str | None = None
    stops: tuple[str, ...] | None = None
    max_new_tokens: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class GenTask:
    """A generation task ready to run: its items, how a response is scored, and what
    config.yaml records of it (``notes``). ``scorer``: the task's own scoring (lm-eval's
    filters and metrics); None: its record's answer check (:func:`~.answer_checks.is_correct`)."""

    spec: TaskSpec
    items: list[GenItem]
    notes: dict[str, Any] = field(default_factory=dict)
    scorer: Callable[[GenItem, str], dict[str, Any]] | None = None

    def score(self, item: GenItem, response: str) -> dict[str, Any]:
        """``{"correct": bool, ...}`` (the task's own scorer may add what it measured)."""
        if self.scorer is not None:
            return self.scorer(item, response)
        return {"correct": bool(is_correct(item, response))}


def load_generation(spec: TaskSpec, *, limit: int | None = None, seed: int = 0, n_options: int = 4,
                    on_bad_row: str = "skip", **options: Any) -> GenTask:
    """The first ``limit`` generation items of a task (deterministic for a seed); ``options``
    go to the task's own loader (lm-eval: ``shots``, ``lm_eval_data``, ``allow_code_execution``)."""
    rec = spec.record
    if rec.generation is None:
        raise WhiteboxError(f"task {spec.name} has no free-generation form; use one of "
                            f"{registry.usage(registry.names(generation=True))}")
    if limit is not None and limit < 1:
        raise WhiteboxError(f"limit must be >= 1, got {limit}")
    if rec.generation_loader is not None:
        load = registry.resolve(rec.generation_loader)
        out = load(spec, limit=limit, seed=seed, n_options=n_options, on_bad_row=on_bad_row, **options)
        return out if isinstance(out, GenTask) else GenTask(spec, out)
    n = DEFAULT_ITEMS if limit is None else limit
    if rec.is_generator:
        items = load_mcq(spec, n, seed=seed, n_options=n_options)
    else:
        items = _mixed(load_mcq(spec, 0, seed=seed, n_options=n_options, on_bad_row=on_bad_row), limit)
    return GenTask(spec, letter_items(items, rec.generation))


def _mixed(items: Sequence, limit: int | None) -> list:
    """The first ``limit`` items dealt round-robin over their subjects (every item without a limit)."""
    if limit is None:
        return list(items)
    subjects: dict[str, list] = {}
    for it in items:
        subjects.setdefault(it.subject or "", []).append(it)
    rows = list(subjects.values())
    return [r[i] for i in range(max(map(len, rows), default=0)) for r in rows if i < len(r)][:limit]


def letter_question(question: str, options: Sequence[str], labels: Sequence[str], context: str | None = None) -> str:
    """``[context\\n]Question: ...`` and one ``A. option`` line per option (whitespace collapsed)."""
    lines = [" ".join(context.split())] if context else []
    lines.append(f"Question: {' '.join(question.split())}")
    lines += [f"{lab}. {' '.join(opt.split())}" for lab, opt in zip(labels, options)]
    return "\n".join(lines)


def letter_items(items: Sequence, style: registry.Generation) -> list[GenItem]:
    """Multiple-choice items asked with their options lettered and answered by a letter."""
    out = []
    for it in items:
        if len(it.options) > len(LETTERS):
            raise WhiteboxError(f"item {it.id!r} has {len(it.options)} options; letters go up to Z (26)")
        labels = list(LETTERS[: len(it.options)])
        out.append(GenItem(id=it.id, question=letter_question(it.question, it.options, labels, it.context),
                           check="choice", gold=labels[it.gold], references=[labels[it.gold]],
                           gold_response=style.gold.format(label=labels[it.gold], option=it.options[it.gold]),
                           labels=labels, options=list(it.options), group=it.subject))
    return out


def arithmetic_gen_items(spec: TaskSpec, *, limit: int | None = None, seed: int = 0, n_options: int = 4,
                         **_: Any) -> list[GenItem]:
    """``arithmetic-gen[:cats]``: the arithmetic questions (categories dealt in turn, a stable
    prefix), answered with the number."""
    n = DEFAULT_ITEMS if limit is None else limit
    return [GenItem(id=it.id, question=f"Question: {it.question}", check="number", gold=str(it.meta["answer"]),
                    references=[str(it.meta["answer"])], gold_response=f" {it.meta['answer']}", group=it.subject,
                    meta={"expression": it.meta["expression"]})
            for it in load_mcq(spec, n, seed=seed, n_options=n_options)]


def gsm8k_items(spec: TaskSpec, *, limit: int | None = None, **_: Any) -> list[GenItem]:
    """``gsm8k=PATH``: the question, the final number of its worked solution (``#### N``)."""
    from whitebox_eval.tasks.gsm8k import load_gsm8k
    from whitebox_eval.tasks.hub import local_file

    return [GenItem(id=r.id, question=f"Question: {' '.join(r.question.split())}", check="final_number", gold=r.gold,
                    references=[r.gold],
                    gold_response=" " + " ".join(r.solution.split()) + f" The answer is {r.gold}.", group="gsm8k")
            for r in load_gsm8k(local_file("gsm8k", spec.source), limit)]


def triviaqa_items(spec: TaskSpec, *, limit: int | None = None, seed: int = 0, on_bad_row: str = "skip",
                   **_: Any) -> list[GenItem]:
    """``triviaqa=PATH``: the question, its answer and aliases (exact match after normalisation)."""
    items = load_mcq(spec, 0, seed=seed, on_bad_row=on_bad_row)
    items = items if limit is None else items[:limit]
    return [GenItem(id=it.id, question=f"Question: {it.question}", check="exact", gold=it.gold_text,
                    references=it.accepted_answers(), gold_response=f" {it.gold_text}", group=it.subject)
            for it in items]
