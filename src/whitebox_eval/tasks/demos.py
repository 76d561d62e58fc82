"""Where k-shot demonstrations come from, recorded in config.yaml (``demonstrations``).

Four sources, never the evaluated items:

- ``dev_same_subject`` (MMLU with a ``dev`` split beside the evaluated one, the
  hendrycks layout ``data/dev/<subject>_dev.csv`` next to ``data/test/``, or given with
  ``--demos-from``): each item's demonstrations are the first k dev rows of its own
  subject, as in the MMLU paper's ``evaluate.py`` (``dev_df[:k]``) and lm-eval's
  ``mmlu`` tasks (``fewshot_split: dev``, ``sampler: first_n``). A hub spec
  ``hf:cais/mmlu:CONFIG@test`` uses its ``@dev`` split.
- ``demos_file`` (``--demos-from PATH``, any other task): a file in the task's own format.
- ``sibling_split`` (any other task): the train split found beside the evaluated file,
  else its dev split (:func:`sibling_split`: ``ARC-Challenge-Train.jsonl`` beside
  ``ARC-Challenge-Test.jsonl``, ``hellaswag_train.jsonl`` beside ``hellaswag_val.jsonl``,
  ``train.csv`` beside ``valid.csv``, ``train/`` beside ``test/``; ``@train`` of a hub
  spec of ARC, HellaSwag, CosmosQA), as lm-eval's ARC and HellaSwag tasks take theirs
  from ``training_split``. For these two sources the k demonstrations are one seeded draw
  from the whole file, the same for every item; with ``--prompt lm-eval`` they are drawn
  per item as lm-eval's default sampler draws them (:func:`.lm_eval.sampler_draws`), so the
  prompts are lm-eval's own.
- ``held_out_pool`` (no split found, MMLU without a dev split, synthetic tasks): the
  first ``POOL_SIZE`` items of the task are set aside as a pool that is never evaluated,
  and the k demonstrations are a seeded draw from it (000 sec. 5.3: "the first fifteen
  validation entries"), the same for every item.

With a file source an evaluated item equal to a demonstration (same context, question
and options: e.g. ``--demos-from`` names the evaluated file) is not evaluated, and a
demonstration whose id collides with a different evaluated item's (ids made from line
numbers) is recorded as ``ID@FILE``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import lm_eval, registry
from whitebox_eval.tasks.hub import HubPath
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.spec import TaskSpec

POOL_SIZE = 15
DEV_SOURCE, FILE_SOURCE, SPLIT_SOURCE, POOL_SOURCE = "dev_same_subject", "demos_file", "sibling_split", "held_out_pool"
_EVAL_SPLITS = ("test", "val", "validation")
#: the split names a file or folder may carry, and where demonstrations are looked for
#: when evaluating each (train first, as lm-eval's ``training_split``; then dev)
_DEMO_SPLITS = {"test": ("train", "dev", "val", "valid", "validation"), "val": ("train",), "valid": ("train",),
                "validation": ("train",), "dev": ("train",)}
_SPLIT_WORD = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(sorted(_DEMO_SPLITS, key=len, reverse=True)) + r")(?![A-Za-z0-9])",
                         re.IGNORECASE)


@dataclass
class Demonstrations:
    """The demonstrations of a study: per subject (dev) or one shared list (pool)."""

    source: str | None = None  # None: zero-shot
    shots: int = 0
    shared: list[MCQItem] = field(default_factory=list)
    by_subject: dict[str, list[MCQItem]] = field(default_factory=dict)
    where: Path | HubPath | str | None = None  # the dev split's / demonstrations file's path or hub split (the pool: the task's path)
    split: str | None = None  # sibling_split: which split (train, dev, ...)
    given: bool = False  # where came from --demos-from
    n_rows: int = 0  # rows of the file the shared draw was made from
    seed: int = 0
    removed: list[str] = field(default_factory=list)  # evaluated ids dropped for equalling a demonstration
    per_item: dict[str, list[MCQItem]] = field(default_factory=dict)  # lm-eval's per-item draws
    excludes_item: bool = False  # per_item: k + 1 drawn and the evaluated document dropped (lm-eval)

    def for_item(self, item: MCQItem) -> list[MCQItem]:
        if self.per_item:
            return self.per_item[item.id]
        if self.source == DEV_SOURCE:
            return self.by_subject[item.subject or ""]
        return self.shared

    def shown(self) -> list[MCQItem]:
        """Every demonstration (dev: over all subjects)."""
        if self.source == DEV_SOURCE:
            return [d for demos in self.by_subject.values() for d in demos]
        if self.per_item:
            return list({d.id: d for demos in self.per_item.values() for d in demos}.values())
        return list(self.shared)

    def ids(self) -> list[str]:
        """Every demonstration id (dev: over all subjects)."""
        return [d.id for d in self.shown()]

    def to_config(self) -> dict:
        """What config.yaml records: the source, where it was read, the demonstration ids."""
        if self.source is None:
            return {"source": "none"}
        out: dict = {"source": self.source, "shots": self.shots}
        if self.source == DEV_SOURCE:
            out["dev_split"] = str(self.where)
            out["ids"] = {s: [d.id for d in demos] for s, demos in sorted(self.by_subject.items())}
        elif self.source == POOL_SOURCE:
            out["pool_size"] = POOL_SIZE
            out["ids"] = [d.id for d in self.shared]
            if self.where:  # a file task: why no split was used
                out["note"] = f"no train/dev split found beside {self.where}; give one with --demos-from"
        else:
            if self.split:
                out["split"] = self.split
            out["file"] = None if self.where is None else str(self.where)
            if self.per_item:
                out["draw"] = (f"per item, as lm-eval 0.4.13's default sampler: one random.Random({lm_eval.FEWSHOT_SEED}) shared by "
                               f"every item in file order, rnd.sample(the file's {self.n_rows} rows, "
                               + (f"{self.shots} + 1), the evaluated document dropped, the first {self.shots}"
                                  if self.excludes_item else f"{self.shots})"))
                out["ids_sha256"] = hashlib.sha256(json.dumps({k: [d.id for d in v] for k, v in self.per_item.items()},
                                                              sort_keys=True).encode()).hexdigest()
                out["ids_first_items"] = {k: [d.id for d in v] for k, v in list(self.per_item.items())[:3]}
            else:
                out["draw"] = (f"seeded shuffle (seed {self.seed}) of the file's {self.n_rows} rows, the first {self.shots}; "
                               "the same demonstrations for every item")
                out["ids"] = [d.id for d in self.shared]
        if self.given:
            out["given_by"] = "--demos-from"
        if self.removed:
            out["removed_from_evaluated"] = list(self.removed)
        return out


def mmlu_dev_location(source: Path | HubPath) -> Path | HubPath | None:
    """The dev split beside an MMLU test/val path (folder or one subject file; a task's parsed
    ``TaskSpec.source``), or None.

    ``.../test`` or ``.../test/x_test.csv`` -> ``.../dev``; ``hf:ID:CONFIG@test`` -> ``hf:ID:CONFIG@dev``.
    """
    if isinstance(source, HubPath):
        return replace(source, split="dev") if (source.split or "test") != "dev" else None
    p = Path(source)
    folder = p.parent if p.is_file() else p
    if folder.name.lower() in _EVAL_SPLITS and (folder.parent / "dev").is_dir():
        return folder.parent / "dev"
    return None


def sibling_split(rec: registry.TaskRecord, source: Path | HubPath) -> tuple[str, Path | HubPath] | None:
    """``(split, location)`` of the train (else dev) split beside an evaluated file, or None.

    The file's name (or its folder's) must carry a split word (test, val, valid,
    validation, dev) delimited by non-alphanumerics; the same name with the word replaced
    (same case style) is looked for in the same folder, then in the sibling folder named
    after the split: ``ARC-Challenge-Test.jsonl`` -> ``ARC-Challenge-Train.jsonl``,
    ``hellaswag_val.jsonl`` -> ``hellaswag_train.jsonl``, ``valid.csv`` -> ``train.csv``,
    ``test/x.jsonl`` -> ``train/x.jsonl``. A hub spec of ARC, HellaSwag or CosmosQA gives ``@train``.
    """
    if isinstance(source, HubPath):
        train = rec.hub_train and (source.split or "test") != "train"
        return ("train", replace(source, split="train")) if train else None
    p = Path(source)
    if not p.is_file():
        return None
    word = _last_split_word(p.name) or _last_split_word(p.parent.name)
    if word is None:
        return None
    for split in _DEMO_SPLITS[word.lower()]:
        names = list(dict.fromkeys([_replace_split_word(p.name, split), p.name]))
        candidates = [p.parent / names[0]]
        if _last_split_word(p.parent.name):
            folder = p.parent.parent / _replace_split_word(p.parent.name, split)
            candidates += [folder / n for n in names]
        for c in candidates:
            if c.is_file() and c.resolve() != p.resolve():
                return split, c
    return None


def _last_split_word(name: str) -> str | None:
    found = list(_SPLIT_WORD.finditer(name))
    return found[-1].group(1) if found else None


def _replace_split_word(name: str, split: str) -> str:
    found = list(_SPLIT_WORD.finditer(name))
    if not found:
        return name
    m = found[-1]
    w = m.group(1)
    new = split.upper() if w.isupper() else split.capitalize() if w[0].isupper() else split
    return name[:m.start()] + new + name[m.end():]


@dataclass(frozen=True)
class DemoSource:
    """Where a study's demonstrations come from (decided before any item is loaded)."""

    kind: str | None  # None: zero-shot
    where: Path | HubPath | None = None
    split: str | None = None
    given: bool = False

    @property
    def takes_pool(self) -> bool:
        """Whether the demonstrations come off the front of the items (load POOL_SIZE more)."""
        return self.kind == POOL_SOURCE


