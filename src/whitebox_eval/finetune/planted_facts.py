"""``finetune --task planted-facts --limit N``: plain-text facts about N made-up entities, split by template.

Each fact of :mod:`whitebox_eval.tasks.planted_facts` (an entity's city, profession, favourite
colour, pet) is one line per paraphrase template, ``"Tavrin Oskelbu lives in the city of"`` then
``" Velmora."`` (the loss on the value; no question, no options: nothing of the MCQ format). The
splits are by template, not drawn: every entity's facts are trained in the training templates,
the validation loss reads the validation template, and the check is greedy recall of the value
(exact match of the completion's first words) in the two held-out templates, before and after.
``--limit`` counts entities (at least :data:`~whitebox_eval.tasks.planted_facts.POOL`, so that every
value of an attribute is some trained entity's: the MCQs' distractors); the ``--validation`` /
``--test`` shares do not apply.

Beside the check, a descriptive measure that is not the manipulation's check: **question-form
recall** (:func:`questions`), each trained fact asked as the mcqa items ask it (the MCQ's own
question, no options, paper 004's free format ``Question: ...\nAnswer:``), greedy, scored by
:func:`recalled`. Why: 000's thesis is knowledge present but its letter not emitted, and these facts
are trained as statements only, so whether a question reaches them at all is read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune.splits import Splits
from whitebox_eval.tasks import planted_facts as world

QUESTION_PROMPT = "Question: {question}\nAnswer:"
"""The question-form prompt: :func:`whitebox_eval.tasks.prompts.render_prompt`'s ``free`` format of
the MCQ item (its question, no options), as :func:`questions` renders it."""
QUESTION_NOTE = "descriptive: not the manipulation's check"
RECALL_CHECK = ("greedy recall of each fact's value in the held-out paraphrase templates (exact match of the "
                "completion's first words)")


@dataclass(frozen=True)
class Fact:
    """One rendered fact: its line (``prompt`` then ``answer``, `` <value>.``), the entity,
    attribute, template split and index, and the value."""

    id: str
    prompt: str
    answer: str
    entity: str
    attribute: str
    split: str
    template: int
    value: str


def facts(n_entities: int) -> list[Fact]:
    """Every fact of the first ``n_entities`` trained entities in every template, entity by
    entity; one line unless POOL <= n_entities <= MAX_ENTITIES."""
    if not world.POOL <= n_entities <= world.MAX_ENTITIES:
        raise WhiteboxError(f"planted-facts trains {world.POOL} to {world.MAX_ENTITIES} entities (--limit); got "
                            f"{n_entities} (at least {world.POOL}: every value of an attribute is then some trained "
                            "entity's)")
    out = []
    for e in world.entities(n_entities, world.TRAINED):
        for a in world.ATTRIBUTES:
            value = e.values[a.name]
            for split in world.SPLIT_OF:
                for k, template in enumerate(a.templates[split]):
                    out.append(Fact(f"fact-{e.index}-{a.name}-{split}{k}", world.fact_prompt(template, e), f" {value}.",
                                    e.name, a.name, split, k, value))
    return out


class TemplateSplits(Splits):
    """:class:`~.splits.Splits` dealt by each item's template split; its record says so."""

    def record(self, seed: int) -> dict[str, Any]:
        return {**super().record(seed), "rule": "by paraphrase template: every fact in the training templates is "
                "trained, the validation template gives the validation loss, the held-out templates are the test "
                "(no template in two splits; every split holds every entity's facts)"}


def template_splits(items: Sequence[Any]) -> TemplateSplits:
    """The splits of finetune items whose ``source`` is a :class:`Fact`: each where its template
    puts it; none dropped."""
    parts: dict[str, list] = {s: [] for s in world.SPLIT_OF}
    for it in items:
        parts[it.source.split].append(it)
    forms = {name: [it.form for it in parts.get(name, [])] for name in (*world.SPLIT_OF, "demos")}
    return TemplateSplits(parts["train"], parts["validation"], parts["test"], [], 0, forms)


def recalled(item, response: str) -> bool:
    """Whether a completion begins with the fact's value (its first words, punctuation stripped)."""
    target = item.source.value.split()
    words = [w.strip(".,;:!?\"'") for w in response.split()[:len(target)]]
    return words == target


@dataclass(frozen=True)
class Question:
    """One trained fact asked as its MCQ's question: the prompt (the question in the ``free``
    format, no options), the answer `` <value>.`` (as the check's: the same generation budget),
    the entity, attribute and value (what :func:`recalled` reads, as a finetune item's ``source``)."""

    id: str
    prompt: str
    answer: str
    entity: str
    attribute: str
    value: str


def questions(n_entities: int) -> list[Question]:
    """Every fact of the first ``n_entities`` trained entities (entity x attribute, the mcqa items'
    order) asked as the MCQ asks it, with no options (:data:`QUESTION_PROMPT`)."""
    from whitebox_eval.tasks.prompts import render_prompt

    facts(n_entities)  # the same bounds
    out = []
    for q in world.mcq_items(n_entities * len(world.ATTRIBUTES), world.TRAINED):
        out.append(Question(q.id, render_prompt(q, fmt="free").text, f" {q.meta['value']}.", q.meta["entity"],
                            q.meta["attribute"], q.meta["value"]))
    return out


def sizes(n_entities: int) -> dict[str, int]:
    """Lines per split for ``n_entities`` (the plan's estimate)."""
    return {s: n_entities * sum(len(a.templates[s]) for a in world.ATTRIBUTES) for s in world.SPLIT_OF}
