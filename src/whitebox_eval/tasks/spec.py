"""The one reading of ``--task``: :class:`TaskSpec`, and :func:`load_mcq`, its MCQ items.

A task is a synthetic generator, optionally restricted to categories
(``ssd``, ``arithmetic[:add1,mul2]``, ``arithmetic-gen[:add1]``), or a dataset read from a
file, a folder or the hub (``mmlu=PATH``, ``arc=hf:allenai/ai2_arc:ARC-Challenge@test``,
``gsm8k=PATH``). The command parses the text once (an lm-eval task name gets the one-line
fix, :func:`whitebox_eval.tasks.lm_eval_name_hint`), config.yaml records the parsed form
(``task_spec``), and every suite reads its items through the spec.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from whitebox_eval.errors import WhiteboxError

GENERATORS = ("ssd", "arithmetic", "arithmetic-gen")
"""Synthetic tasks: ssd (paper 000 sec. 5.1), arithmetic MCQ (004 sec. 2.3), arithmetic-gen
(the arithmetic questions answered in free text, paper 001)."""

FILE_DATASETS = ("mmlu", "hellaswag", "cosmosqa", "halueval", "arc", "triviaqa", "gsm8k", "mcq")
"""Datasets read from a file, a folder or ``hf:...`` (``NAME=PATH``)."""

MCQ_TASKS = ("ssd", "arithmetic", "mmlu", "hellaswag", "cosmosqa", "halueval", "arc", "triviaqa", "mcq", "lm-eval")
"""The multiple-choice tasks (:func:`load_mcq`)."""
MCQ_USAGE = ("ssd, arithmetic[:add1,mul2], or NAME=PATH with NAME one of "
             "arc, cosmosqa, halueval, hellaswag, mmlu, triviaqa, or mcq (your own file), "
             "or lm-eval:TASK (any multiple-choice task of lm-eval, with lm-eval installed)")
LM_EVAL = "lm-eval"
"""``lm-eval:TASK``: a task, group or tag of lm-evaluation-harness (:mod:`whitebox_eval.tasks.lm_eval_tasks`)."""


@dataclass(frozen=True)
class TaskSpec:
    """A parsed ``--task``: ``name``, the ``path`` of a dataset, the generator's ``categories``,
    and ``fields``, the ``--field NAME=COLUMN`` pairs of ``mcq=PATH`` (:mod:`whitebox_eval.tasks.mcq`)."""

    name: str
    path: str | None = None
    categories: tuple[str, ...] = ()
    fields: tuple[tuple[str, str], ...] = ()
    lm_eval_task: str | None = None  # lm-eval:TASK

    @classmethod
    def parse(cls, text: str, accepted: Iterable[str] | None = None, usage: str | None = None,
              fields: Iterable[str] = ()) -> TaskSpec:
        """Read ``text``; ``accepted`` limits the names (a suite's tasks), ``usage`` is the
        suite's own list of task forms for the error line; ``fields``: ``--field`` values."""
        from whitebox_eval.tasks import lm_eval_name_hint

        raw = str(text).strip()
        accepted = tuple(accepted) if accepted is not None else GENERATORS + FILE_DATASETS
        usage = usage or " | ".join(f"{n}[:CATEGORY,...]" if n.startswith("arithmetic") else
                                    n if n in GENERATORS else f"{n}=PATH" for n in accepted)
        name, eq, path = raw.partition("=")
        name = name.strip().lower()
        spec: TaskSpec | None = None
        if raw.lower().startswith(LM_EVAL + ":"):
            task = raw[len(LM_EVAL) + 1:].strip()
            if not task or "=" in task or "," in task:
                raise WhiteboxError(f"--task {raw!r}: write lm-eval:TASK with one lm-eval task, group or tag name "
                                    "(e.g. lm-eval:arc_easy); local data goes in --lm-eval-data DIR")
            spec = cls(LM_EVAL, lm_eval_task=task)
        elif eq and name in FILE_DATASETS and path.strip():
            spec = cls(name, path=path.strip())
        elif not eq:
            base, colon, cats = name.partition(":")
            if base in GENERATORS and (not colon or base != "ssd"):
                categories = tuple(c.strip() for c in cats.split(",") if c.strip()) if colon else ()
                if colon and not categories:
                    raise WhiteboxError(f"--task {raw!r} names no category after ':'; e.g. {base}:add1,mul2")
                spec = cls(base, categories=_checked_categories(categories))
        if spec is None or spec.name not in accepted:
            hint = lm_eval_name_hint(raw)
            if hint:
                raise WhiteboxError(hint)
            if spec is not None:
                raise WhiteboxError(f"task {spec.name!r} is not one this study runs; use {usage}")
            raise WhiteboxError(f"unknown task {raw!r}: use {usage}")
        fields = tuple(fields)
        if fields:
            if spec.name != "mcq":
                raise WhiteboxError(f"--field maps the columns of your own file (--task mcq=PATH), not of {spec.name}")
            from whitebox_eval.tasks.mcq import parse_fields

            spec = cls(spec.name, path=spec.path, fields=parse_fields(fields))
        return spec

    @property
    def is_file(self) -> bool:
        return self.path is not None

    def __str__(self) -> str:
        if self.lm_eval_task is not None:
            return f"{LM_EVAL}:{self.lm_eval_task}"
        if self.path is not None:
            return f"{self.name}={self.path}"
        return self.name + (":" + ",".join(self.categories) if self.categories else "")

    def to_config(self) -> dict[str, Any]:
        """What config.yaml records as ``task_spec``."""
        out = {"name": self.name, "path": self.path, "categories": list(self.categories)}
        if self.fields:  # --field NAME=COLUMN (recorded only when given)
            out["fields"] = {name: column for name, column in self.fields}
        if self.lm_eval_task is not None:
            out["lm_eval_task"] = self.lm_eval_task
        return out


def _checked_categories(categories: tuple[str, ...]) -> tuple[str, ...]:
    if not categories:
        return ()
    from whitebox_eval.tasks.arithmetic import ARITHMETIC_CATEGORIES

    bad = [c for c in categories if c not in ARITHMETIC_CATEGORIES]
    if bad:
        raise WhiteboxError(f"unknown arithmetic categor{'y' if len(bad) == 1 else 'ies'} {', '.join(bad)}; "
                            f"choose from {', '.join(ARITHMETIC_CATEGORIES)}")
    return categories


def load_mcq(spec: TaskSpec, n: int, *, seed: int = 0, n_options: int = 4, language: str = "en",
             on_bad_row: str = "skip") -> list:
    """The task's MCQ items: a generator's first ``n`` (a stable prefix: the first ``n`` of a
    larger ``n`` are the same items), or every item of a dataset's file (``n`` unused: the
    study sets demonstrations apart before it applies ``--limit``)."""
    if spec.name == "ssd":
        from whitebox_eval.tasks.ssd import make_ssd

        return make_ssd(n, n_options, language=language, seed=seed)
    if spec.name in ("arithmetic", "arithmetic-gen"):
        from whitebox_eval.tasks.arithmetic import ARITHMETIC_CATEGORIES, make_arithmetic_suite

        cats = spec.categories or ARITHMETIC_CATEGORIES
        per = max(1, -(-n // len(cats)))
        return make_arithmetic_suite(per, seed=seed, categories=tuple(cats), n_options=n_options)[:n]
    if spec.name in ("mmlu", "hellaswag", "cosmosqa", "halueval", "arc", "triviaqa"):
        from pathlib import Path

        from whitebox_eval.tasks import load_mcq_dataset

        path = spec.path if spec.path.startswith("hf:") else Path(spec.path).expanduser()
        return list(load_mcq_dataset(spec.name, path, on_bad_row=on_bad_row, seed=seed))
    if spec.name == "mcq":
        from whitebox_eval.tasks.mcq import load_mcq_file

        return list(load_mcq_file(spec.path, fields=spec.fields, on_bad_row=on_bad_row))
    raise WhiteboxError(f"task {spec.name!r} has no multiple-choice items")