def demo_source(spec: TaskSpec, shots: int, demos_from: Path | HubPath | None = None) -> DemoSource:
    """The source of the task's demonstrations: ``--demos-from``, a dev/train split beside
    the evaluated file, or the held-out pool (see the module docstring; the task's record
    says which rule applies, :mod:`.registry`)."""
    if shots <= 0:
        return DemoSource(None)
    if spec.path is None:
        if demos_from:
            raise WhiteboxError(f"--demos-from needs a NAME=PATH task (its file in the same format); {spec} is "
                                "generated, its demonstrations come from a held-out pool")
        return DemoSource(POOL_SOURCE)
    rule = spec.record.demos
    if rule == registry.DEV_SAME_SUBJECT:
        where = demos_from or mmlu_dev_location(spec.source)
        return DemoSource(DEV_SOURCE, where, "dev", given=bool(demos_from)) if where else DemoSource(POOL_SOURCE)
    if demos_from:
        return DemoSource(FILE_SOURCE, demos_from, given=True)
    found = sibling_split(spec.record, spec.source)
    return DemoSource(SPLIT_SOURCE, found[1], found[0]) if found else DemoSource(POOL_SOURCE)


def dev_demonstrations(spec: TaskSpec, shots: int, subjects: Sequence[str | None], on_bad_row: str = "skip",
                       where: Path | HubPath | None = None) -> Demonstrations:
    """The first ``shots`` dev rows of every subject in ``subjects`` (MMLU dev split, by
    default the one beside the evaluated path)."""
    from whitebox_eval.tasks.loading import load_mcq_dataset

    where = where or mmlu_dev_location(spec.source)
    wanted = sorted({s or "" for s in subjects})
    files = [] if isinstance(where, HubPath) else [where / f"{s}_dev.csv" for s in wanted]
    if files and where.is_dir() and all(f.is_file() for f in files):
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


