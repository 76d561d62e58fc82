"""``finetune --task gar[:TASKS]``: GAR's generator (paper 002) with the elements held out.

The element split (:mod:`whitebox_eval.gar.elements`, seeded by ``--seed``) halves each
category's elements; relation pairs, task forms and answer categories are shared.

- **training and validation** lines come from the train half, an equal mix of every condition
  002's claims compare: each cell (n_r, negate, syntactic variation, generation or
  classification) of the chosen tasks gets the same number of examples (``--limit`` over the
  cells, an even number, whole Yes/No pairs), spread over its tasks; deduplicated by canonical
  form, a ``--validation`` share of them held for the validation loss;
- **the test split** is the test half: each task's first ``test_per_task`` examples exactly as
  ``gar --elements test --limit N`` draws them (:func:`test_per_task`), so that the check and
  002's children on the trained model read the same held-out items.

No test element is in any training or validation line (:func:`leaked`, checked when the splits
are made). The check is 002's own statistic: App. C's rule (P(target) above 1/#alternatives at
the first answer token, one forward pass per item, :mod:`whitebox_eval.gar.scoring`) in the
generation and the classification format, before and after (Wilson intervals, exact McNemar),
each against its uninformed level (1/3: one of three candidates; 1/2: Yes or No).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune.splits import Splits

FORMATS = ("generation", "classification")
UNINFORMED = {"generation": 1 / 3, "classification": 1 / 2}
CHECK = ("App. C's rule on the held-out elements' test split (P(target) above 1/#alternatives at the first answer "
         "token), in the generation and the classification format")
TOKENS = 95  # a GAR line (candidates, the one-shot demonstration, the example): 95.6 SmolLM2 tokens, 92.5 Gemma 3 (mean)


def cell(task) -> tuple[int, bool, str, bool]:
    """The condition a task stands for in the mix: (n_r, negate, syntactic, g2c)."""
    return task.n_r, task.negate, task.syntactic, task.g2c


def test_per_task(limit: int, test: float, n_tasks: int) -> int:
    """Test examples per task: ``test`` x ``limit`` over the tasks, rounded up to an even number."""
    n = max(1, math.ceil(limit * test / n_tasks))
    return n + n % 2


def per_cell(limit: int, n_cells: int) -> int:
    """Training and validation examples per cell: ``limit`` shared equally, even, at least 2."""
    q = max(2, limit // n_cells)
    return q - q % 2


def examples(task_ids: Sequence[str], limit: int, test: float, seed: int) -> list[tuple[str, Any]]:
    """``(item id, GAR example)``: the train half's first (ids ``train:<task>#<i>``), then the
    test half's (``test:<task>#<i>``)."""
    from whitebox_eval.gar.elements import element_split
    from whitebox_eval.gar.generator import generate_task_examples
    from whitebox_eval.gar.selection import task_examples
    from whitebox_eval.gar.tasks import resolve_task

    tasks = [resolve_task(t) for t in task_ids]
    halves = element_split(seed)
    cells: dict[tuple, list] = defaultdict(list)
    for t in tasks:
        cells[cell(t)].append(t)
    q = per_cell(limit, len(cells))
    train = []
    for key in sorted(cells, key=str):
        members = cells[key]
        k = math.ceil(q / len(members))
        units = []
        for t in members:
            exs = generate_task_examples(t, n_examples=k + k % 2 if t.g2c else k, seed=seed, half=halves["train"])
            units += [exs[i:i + 2] for i in range(0, len(exs), 2)] if t.g2c else [[e] for e in exs]
        random.Random(f"finetune/gar/{seed}/{key}").shuffle(units)
        train += [e for u in units for e in u][:q]
    test_set = task_examples(tasks, test_per_task(limit, test, len(tasks)), seed, halves["test"])
    return [(f"{half}:{ex.task_id}#{ex.index}", ex) for half, part in (("train", train), ("test", test_set))
            for ex in part]


def leaked(lines: Sequence[Any], test_elements: frozenset[str]) -> list[tuple[str, set[str]]]:
    """(id, test elements named) of each line that names an element of the test half."""
    from whitebox_eval.gar.elements import mentioned

    out = []
    for it in lines:
        named = mentioned(it.prompt + it.answer) & test_elements
        if named:
            out.append((it.id, named))
    return out


