"""Relational schemas of the GAR benchmark (paper 002, sec. 2 and table 1).

A schema is a set enriched with relations, ``A <-R0- B (loop {R_i})``: a codomain of
categories ``A`` (genders, kinds, usages, occupations, countries), a domain ``B`` of
elements (names, things, cities, landmarks) related to their category by ``R0``
(isA / kindOf / usedFor / worksAsA / inCountryOf), and relations ``R_i`` on ``B``
(same, sameGender, sameKind, ...).  ``Adjectives`` has no categories; its elements are
related by ``same``, ``synonym`` and ``antonym``.

The facts live in ``data/*.json`` (written for this project, not copied from the
paper's release).  Every relation is oriented ``holds(x, y)`` with ``x`` the element
that appears in the context (K or V) and ``y`` the query or the answer (Q or A):
``isA.holds("John", "boy")``, ``kindOf.holds("apple", "fruit")``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from whitebox_eval.errors import WhiteboxError

DATA_DIR = Path(__file__).resolve().parent / "data"

#: file stem of each schema, in the order of table 1
SCHEMA_FILES: dict[str, str] = {
    "GendersOfPersons": "genders_of_persons",
    "KindsOfThings": "kinds_of_things",
    "UsagesOfThings": "usages_of_things",
    "Adjectives": "adjectives",
    "OccupationOfPersons": "occupation_of_persons",
    "CountriesOfCities": "countries_of_cities",
    "CountriesOfLandmarks": "countries_of_landmarks",
}
SCHEMA_NAMES: tuple[str, ...] = tuple(SCHEMA_FILES)

#: the relation kinds a schema can derive
RELATION_KINDS = ("same", "category", "same_category", "synonym", "antonym")

#: abbreviations used in task identifiers (sec. 2: "same and kindOf can be abbreviated
#: as = and ∈"; table 2 writes synonym as ∼).  ``≁`` for antonym is our choice.
ABBREVIATIONS: dict[str, str] = {"same": "=", "category": "∈", "synonym": "∼", "antonym": "≁"}


@dataclass(frozen=True)
class Relation:
    """One relation of a schema; ``holds(x, y)`` with x in context, y query/answer."""

    schema: str
    name: str
    kind: str
    _pairs: frozenset[tuple[str, str]] = field(repr=False)

    @property
    def symbol(self) -> str | None:
        """The task-identifier abbreviation (``=``, ``∈``, ``∼``) or None."""
        return ABBREVIATIONS.get(self.kind)

    @property
    def is_same(self) -> bool:
        return self.kind == "same"

    def holds(self, x: str, y: str) -> bool:
        """Whether ``x R y``."""
        return (x, y) in self._pairs

    def image(self, x: str) -> list[str]:
        """All y with ``x R y``, sorted."""
        return sorted(y for a, y in self._pairs if a == x)

    def preimage(self, y: str) -> list[str]:
        """All x with ``x R y``, sorted."""
        return sorted(x for x, b in self._pairs if b == y)

    def domain(self) -> list[str]:
        """Elements x that relate to something, sorted."""
        return sorted({x for x, _ in self._pairs})

    def codomain(self) -> list[str]:
        """Values y that something relates to, sorted."""
        return sorted({y for _, y in self._pairs})

    def pairs(self) -> list[tuple[str, str]]:
        """All (x, y) pairs, sorted."""
        return sorted(self._pairs)


@dataclass(frozen=True)
class Schema:
    """A relational schema of table 1 with the surface text needed to fill templates."""

    name: str
    type: str
    side: str
    frame: str
    categories: dict[str, tuple[str, ...]]
    antonym_pairs: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
    category_relation: str | None
    same_category_relation: str | None
    task_relations: tuple[str, ...]
    relation_phrases: dict[str, str]
    candidates_intro: str
    kr_template: str
    plurals: dict[str, str]
    relations: dict[str, Relation] = field(repr=False)

    @property
    def elements(self) -> list[str]:
        """The domain B (names, things, cities, landmarks, adjectives), sorted."""
        if self.categories:
            return sorted(e for members in self.categories.values() for e in members)
        return sorted(a for pair in self.antonym_pairs for group in pair for a in group)

    def relation(self, name: str) -> Relation:
        """A relation by name or abbreviation (``same``/``=``, ``kindOf``/``∈``, ...)."""
        if name in self.relations:
            return self.relations[name]
        for rel in self.relations.values():
            if rel.symbol is not None and rel.symbol == name:
                return rel
        raise WhiteboxError(
            f"schema {self.name} has no relation {name!r}; choose one of "
            f"{sorted(self.relations)} (or an abbreviation "
            f"{sorted(r.symbol for r in self.relations.values() if r.symbol)})")

    def category_of(self, element: str) -> str:
        """The R0 category of an element (KeyError-free: raises WhiteboxError)."""
        for cat, members in self.categories.items():
            if element in members:
                return cat
        raise WhiteboxError(f"{element!r} is not an element of schema {self.name}")

    def plural(self, category: str) -> str:
        """Plural of a category noun, used for negated person queries ("the boys")."""
        return self.plurals.get(category, category + "s")

    def phrase(self, relation: str) -> str:
        """Text put before the related entity ("a kind of", "a city of"); '' if none."""
        return self.relation_phrases.get(relation, "")

    def restricted(self, keep: frozenset[str]) -> Schema:
        """The schema on the elements in ``keep`` only (categories and synonym groups left with no
        member dropped), every relation derived again: what an element half samples from."""
        cats = {c: kept for c, members in self.categories.items() if (kept := tuple(m for m in members if m in keep))}
        pairs = tuple(p for p in ((tuple(a for a in g1 if a in keep), tuple(b for b in g2 if b in keep))
                                  for g1, g2 in self.antonym_pairs) if p[0] and p[1])
        return replace(self, categories=cats, antonym_pairs=pairs, relations=_build_relations(
            self.name, cats, pairs, self.category_relation, self.same_category_relation))


def _build_relations(name: str, categories: dict[str, tuple[str, ...]],
                     pairs: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...],
                     category_relation: str | None,
                     same_category_relation: str | None) -> dict[str, Relation]:
    rels: dict[str, Relation] = {}
    if categories:
        elements = [e for members in categories.values() for e in members]
        rels["same"] = Relation(name, "same", "same", frozenset((e, e) for e in elements))
        assert category_relation is not None and same_category_relation is not None
        rels[category_relation] = Relation(
            name, category_relation, "category",
            frozenset((e, c) for c, members in categories.items() for e in members))
        rels[same_category_relation] = Relation(
            name, same_category_relation, "same_category",
            frozenset((a, b) for members in categories.values()
                      for a in members for b in members if a != b))
    else:
        elements = [a for pair in pairs for group in pair for a in group]
        rels["same"] = Relation(name, "same", "same", frozenset((e, e) for e in elements))
        syn = {(a, b) for pair in pairs for group in pair for a in group for b in group if a != b}
        ant = {(a, b) for g1, g2 in pairs for a in g1 for b in g2}
        ant |= {(b, a) for a, b in ant}
        rels["synonym"] = Relation(name, "synonym", "synonym", frozenset(syn))
        rels["antonym"] = Relation(name, "antonym", "antonym", frozenset(ant))
    return rels


def _validate(name: str, raw: dict, path: Path) -> None:
    required = ["name", "type", "structure", "side", "frame", "task_relations",
                "candidates_intro", "kr_template"]
    missing = [k for k in required if k not in raw]
    if missing:
        raise WhiteboxError(f"schema file {path} lacks keys {missing}; add them")
    if raw["name"] != name:
        raise WhiteboxError(f"schema file {path} names {raw['name']!r}, expected {name!r}")
    if raw["side"] not in ("person", "object"):
        raise WhiteboxError(f"schema file {path}: side must be 'person' or 'object'")
    if raw["frame"] not in ("persons", "things", "places", "traits"):
        raise WhiteboxError(f"schema file {path}: frame must be persons/things/places/traits")
    if raw["structure"] == "categories":
        seen: dict[str, str] = {}
        for cat, members in raw.get("categories", {}).items():
            if len(members) < 2:
                raise WhiteboxError(f"schema file {path}: category {cat!r} needs >= 2 members")
            for m in members:
                if m in seen:
                    raise WhiteboxError(
                        f"schema file {path}: {m!r} is in both {seen[m]!r} and {cat!r}; "
                        "each element must have exactly one category")
                seen[m] = cat
        if len(raw.get("categories", {})) < 2:
            raise WhiteboxError(f"schema file {path}: needs at least 2 categories")
    elif raw["structure"] == "antonym_pairs":
        seen_adj: set[str] = set()
        for pair in raw.get("pairs", []):
            if len(pair) != 2:
                raise WhiteboxError(f"schema file {path}: each pair needs two synonym groups")
            for group in pair:
                for a in group:
                    if a in seen_adj:
                        raise WhiteboxError(f"schema file {path}: {a!r} appears twice")
                    seen_adj.add(a)
    else:
        raise WhiteboxError(f"schema file {path}: structure must be 'categories' or "
                            "'antonym_pairs'")


@lru_cache(maxsize=None)
def _load(name: str, data_dir: str) -> Schema:
    if name not in SCHEMA_FILES:
        raise WhiteboxError(f"unknown GAR schema {name!r}; choose one of {list(SCHEMA_NAMES)}")
    path = Path(data_dir) / f"{SCHEMA_FILES[name]}.json"
    if not path.is_file():
        raise WhiteboxError(f"GAR schema file {path} not found; check the data directory")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise WhiteboxError(f"GAR schema file {path} is not valid JSON: {exc}") from exc
    _validate(name, raw, path)
    categories = {c: tuple(m) for c, m in raw.get("categories", {}).items()}
    pairs = tuple((tuple(a), tuple(b)) for a, b in raw.get("pairs", []))
    relations = _build_relations(name, categories, pairs, raw.get("category_relation"),
                                 raw.get("same_category_relation"))
    for rel in raw["task_relations"]:
        if rel not in relations:
            raise WhiteboxError(f"schema file {path}: task relation {rel!r} is not derivable; "
                                f"derivable relations are {sorted(relations)}")
    return Schema(
        name=name, type=raw["type"], side=raw["side"], frame=raw["frame"],
        categories=categories, antonym_pairs=pairs,
        category_relation=raw.get("category_relation"),
        same_category_relation=raw.get("same_category_relation"),
        task_relations=tuple(raw["task_relations"]),
        relation_phrases=dict(raw.get("relation_phrases", {})),
        candidates_intro=raw["candidates_intro"], kr_template=raw["kr_template"],
        plurals=dict(raw.get("plurals", {})), relations=relations)


def load_schema(name: str, data_dir: str | Path | None = None) -> Schema:
    """Load one schema of table 1 by name (e.g. ``"KindsOfThings"``)."""
    return _load(name, str(Path(data_dir) if data_dir is not None else DATA_DIR))


def load_schemas(data_dir: str | Path | None = None) -> dict[str, Schema]:
    """All seven schemas of table 1, keyed by name, in table order."""
    return {name: load_schema(name, data_dir) for name in SCHEMA_NAMES}