def select_demos(pool: Sequence[MCQItem], k: int, *, seed: int = 0) -> list[MCQItem]:
    """The k demonstrations for k-shot prompts (paper 000 sec. 5.3).

    The pool is put in one fixed seeded order and k-shot takes its first k items, so
    the (k+1)-shot set contains the k-shot set. The paper uses k = 0..5 drawn from the
    first fifteen validation entries (see ``split_demo_pool``).
    """
    if k < 0:
        raise WhiteboxError(f"number of shots must be >= 0, got {k}")
    if k > len(pool):
        raise WhiteboxError(f"{k}-shot prompts need {k} demonstrations but the pool has {len(pool)}")
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    return [pool[i] for i in order[:k]]


def split_demo_pool(items: Sequence[MCQItem], pool_size: int = POOL_SIZE) -> tuple[list[MCQItem], list[MCQItem]]:
    """Split off the first ``pool_size`` items as the demonstration pool (000 sec. 5.3).

    Returns ``(pool, rest)``; evaluate on ``rest`` so no question is its own demonstration.
    """
    if pool_size < 0:
        raise WhiteboxError(f"pool_size must be >= 0, got {pool_size}")
    return list(items[:pool_size]), list(items[pool_size:])


def _content(it: MCQItem) -> tuple:
    return ((it.context or "").strip(), it.question.strip(), tuple(o.strip() for o in it.options))


