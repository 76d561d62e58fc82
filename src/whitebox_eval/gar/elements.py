"""The element split of the GAR generator: each category's elements in a train and a test half.

A model trained on GAR tasks (``finetune --task gar``, paper 002 on a trained model) is asked
about elements (names, cities, landmarks, things, adjectives) it never saw in training, while
the relation pairs, the task forms and the answer categories (genders, countries, kinds, usages,
occupations) are shared by both halves. The rule, for a ``seed``:

- every category of every schema (table 1 order, each category's members in file order) puts
  half its elements, rounded up, in the train half and the rest in the test half, by a shuffle
  seeded with (seed, schema, category); an element that two schemas share (``car`` is a kind
  and a usage) keeps the half it got first, and the rest of its category fills around it;
- ``Adjectives`` has no categories and its answers are adjectives: each antonym pair (two
  synonym groups) goes whole to one half, half the pairs rounded up to train, so that a synonym
  and its antonyms are never split;
- an element that is also a word of the templates' own text (``kind``: "a kind of") is in the
  train half (with its antonym pair), so that no training line names a test element;
- every category keeps at least one element in each half (else one line: the split cannot
  sample that category's tasks).

Each half is recorded by the SHA-256 of its sorted elements (:func:`split_record`); a generator
given a half (:mod:`.generator`) samples every query, key, value and answer element and every
demonstration from it. :func:`mentioned` finds the elements a text names (the longest match:
``Tokyo Tower`` is the landmark, not the city ``Tokyo``), for the check that no test element is
in any training line.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.schemas import SCHEMA_NAMES, Relation, Schema, load_schema

HALVES = ("train", "test")
#: ``elements`` of a GAR config: every element (the paper's benchmark) or one half
ELEMENTS = ("all", *HALVES)
RULE = ("each category's elements halved (train: half rounded up) by a seeded shuffle, an element two schemas "
        "share kept in the half it got first; Adjectives by whole antonym pairs; relation pairs, task forms and "
        "answer categories shared by both halves")


@dataclass(frozen=True)
class ElementHalf:
    """One half of the element split: its name, the split's seed and its elements."""

    name: str
    seed: int
    elements: frozenset[str]

    def load(self, ref: Any) -> tuple[Schema, Relation]:
        """``ref.load()`` (a :class:`~.tasks.RelationRef`) on this half's elements only."""
        schema = _restricted(ref.schema, self.elements)
        return schema, schema.relation(ref.relation)

    @property
    def sha256(self) -> str:
        return hashlib.sha256("\n".join(sorted(self.elements)).encode("utf-8")).hexdigest()


@lru_cache(maxsize=None)
def _restricted(schema: str, keep: frozenset[str]) -> Schema:
    return load_schema(schema).restricted(keep)


@lru_cache(maxsize=None)
def element_split(seed: int = 0) -> dict[str, ElementHalf]:
    """The train and test halves for ``seed`` (same seed, same halves)."""
    half: dict[str, str] = {e: "train" for e in _template_words()}
    for name in SCHEMA_NAMES:
        schema = load_schema(name)
        if not schema.categories:  # Adjectives: whole antonym pairs, a pair with a template word in train
            pinned = [p for p in schema.antonym_pairs if any(a in half for g in p for a in g)]
            order = [p for p in schema.antonym_pairs if p not in pinned]
            random.Random(f"gar/elements/{seed}/{name}").shuffle(order)
            room = -(-len(schema.antonym_pairs) // 2) - len(pinned)
            for rank, pair in enumerate(pinned + order):
                for a in (a for g in pair for a in g):
                    half[a] = "train" if rank < len(pinned) + room else "test"
            continue
        for cat, members in schema.categories.items():
            free = [m for m in members if m not in half]
            random.Random(f"gar/elements/{seed}/{name}/{cat}").shuffle(free)
            room = -(-len(members) // 2) - sum(half.get(m) == "train" for m in members)
            for i, m in enumerate(free):
                half[m] = "train" if i < room else "test"
            got = {half[m] for m in members}
            if got != set(HALVES):
                raise WhiteboxError(f"element split seed {seed}: {name}/{cat} has no element in the "
                                    f"{(set(HALVES) - got).pop()} half; choose another seed")
    return {h: ElementHalf(h, seed, frozenset(e for e, where in half.items() if where == h)) for h in HALVES}


def element_half(elements: str, seed: int) -> ElementHalf | None:
    """The half a config's ``elements`` names (None for ``all``); anything else is one line."""
    if elements not in ELEMENTS:
        raise WhiteboxError(f"elements {elements!r}: write one of {', '.join(ELEMENTS)} (all: every element, "
                            "the paper's benchmark; train / test: one half of the element split)")
    return None if elements == "all" else element_split(seed)[elements]


def split_record(seed: int) -> dict[str, Any]:
    """What a run folder keeps of the split: the rule, the seed, each half's size, per-schema
    counts and SHA-256."""
    halves = element_split(seed)
    return {"rule": RULE, "seed": seed, **{
        h: {"n": len(halves[h].elements), "sha256": halves[h].sha256,
            "by_schema": {name: len(set(load_schema(name).elements) & halves[h].elements) for name in SCHEMA_NAMES}}
        for h in HALVES}}


def _template_words() -> set[str]:
    """Elements that are words of the templates' own text (``kind`` of "a kind of"): pinned to the
    train half, so that no test element is in a training line."""
    from whitebox_eval.gar import prompts

    fixed = [prompts.CLASSIFICATION_INSTRUCTION, prompts.CLASSIFICATION_QUESTION, *prompts.CLASSIFICATION_LABELS,
             *(v for verbs in prompts._VERBS.values() for v in verbs), "Premise: In other words, So the one who is "
             "The is 's. has likes attracts describes Answer:"]
    for name in SCHEMA_NAMES:
        schema = load_schema(name)
        fixed += [*schema.relation_phrases.values(), schema.candidates_intro, schema.kr_template]
    return mentioned(" ".join(fixed))


@lru_cache(maxsize=1)
def _element_pattern() -> re.Pattern:
    every = {e for name in SCHEMA_NAMES for e in load_schema(name).elements}
    alts = "|".join(re.escape(e) for e in sorted(every, key=lambda e: (-len(e), e)))
    return re.compile(rf"(?<![\w-])(?:{alts})(?![\w-])", re.IGNORECASE)


def mentioned(text: str) -> set[str]:
    """The GAR elements ``text`` names (case folded: "Kind describes" names ``kind``), each the
    longest element at its place."""
    every = _lowered()
    return {every[m.lower()] for m in _element_pattern().findall(text)}


@lru_cache(maxsize=1)
def _lowered() -> dict[str, str]:
    return {e.lower(): e for name in SCHEMA_NAMES for e in load_schema(name).elements}
