"""Format-neutral arithmetic text for training: ``75 + 22 = 97``.

Paper 004 asks its arithmetic questions in two formats (MCQ and free answer, App. A.2), so a
model trained here is trained in neither: each line is the bare expression, `` =`` and the
answer, the loss on the answer only (the operands are random: nothing in them to learn). The
problems are App. B's categories (:mod:`whitebox_eval.tasks.arithmetic`), drawn from a stream no paper child reads
(seed ``TEXT_SEED_OFFSET + seed``) and never one that 004's children could ask: every problem
whose canonical form (operands of + and x sorted) is among the first :data:`EXCLUDED_PER_CATEGORY`
questions of a category at the evaluation seeds (:data:`EVALUATION_SEEDS`, where the formats
suite draws its questions and demonstrations) is skipped. A category whose problems are all
asked there (``add1``: 45 sums) contributes none.

Each item keeps its question as an :class:`~whitebox_eval.tasks.items.MCQItem` (004's own
question and answer), so a check can ask it in 004's free format.

Line styles (``finetune --line-style``): ``plain`` writes every line as above; ``mixed`` writes each
line in one of :data:`MIXED_STYLES` (a seeded draw per problem), none of them with a question
template's words ("Question", "What is the value of", "Answer"), so that no one surface form is
what is learned. The problems, their splits and their hashes are the same in every style.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.arithmetic import ARITHMETIC_CATEGORIES, make_arithmetic

TEXT_SEED_OFFSET = 10_000
"""Training problems come from seed ``TEXT_SEED_OFFSET + seed``: no formats child uses these seeds."""
EVALUATION_SEEDS = (0,)
"""The seeds whose questions are kept out of training (the paper files' formats children use seed 0)."""
EXCLUDED_PER_CATEGORY = 400
"""Questions per category at each evaluation seed kept out (the formats suite draws its questions
from the first 100 per category, more only for a limit above 100 per category x 4 options)."""
_TRIES = 20  # problems drawn per item wanted before a category is taken as used up


def parse_categories(rest: str) -> tuple[str, ...]:
    """``add1,sub2`` -> the categories (all of App. B when empty); an unknown one is one line."""
    cats = tuple(c.strip() for c in rest.split(",") if c.strip()) or ARITHMETIC_CATEGORIES
    bad = [c for c in cats if c not in ARITHMETIC_CATEGORIES]
    if bad:
        raise WhiteboxError(f"unknown arithmetic categories {bad}; choose from {', '.join(ARITHMETIC_CATEGORIES)}")
    return cats


MIXED_STYLES = ("{e} =", "{e} equals", "{e} is", "{e}\nResult:", "Work out {e}.\nSolution:", "Calculate {e}:")
"""The prompts of ``mixed`` lines (the answer follows after a space): on one line or two, with a
cue word or none, never a question template's words."""
TEMPLATES = {"plain": ("{e} =",), "mixed": MIXED_STYLES}  # each line style's prompts
LINE_STYLES = tuple(TEMPLATES)


def line_of(expression: str, answer: int | str, style: str = "plain", key: str = "") -> tuple[str, str]:
    """(prompt, answer) of one training line: ``"75 + 22 ="`` and ``" 97"`` (``mixed``: the
    prompt in a style drawn from ``random.Random(key)``, the answer the same)."""
    if style not in LINE_STYLES:
        raise WhiteboxError(f"line_style is one of {', '.join(LINE_STYLES)}; got {style!r}")
    templates = TEMPLATES[style]
    template = templates[random.Random(f"arithmetic-text/style/{key}").randrange(len(templates))]
    return template.format(e=expression), f" {answer}"


def extra_pieces(style: str) -> float:
    """How much longer a line of ``style`` is than a plain one, on average over its styles, in pieces a
    tokenizer keeps apart (a digit, a word, a sign, a newline): 0 for ``plain``, 4/3 for ``mixed``. The
    time estimate reads it (``finetune/record.py``)."""
    def pieces(template: str) -> int:
        return len(re.findall(r"\d|[^\W\d]+|[^\w\s]|\n", template.format(e="75 + 22") + " 97"))

    (plain,), styles = TEMPLATES["plain"], TEMPLATES[style]
    return sum(pieces(t) for t in styles) / len(styles) - pieces(plain)


def excluded_forms(categories: Sequence[str]) -> set[str]:
    """Canonical forms of every question 004's children may ask (and show as demonstrations)."""
    from whitebox_eval.finetune.splits import canonical

    return {canonical(it.meta["expression"]) for c in categories for s in EVALUATION_SEEDS
            for it in make_arithmetic(c, EXCLUDED_PER_CATEGORY, seed=s)}


def text_items(categories: Sequence[str], n: int, seed: int) -> list:
    """``n`` distinct training problems (MCQItems), the categories dealt in turn, none an
    evaluation question; fewer when the categories run out of new problems."""
    from whitebox_eval.finetune.splits import canonical

    if n < 1:
        raise WhiteboxError("arithmetic-text needs at least one item")
    banned = excluded_forms(categories)
    per = -(-n // len(categories))
    pools = {}
    for c in categories:
        drawn = make_arithmetic(c, per * _TRIES, seed=TEXT_SEED_OFFSET + seed)
        kept, seen = [], set()
        for it in drawn:
            form = canonical(it.meta["expression"])
            if form not in banned and form not in seen:
                seen.add(form)
                kept.append(it)
            if len(kept) == per:
                break
        pools[c] = kept
    dealt = [pools[c][i] for i in range(per) for c in categories if i < len(pools[c])]
    if not dealt:
        raise WhiteboxError(f"arithmetic-text:{','.join(categories)}: every problem of these categories is an "
                            "evaluation question; choose larger categories")
    return dealt[:n]