def keep_apart(demos: Demonstrations, items: list[MCQItem]) -> list[MCQItem]:
    """The items to evaluate: those equal to a demonstration dropped (recorded in
    ``demos.removed``); a demonstration id equal to a different item's id becomes ``ID@FILE``."""
    shown = demos.shown()
    same = {_content(d) for d in shown}
    kept = [it for it in items if _content(it) not in same]
    demos.removed = [it.id for it in items if _content(it) in same]
    _tag_colliding(demos, kept)
    return kept


def _tag_colliding(demos: Demonstrations, items: Sequence[MCQItem]) -> None:
    """A demonstration whose id equals an evaluated item's becomes ``ID@FILE``."""
    ids = {it.id for it in items}
    where = demos.where
    tag = (where.split if where.split is not None else str(where)) if isinstance(where, HubPath) else Path(where or "").name
    for d in demos.shown():
        if d.id in ids:
            d.id = f"{d.id}@{tag}"


def plan_demonstrations(spec: TaskSpec, shots: int, items: list[MCQItem], seed: int = 0,
                        on_bad_row: str = "skip", demos_from: Path | HubPath | None = None,
                        lm_eval_sampler: bool = False) -> tuple[Demonstrations, list[MCQItem]]:
    """``(demonstrations, items to evaluate)``; with a pool, the pool is removed from the items,
    with a file, items equal to a demonstration are (:func:`keep_apart`). A file's demonstrations
    are one seeded draw of ``shots`` of its rows (:func:`select_demos`), the same for every item;
    with ``lm_eval_sampler`` (``--prompt lm-eval``) each item's are drawn as lm-eval draws them
    (:func:`whitebox_eval.tasks.lm_eval.sampler_draws`), and no evaluated item is dropped (lm-eval keeps them)."""
    from whitebox_eval.tasks.loading import load_mcq_dataset

    src = demo_source(spec, shots, demos_from)
    if src.kind is None:
        return Demonstrations(), items
    if src.kind == POOL_SOURCE:
        pool, rest = split_demo_pool(items)
        return Demonstrations(POOL_SOURCE, shots, shared=select_demos(pool, shots, seed=seed), where=spec.path), rest
    if src.kind == DEV_SOURCE:
        demos = dev_demonstrations(spec, shots, [it.subject for it in items], on_bad_row, where=src.where)
    else:  # a file: its train/dev split or --demos-from
        rows = list(load_mcq_dataset(spec.name, src.where, on_bad_row=on_bad_row, seed=seed))
        if lm_eval_sampler:
            per_item = lm_eval.sampler_draws(spec.record, rows, items, shots)
            demos = Demonstrations(src.kind, shots, where=src.where, split=src.split, given=src.given, n_rows=len(rows),
                                   per_item=per_item, excludes_item=spec.record.lm_eval_draws_extra)
            _tag_colliding(demos, items)
            return demos, items
        if len(rows) < shots:
            raise WhiteboxError(f"{src.where} has {len(rows)} usable rows but --shots {shots} needs {shots}; use fewer shots")
        demos = Demonstrations(src.kind, shots, shared=select_demos(rows, shots, seed=seed), where=src.where,
                               split=src.split, n_rows=len(rows), seed=seed)
    demos.given = src.given
    return demos, keep_apart(demos, items)