class ElementSplits(Splits):
    """:class:`~.splits.Splits` of GAR items: the halves decide the test split; its record says so."""

    def record(self, seed: int) -> dict[str, Any]:
        from whitebox_eval.gar.elements import RULE, split_record

        halves = split_record(seed)
        return {**super().record(seed), "rule": (
            f"by element half ({RULE}; seed {seed}, train half sha256 {halves['train']['sha256']}, test half "
            f"{halves['test']['sha256']}): training and validation from the train half (an equal mix of (n_r, negate, "
            "syntactic, format) cells, deduplicated by canonical form, the validation share by a seeded shuffle), the "
            "test split from the test half; no test element in a training or validation line")}


def splits(all_items: Sequence[Any], *, validation: float, seed: int) -> ElementSplits:
    """Deal the finetune items of :func:`examples` into the splits (one line if a test element is in a training line)."""
    from whitebox_eval.gar.elements import element_split

    seen: set[str] = set()
    parts: dict[str, list] = {"train": [], "test": []}
    for it in all_items:
        if it.form not in seen:
            seen.add(it.form)
            parts[it.id.partition(":")[0]].append(it)
    pool = parts["train"]
    order = list(range(len(pool)))
    random.Random(f"finetune/gar-splits/{seed}").shuffle(order)
    n_val = max(1, round(len(pool) * validation))
    val = [pool[i] for i in sorted(order[:n_val])]
    train = [pool[i] for i in sorted(order[n_val:])]
    if not train or not parts["test"]:
        raise WhiteboxError("too few GAR items for a training and a test split; raise --limit")
    bad = leaked(train + val, element_split(seed)["test"].elements)
    if bad:
        raise WhiteboxError(f"{len(bad)} training lines name test elements (e.g. {bad[0][0]}: {sorted(bad[0][1])})")
    forms = {name: [it.form for it in part] for name, part in
             (("train", train), ("validation", val), ("test", parts["test"]), ("demos", []))}
    return ElementSplits(train, val, parts["test"], [], len(all_items) - len(seen), forms)


def sizes(task_ids: Sequence[str], limit: int, test: float, validation: float) -> dict[str, int]:
    """Lines per split before deduplication (the plan's estimate; no example generated)."""
    from whitebox_eval.gar.tasks import resolve_task

    tasks = [resolve_task(t) for t in task_ids]
    pool = per_cell(limit, len({cell(t) for t in tasks})) * len({cell(t) for t in tasks})
    n_val = max(1, round(pool * validation))
    return {"train": pool - n_val, "validation": n_val, "test": test_per_task(limit, test, len(tasks)) * len(tasks)}


def appc_check(lm, test_items: Sequence[Any], batch_size: int) -> list[dict[str, Any]]:
    """One row per test item: its format, App. C's correctness, argmax correctness and P(target)."""
    from whitebox_eval.gar.roles import encode_examples
    from whitebox_eval.gar.scoring import score_examples
    from whitebox_eval.internals.engine import Engine

    exs = [it.source for it in test_items]
    was = lm.model.training
    lm.model.eval()
    try:
        scores = score_examples(Engine(lm), encode_examples(exs, lm.tokenizer), batch_size=batch_size)
    finally:
        lm.model.train(was)
    return [{"id": it.id, "format": FORMATS[int(ex.task.g2c)], "task_id": ex.task_id, "correct": bool(s.correct),
             "correct_argmax": bool(s.correct_argmax), "target_prob": round(float(s.target_prob), 6)}
            for it, ex, s in zip(test_items, exs, scores)]


def add_results(results: dict[str, Any], before: Sequence[dict], after: Sequence[dict], seed: int) -> None:
    """Per format: accuracy before and after (``accuracy_<format>``, Wilson) and the McNemar test
    of the change; the uninformed levels; the element split's record."""
    from whitebox_eval import stats
    from whitebox_eval.gar.elements import split_record

    results["check"] = CHECK
    results["element_split"] = split_record(seed)
    results["uninformed"] = dict(UNINFORMED)
    for fmt in FORMATS:
        b = [bool(r["correct"]) for r in before if r["format"] == fmt]
        a = [bool(r["correct"]) for r in after if r["format"] == fmt]
        if not b:
            continue
        stats.add_proportion(results["headline"], f"accuracy_{fmt},before", b)
        stats.add_proportion(results["headline"], f"accuracy_{fmt},after", a)
        stats.add_paired(results, f"accuracy_{fmt},after_vs_before", stats.mcnemar(a, b))
