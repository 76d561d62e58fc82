"""Where k-shot demonstrations come from, recorded in config.yaml.

Two sources, never the evaluated items:

- ``dev_same_subject`` (MMLU with a ``dev`` split beside the evaluated one, the
  hendrycks layout ``data/dev/<subject>_dev.csv`` next to ``data/test/``): each item's
  demonstrations are the first k dev rows of its own subject, as in the MMLU paper's
  ``evaluate.py`` (``dev_df[:k]``) and lm-eval's ``mmlu`` tasks (``fewshot_split: dev``,
  ``sampler: first_n``). A hub spec ``hf:cais/mmlu:CONFIG@test`` uses its ``@dev`` split.
- ``held_out_pool`` (every other task, and MMLU without a dev split): the first
  ``POOL_SIZE`` items of the task are set aside as a pool that is never evaluated, and
  the k demonstrations are a seeded draw from it (000 sec. 5.3: "the first fifteen
  validation entries"), the same for every item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.prompts import select_demos, split_demo_pool

POOL_SIZE = 15
DEV_SOURCE, POOL_SOURCE = "dev_same_subject", "held_out_pool"
_EVAL_SPLITS = ("test", "val", "validation")


@dataclass
class Demonstrations:
    """The demonstrations of a study: per subject (dev) or one shared list (pool)."""

    source: str | None = None  # None: zero-shot
    shots: int = 0
    shared: list[MCQItem] = field(default_factory=list)
    by_subject: dict[str, list[MCQItem]] = field(default_factory=dict)
    where: str | None = None  # the dev split's path or hub spec

    def for_item(self, item: MCQItem) -> list[MCQItem]:
        if self.source == DEV_SOURCE:
            return self.by_subject[item.subject or ""]
        return self.shared

    def ids(self) -> list[str]:
        """Every demonstration id (dev: over all subjects)."""
        if self.source == DEV_SOURCE:
            return [d.id for demos in self.by_subject.values() for d in demos]
        return [d.id for d in self.shared]

    def to_config(self) -> dict:
        """What config.yaml records: the source, where it was read, the demonstration ids."""
        if self.source is None:
            return {"source": "none"}
        out: dict = {"source": self.source, "shots": self.shots}
        if self.source == DEV_SOURCE:
            out["dev_split"] = self.where
            out["ids"] = {s: [d.id for d in demos] for s, demos in sorted(self.by_subject.items())}
        else:
            out["pool_size"] = POOL_SIZE
            out["ids"] = [d.id for d in self.shared]
        return out


def mmlu_dev_location(path: str) -> str | None:
    """The dev split beside an MMLU test/val path (folder or one subject file), or None.

    ``.../test`` or ``.../test/x_test.csv`` -> ``.../dev``; ``hf:ID:CONFIG@test`` -> ``hf:ID:CONFIG@dev``.
    """
    if path.startswith("hf:"):
        ident, _, split = path.partition("@")
        return f"{ident}@dev" if (split or "test") != "dev" else None
    p = Path(path)
    folder = p.parent if p.is_file() else p
    if folder.name.lower() in _EVAL_SPLITS and (folder.parent / "dev").is_dir():
        return str(folder.parent / "dev")
    return None


def uses_dev_split(task: str, shots: int) -> bool:
    """Whether ``task`` takes its demonstrations from a dev split (no pool comes off the items)."""
    if shots <= 0 or "=" not in task:
        return False
    name, path = task.split("=", 1)
    return name.strip().lower() == "mmlu" and mmlu_dev_location(path) is not None


def dev_demonstrations(task: str, shots: int, subjects: Sequence[str | None], on_bad_row: str = "skip") -> Demonstrations:
    """The first ``shots`` dev rows of every subject in ``subjects`` (MMLU dev split)."""
    from whitebox_eval.tasks import load_mcq_dataset

    where = mmlu_dev_location(task.split("=", 1)[1])
    wanted = sorted({s or "" for s in subjects})
    files = [Path(where) / f"{s}_dev.csv" for s in wanted]
    if not where.startswith("hf:") and all(f.is_file() for f in files):
        dev = [it for f in files for it in load_mcq_dataset("mmlu", f, on_bad_row=on_bad_row)]  # only the subjects evaluated
    else:  # one file for every subject (hub export, headered CSV with a subject column), or a file is missing
        dev = list(load_mcq_dataset("mmlu", where, on_bad_row=on_bad_row))
    by_subject: dict[str, list[MCQItem]] = {}
    for it in dev:
        by_subject.setdefault(it.subject or "", []).append(it)
    chosen: dict[str, list[MCQItem]] = {}
    for s in wanted:
        rows = by_subject.get(s, [])
        if len(rows) < shots:
            raise WhiteboxError(f"the MMLU dev split {where} has {len(rows)} rows of subject {s!r} but --shots {shots} "
                                f"needs {shots}; add its {s}_dev.csv or use fewer shots")
        chosen[s] = rows[:shots]
    return Demonstrations(DEV_SOURCE, shots, by_subject=chosen, where=where)


def plan_demonstrations(task: str, shots: int, items: list[MCQItem], seed: int = 0,
                        on_bad_row: str = "skip") -> tuple[Demonstrations, list[MCQItem]]:
    """``(demonstrations, items to evaluate)``; with a pool, the pool is removed from the items."""
    if shots <= 0:
        return Demonstrations(), items
    if uses_dev_split(task, shots):
        return dev_demonstrations(task, shots, [it.subject for it in items], on_bad_row), items
    pool, rest = split_demo_pool(items, POOL_SIZE)
    return Demonstrations(POOL_SOURCE, shots, shared=select_demos(pool, shots, seed=seed)), rest
