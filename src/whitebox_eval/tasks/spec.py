"""The one reading of ``--task``: :class:`TaskSpec` (its MCQ items: :func:`whitebox_eval.tasks.loading.load_mcq`).

A task is a synthetic generator, optionally restricted to categories
(``ssd``, ``arithmetic[:add1,mul2]``, ``arithmetic-gen[:add1]``), a dataset read from a
file, a folder or the hub (``mmlu=PATH``, ``arc=hf:allenai/ai2_arc:ARC-Challenge@test``,
``gsm8k=PATH``, your own ``mcq=PATH`` or ``gen=PATH``), or ``lm-eval:TASK``. The command
parses the text once (an lm-eval task name gets the one-line fix,
:func:`lm_eval_name_hint`) and passes the spec on as an object; its
:attr:`TaskSpec.record` holds every fact about the dataset (:mod:`.registry`); config.yaml
records the parsed form (``task_spec``), and :meth:`TaskSpec.from_config` reads it back. No
code outside ``tasks/`` splits a task string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import registry
from whitebox_eval.tasks.hub import HubPath
from whitebox_eval.tasks.registry import TaskRecord

LM_EVAL = registry.LM_EVAL
"""``lm-eval:TASK``: a task, group or tag of lm-evaluation-harness (:mod:`whitebox_eval.tasks.lm_eval_tasks`)."""
MCQ_TASKS = registry.names(mcq=True)
"""The multiple-choice tasks (:func:`whitebox_eval.tasks.loading.load_mcq`)."""
GENERATION_TASKS = registry.names(generation=True)
"""The tasks a suite that generates asks (``mui``): free-answer datasets, and multiple-choice
datasets with letter answers."""


def _files(names: Iterable[str]) -> str:
    """The named datasets read from a file, listed (your own ``mcq`` last)."""
    return ", ".join(sorted(n for n in names if registry.record(n).is_file and n != "mcq"))


def _forms(names: Iterable[str]) -> str:
    return " | ".join(registry.record(n).form() for n in names)


MCQ_FILES = _files(MCQ_TASKS)
"""The multiple-choice datasets read from a file, for help and error lines (from the records)."""
LETTER_FILES = _files(n for n in GENERATION_TASKS if registry.record(n).generation.check == "choice")
"""The multiple-choice files a generating suite asks with letter answers."""
MCQ_USAGE = (f"{_forms(registry.names(mcq=True, source=registry.GENERATOR))}, or NAME=PATH with NAME one of "
             f"{MCQ_FILES}, or mcq (your own file), or lm-eval:TASK (any multiple-choice task of lm-eval, with "
             "lm-eval installed)")
GENERATION_USAGE = (_forms(n for n in GENERATION_TASKS if registry.record(n).is_generator) + " | "
                    + " | ".join(f"{n}=PATH" + (" (your own file)" if n == "gen" else "") for n in GENERATION_TASKS
                                 if registry.record(n).is_file and registry.record(n).generation.check != "choice")
                    + f" | NAME=PATH with NAME a multiple-choice dataset ({LETTER_FILES}, mcq: letter answers)"
                    " | lm-eval:TASK (generate_until or multiple-choice)")
FORMATS_USAGE = ("arithmetic[:CATEGORY,...] (number answers), or a multiple-choice task whose choices are text: "
                 + ", ".join(f"{n}=PATH" + (" (your own file)" if n == "mcq" else "") for n in MCQ_TASKS
                             if registry.record(n).is_file and registry.record(n).answer_type == "text")
                 + ", lm-eval:TASK (a multiple-choice task of lm-eval)")
"""The formats study's tasks (paper 004): every multiple-choice task, asked also in free text."""
ANSWER_CHECKS = ("exact", "numeric", "contains")
"""``--answer`` for ``gen=PATH`` (and ``regex:PATTERN``): :mod:`whitebox_eval.tasks.answer_checks`."""


def lm_eval_name_hint(spec: str) -> str | None:
    """The one-line fix for a task given as lm-eval names it (``hellaswag``, ``mmlu_anatomy``,
    ``arc_challenge=PATH``, ``mmlu,hellaswag``), or None when ``spec`` is not such a name."""
    if "," in spec and not {"=", ":"} & set(spec.split(",", 1)[0]):  # arithmetic:add1,mul2 is one task
        return (f"--task {spec!r} lists several tasks: one run evaluates one task; run the command once per task, "
                "each with NAME=PATH")
    name, eq, path = spec.partition("=")
    key = name.strip().lower()
    subject = key[5:] if key.startswith("mmlu_") else None
    wanted = "mmlu" if subject else key
    ours, hub = next(((r.name, h) for r in registry.RECORDS.values() for t, h in r.lm_eval_tasks if t == wanted),
                     (None, None))
    if ours is None and wanted in registry.RECORDS and registry.RECORDS[wanted].is_file:
        ours, hub = wanted, registry.RECORDS[wanted].hub  # a dataset name without its file
    if ours is None or (eq and key == ours):
        return None
    if subject:
        hub = f"hf:cais/mmlu:{subject}@test"
    if eq:
        return f"{key!r} is lm-eval's task name; write --task {ours}={path}"
    online = f", or {ours}={hub} when online" if hub else ""
    lm_eval_task = any(t == wanted for t, _ in registry.record(ours).lm_eval_tasks)
    also = f", or lm-eval:{key} (lm-eval's own task)" if lm_eval_task and not registry.record(ours).mcq else ""
    return f"--task {key} needs its data: write --task {ours}=PATH with the local file{online}{also}"


