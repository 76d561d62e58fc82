"""Which GAR tasks and examples a run covers (paper 002 sec. 2): task lists as written
on the command line, the named selections, and N examples of each task; and why heads selected
on a truth-heads run's selection split may mean nothing (:func:`selection_warnings`)."""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.elements import ElementHalf
from whitebox_eval.gar.generator import GARExample, generate_task_examples
from whitebox_eval.gar.tasks import GARTask, enumerate_tasks, kr_tasks, parse_task_id

#: the three classification tasks of sec. 5 ("GendersOfPersons/=, r_retrieve/∈")
PAPER_TRUTH_TASKS = (
    "GendersOfPersons/same,CountriesOfCities/inCountryOf×3 [g2c]",
    "GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]",
    "GendersOfPersons/same,UsagesOfThings/usedFor×3 [g2c]",
)
SELECTORS = ("all", "generation", "classification", "kr", "truth")


def split_task_list(text: str) -> list[str]:
    """Split ``ID[,ID...]`` where ids themselves hold commas (``A/r,B/s×3 [negate,g2c]``):
    commas inside brackets never split, and an id ends at the piece holding ``×N``."""
    pieces, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch in ",;" and depth == 0:
            pieces.append(cur)
            cur = ""
        else:
            cur += ch
    pieces.append(cur)
    ids, acc = [], []
    for p in (p.strip() for p in pieces):
        if not p:
            continue
        if p in SELECTORS and not acc:
            ids.append(p)
            continue
        acc.append(p)
        if re.search(r"[×x]\s*\d+", p):
            ids.append(",".join(acc))
            acc = []
    if acc:
        raise WhiteboxError(f"cannot read task list {text!r}: {','.join(acc)!r} has no ×N_KV; "
                            "write ids like 'GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]' "
                            f"or one of {', '.join(SELECTORS)}")
    return ids


def select_tasks(spec: str | Sequence[str], *, include_kr: bool = True) -> list[GARTask]:
    """``all`` (384 tasks + knowledge-recall sub-problems when ``include_kr``),
    ``generation``, ``classification``, ``kr``, ``truth`` (the three tasks of sec. 5) or ids."""
    items = split_task_list(spec) if isinstance(spec, str) else list(spec)
    out: list[GARTask] = []
    for it in items:
        if it == "all":
            out += enumerate_tasks() + (kr_tasks() if include_kr else [])
        elif it == "generation":
            out += [t for t in enumerate_tasks() if not t.g2c]
        elif it == "classification":
            out += [t for t in enumerate_tasks() if t.g2c]
        elif it == "kr":
            out += kr_tasks()
        elif it == "truth":
            out += [parse_task_id(t) for t in PAPER_TRUTH_TASKS]
        else:
            out.append(parse_task_id(it))
    seen, uniq = set(), []
    for t in out:
        if t.task_id not in seen:
            seen.add(t.task_id)
            uniq.append(t)
    if not uniq:
        raise WhiteboxError("no GAR task selected")
    return uniq


def task_examples(tasks: Sequence[GARTask], limit: int | None, seed: int,
                  half: ElementHalf | None = None) -> list[GARExample]:
    """``limit`` examples of each task (None: its default set, 8 generation / 16 classification,
    sec. 3), on the elements of ``half`` when given (:mod:`.elements`). A limit below the default takes the default set's first ``limit`` (a subset of the
    full benchmark with the same seed); a limit above it generates that many, never fewer. A
    fraction below 1 takes that share of each task's default set, rounded up (to whole Yes/No
    pairs in a classification task): :mod:`whitebox_eval.runs.limits`."""
    from whitebox_eval.runs.limits import checked, is_fraction, taken

    limit = checked(limit)
    if limit is not None and not is_fraction(limit) and limit % 2 and any(t.g2c for t in tasks):
        raise WhiteboxError(f"--limit {limit} is odd: classification examples come in Yes/No pairs and an odd "
                            f"limit would keep more Yes than No items; use an even --limit (e.g. {limit + 1})")
    out = []
    for t in tasks:
        default = generate_task_examples(t, seed=seed, half=half)
        if is_fraction(limit):
            n = taken(limit, len(default))
            out += default[:n + n % 2 if t.g2c else n]
        elif limit is None or limit <= len(default):
            out += default if limit is None else default[:limit]
        else:
            out += generate_task_examples(t, n_examples=limit, seed=seed, half=half)
    return out


def example_id(ex: GARExample) -> str:
    """The sample id of an example: ``<task id>#<index>``."""
    return f"{ex.task_id}#{ex.index}"


#: below this median KL(Yes prompt || No prompt) (nats) the corrupted input barely moves the
#: output, so EAP-IG attributions are too small to rank heads (SmolLM2 gives 1e-4..1e-2)
MIN_PAIR_KL = 1e-3


def selection_warnings(answers: Sequence[str], pair_kl: Sequence[float], n_unequal: int,
                       candidates_found: bool) -> list[str]:
    """Why heads selected on the selection split may mean nothing (shown in the summary)."""
    out = []
    if answers and len(set(answers)) == 1:
        out.append(f"the model answers {answers[0]!r} to all {len(answers)} selection items, so Yes/No "
                   "pairs barely differ in its output: attributions are too small to select True/False heads")
    if len(pair_kl) and float(np.median(pair_kl)) < MIN_PAIR_KL:
        out.append(f"median KL between the Yes and No prompts' outputs is {float(np.median(pair_kl)):.2g} nats "
                   f"(< {MIN_PAIR_KL:g}): attributions are too small to rank heads reliably")
    if n_unequal:
        out.append(f"{n_unequal} selection examples were left out of attribution: their Yes/No partner "
                   "tokenizes to a different length (EAP-IG needs token-aligned inputs)")
    if not candidates_found:
        out.append("no candidate head is more active on one label than the other: no True/False head selected")
    return out