@dataclass(frozen=True)
class TaskSpec:
    """A parsed ``--task``: ``name`` (a :mod:`.registry` record), the ``path`` of a dataset,
    the generator's ``categories``, ``fields`` (the ``--field NAME=COLUMN`` pairs of your own
    file), ``lm_eval_task`` (``lm-eval:TASK``) and ``answer`` (``--answer`` of ``gen=PATH``)."""

    name: str
    path: str | None = None
    categories: tuple[str, ...] = ()
    fields: tuple[tuple[str, str], ...] = ()
    lm_eval_task: str | None = None  # lm-eval:TASK
    answer: str | None = None  # gen=PATH: the answer check
    hub: HubPath | None = field(default=None, init=False, compare=False, repr=False)
    """The hub split the task reads (``NAME=hf:...``), read once from ``path``; None for a local
    file or no file."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "hub", HubPath.parse(self.path))

    @classmethod
    def parse(cls, text: str | TaskSpec, accepted: Iterable[str] | None = None, usage: str | None = None,
              fields: Iterable[str] = (), answer: str | None = None) -> TaskSpec:
        """Read ``text``; ``accepted`` limits the names (a suite's tasks), ``usage`` is the
        suite's own list of task forms for the error line; ``fields``: ``--field`` values;
        ``answer``: ``--answer``. A spec already parsed is checked against ``accepted`` and returned."""
        accepted = tuple(accepted) if accepted is not None else tuple(registry.RECORDS)
        usage = usage or registry.usage(accepted)
        if isinstance(text, TaskSpec):
            if text.name not in accepted:
                raise WhiteboxError(f"task {text.name!r} is not one this study runs; use {usage}")
            return text._with(tuple(fields), answer)
        raw = str(text).strip()
        name, eq, path = raw.partition("=")
        name = name.strip().lower()
        spec: TaskSpec | None = None
        if raw.lower().startswith(LM_EVAL + ":"):
            task = raw[len(LM_EVAL) + 1:].strip()
            if not task or "=" in task or "," in task:
                raise WhiteboxError(f"--task {raw!r}: write lm-eval:TASK with one lm-eval task, group or tag name "
                                    "(e.g. lm-eval:arc_easy); local data goes in --lm-eval-data DIR")
            spec = cls(LM_EVAL, lm_eval_task=task)
        elif eq and name in registry.RECORDS and registry.RECORDS[name].is_file and path.strip():
            spec = cls(name, path=path.strip())
        elif not eq:
            base, colon, cats = name.partition(":")
            rec = registry.RECORDS.get(base)
            if rec is not None and rec.is_generator and (not colon or rec.categories):
                categories = tuple(c.strip() for c in cats.split(",") if c.strip()) if colon else ()
                if colon and not categories:
                    raise WhiteboxError(f"--task {raw!r} names no category after ':'; e.g. {base}:add1,mul2")
                spec = cls(base, categories=_checked_categories(rec, categories))
        if spec is None or spec.name not in accepted:
            hint = lm_eval_name_hint(raw)
            if hint:
                raise WhiteboxError(hint)
            if spec is not None:
                raise WhiteboxError(f"task {spec.name!r} is not one this study runs; use {usage}")
            raise WhiteboxError(f"unknown task {raw!r}: use {usage}")
        return spec._with(tuple(fields), answer)

    def _with(self, fields: tuple[str, ...], answer: str | None) -> TaskSpec:
        """This spec with ``--field`` values and the ``--answer`` check applied (your own files)."""
        from dataclasses import replace

        spec = self
        if fields:
            if spec.name not in ("mcq", "gen"):
                raise WhiteboxError(f"--field maps the columns of your own file (--task mcq=PATH or gen=PATH), not of "
                                    f"{spec.name}")
            from whitebox_eval.tasks.mcq import parse_fields

            spec = replace(spec, fields=parse_fields(fields, spec.name))
        if spec.name == "gen":
            spec = replace(spec, answer=parse_answer(answer or spec.answer or "exact"))
        elif answer is not None:
            raise WhiteboxError(f"--answer chooses the check of your own generation file (--task gen=PATH); "
                                f"{spec.name} has its own")
        return spec

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TaskSpec:
        """The spec a run folder's config.yaml recorded (``task_spec``; else its ``task`` text; a task
        text this version cannot read, from another version or tool, keeps its text as the name)."""
        d = config.get("task_spec")
        if not isinstance(d, Mapping):
            try:
                return cls.parse(str(config.get("task", "")))
            except WhiteboxError:
                return cls(str(config.get("task", "")).strip())
        return cls(str(d["name"]), path=d.get("path"), categories=tuple(d.get("categories") or ()),
                   fields=tuple((k, v) for k, v in (d.get("fields") or {}).items()),
                   lm_eval_task=d.get("lm_eval_task"), answer=d.get("answer"))

    @property
    def record(self) -> TaskRecord:
        """Every fact about the dataset (:mod:`.registry`)."""
        return registry.record(self.name)

    @property
    def is_file(self) -> bool:
        return self.path is not None

    @property
    def is_hub(self) -> bool:
        return self.hub is not None

    @property
    def source(self) -> Path | HubPath | None:
        """What the loaders read: the hub split, else the local path (expanded); None without a file."""
        if self.path is None:
            return None
        return self.hub or Path(self.path).expanduser()

    @property
    def is_lm_eval(self) -> bool:
        """An ``lm-eval:TASK`` task (lm-eval's own task objects and text)."""
        return self.name == LM_EVAL

    @property
    def short(self) -> str:
        """The task with its file's name only (``mmlu=test``, ``ssd``, ``lm-eval:gsm8k``): plans."""
        return self.label if self.path is None else f"{self.name}={Path(self.path).name}"

    @property
    def slug(self) -> str:
        """A run id part naming the task (``lm-eval-gsm8k``, ``gen-qa``, ``arithmetic-gen``)."""
        import re

        if self.lm_eval_task:
            part = f"lm-eval-{self.lm_eval_task}"
        elif self.path:
            part = f"{self.name}-{Path(self.hub.spec if self.hub else self.path).stem}"
        else:
            part = self.name
        return re.sub(r"[^A-Za-z0-9._-]+", "-", part).strip("-")

    def check_file(self) -> TaskSpec:
        """One line when a local file the task reads is missing (before any model runs); returns self."""
        if self.path is not None and not self.is_hub and not Path(self.path).expanduser().exists():
            raise WhiteboxError(f"--task {self}: {Path(self.path).expanduser()} does not exist; give an existing file "
                                f"(or folder), or {self.name}=hf:DATASET[:CONFIG][@SPLIT] when online")
        return self

    @property
    def label(self) -> str:
        """The task without its file (``mmlu``, ``arithmetic:add1``, ``lm-eval:gsm8k``): run ids."""
        return str(TaskSpec(self.name, categories=self.categories, lm_eval_task=self.lm_eval_task))

    def __str__(self) -> str:
        if self.lm_eval_task is not None:
            return f"{LM_EVAL}:{self.lm_eval_task}"
        if self.path is not None:
            return f"{self.name}={self.path}"
        return self.name + (":" + ",".join(self.categories) if self.categories else "")

    def to_config(self) -> dict[str, Any]:
        """What config.yaml records as ``task_spec``."""
        out: dict[str, Any] = {"name": self.name, "path": self.path, "categories": list(self.categories)}
        if self.fields:  # --field NAME=COLUMN (recorded only when given)
            out["fields"] = {name: column for name, column in self.fields}
        if self.lm_eval_task is not None:
            out["lm_eval_task"] = self.lm_eval_task
        if self.answer is not None:
            out["answer"] = self.answer
        return out


def parse_answer(text: str) -> str:
    """``--answer``: exact, numeric, contains or ``regex:PATTERN`` (the pattern must compile)."""
    import re

    value = str(text).strip()
    if value.lower() in ANSWER_CHECKS:
        return value.lower()
    if value.lower().startswith("regex:"):
        pattern = value[len("regex:"):]
        try:
            re.compile(pattern)
        except re.error as e:
            raise WhiteboxError(f"--answer {value!r}: the pattern does not compile ({e})") from None
        if not pattern:
            raise WhiteboxError("--answer regex:PATTERN needs a pattern, e.g. regex:'answer is (\\w+)'")
        return "regex:" + pattern
    raise WhiteboxError(f"--answer {value!r}: choose exact, numeric, contains or regex:PATTERN")


def _checked_categories(rec: TaskRecord, categories: tuple[str, ...]) -> tuple[str, ...]:
    if not categories:
        return ()
    known = registry.categories(rec)
    bad = [c for c in categories if c not in known]
    if bad:
        raise WhiteboxError(f"unknown {rec.name.split('-')[0]} categor{'y' if len(bad) == 1 else 'ies'} {', '.join(bad)}; "
                            f"choose from {', '.join(known)}")
    return categories
