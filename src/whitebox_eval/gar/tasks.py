"""GAR task definitions, identifiers and the enumeration of the 384 tasks (paper 002, sec. 2).

A task is two relational schemas with a chosen relation each (``r_lookup``,
``r_retrieve``), the number of K-V pairs ``n_KV`` and the applied semantic (negate,
g2c) and syntactic (swapQA, swapKV) variations.  Identifiers follow sec. 2 "Tasks"::

    GendersOfPersons/same,KindsOfThings/kindOf×3 [negate](swapKV)

Choices where the paper is silent (documented, and what ``parse_task_id`` accepts):

* empty variation groups are omitted (``...×3`` is the basic form; ``...×3 (swapQA)``
  has only a syntactic variation); several variations are comma separated in the
  canonical order negate, g2c / swapQA, swapKV;
* ``x`` is accepted for ``×``; ``=``, ``∈``, ``∼`` for same / the category relation /
  synonym (sec. 2 and table 2); ``format_task_id(..., abbreviate=True)`` writes them;
* the schema order in the identifier is that of the basic form (person schema first),
  also for swapQA tasks, as in table 2 (``GendersOfPersons/=,KindsOfThings/=×3 [g2c](swapQA)``);
* knowledge-recall sub-problems (table 2, first row; used for the compositionality
  gap) have one relation and ``n_KV = 0``: ``KindsOfThings/kindOf×0``.

The enumeration reproduces the paper's counts: 24 relation pairs × {affirmative,
negate} × {-, swapQA, swapKV, both} = 192 generation tasks, and as many classification
(g2c) tasks; 8 examples per generation task and 16 (8 Yes/No pairs) per
classification task give 4,608 examples.  The 24 pairs are: lookup on GendersOfPersons
(same, isA) or OccupationOfPersons (worksAsA) times retrieve on CountriesOfCities /
CountriesOfLandmarks / KindsOfThings (same, category relation), UsagesOfThings
(usedFor) or Adjectives (synonym).  Table 1 bolds the relations used in tasks; the bold
is lost in our copy, so the per-schema ``task_relations`` in the data files follow the
authors' released generator, which yields exactly these 24 pairs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.schemas import SCHEMA_NAMES, Relation, Schema, load_schema

#: number of K-V pairs in the paper's tasks (sec. 2)
DEFAULT_N_KV = 3
#: examples per task in the paper's dataset (sec. 3)
GENERATION_EXAMPLES = 8
CLASSIFICATION_EXAMPLES = 16

#: order of the lookup (person) and retrieve (object) schemas in the enumeration
LOOKUP_SCHEMAS = ("GendersOfPersons", "OccupationOfPersons")
RETRIEVE_SCHEMAS = ("CountriesOfCities", "CountriesOfLandmarks", "KindsOfThings",
                    "UsagesOfThings", "Adjectives")
#: relation kinds a GAR task may use (same, the R0 category relation, synonym)
TASK_RELATION_KINDS = ("same", "category", "synonym")


@dataclass(frozen=True)
class RelationRef:
    """A schema with one of its relations, e.g. ``KindsOfThings/kindOf``."""

    schema: str
    relation: str

    def load(self) -> tuple[Schema, Relation]:
        """The schema and the relation object."""
        schema = load_schema(self.schema)
        return schema, schema.relation(self.relation)

    def format(self, abbreviate: bool = False) -> str:
        _, rel = self.load()
        name = rel.symbol if abbreviate and rel.symbol else rel.name
        return f"{self.schema}/{name}"

    @classmethod
    def parse(cls, text: str) -> RelationRef:
        """Parse ``Schema/relation`` (relation may be abbreviated)."""
        parts = text.strip().split("/")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise WhiteboxError(f"cannot read relation {text!r}: write it as Schema/relation, "
                                "e.g. KindsOfThings/kindOf")
        schema_name, rel_name = parts[0].strip(), parts[1].strip()
        if schema_name not in SCHEMA_NAMES:
            raise WhiteboxError(f"unknown GAR schema {schema_name!r} in {text!r}; choose one "
                                f"of {list(SCHEMA_NAMES)}")
        rel = load_schema(schema_name).relation(rel_name)
        return cls(schema_name, rel.name)


@dataclass(frozen=True)
class GARTask:
    """One GAR task (sec. 2, "Tasks"); ``lookup`` is None for a KR sub-problem (n_KV = 0)."""

    lookup: RelationRef | None
    retrieve: RelationRef
    n_kv: int = DEFAULT_N_KV
    negate: bool = False
    g2c: bool = False
    swap_qa: bool = False
    swap_kv: bool = False

    def __post_init__(self) -> None:
        _, rrel = self.retrieve.load()
        if self.lookup is None:
            if self.n_kv != 0 or self.negate or self.g2c or self.swap_qa or self.swap_kv:
                raise WhiteboxError("a knowledge-recall task (one relation) has n_KV = 0 and "
                                    "no variations; give two relations for a GAR task")
            if rrel.kind == "same":
                raise WhiteboxError("a knowledge-recall task needs a non-same relation "
                                    f"(got {self.retrieve.format()})")
            return
        if self.n_kv < 1:
            raise WhiteboxError(f"n_KV must be >= 1 for a GAR task (got {self.n_kv})")
        lschema, lrel = self.lookup.load()
        rschema, _ = self.retrieve.load()
        if lschema.side != "person" or rschema.side != "object":
            raise WhiteboxError(
                f"a GAR task pairs a person schema (r_lookup: {list(LOOKUP_SCHEMAS)}) with an "
                f"object schema (r_retrieve: {list(RETRIEVE_SCHEMAS)}); got "
                f"{self.lookup.schema},{self.retrieve.schema}")
        for rel in (lrel, rrel):
            if rel.kind not in TASK_RELATION_KINDS:
                raise WhiteboxError(
                    f"relation {rel.schema}/{rel.name} is derivable from the schema but is not "
                    "used in GAR tasks; use same, the category relation or synonym")

    # -- identity -----------------------------------------------------------------
    @property
    def task_id(self) -> str:
        return format_task_id(self)

    @property
    def is_kr(self) -> bool:
        """A knowledge-recall sub-problem (table 2, first row)."""
        return self.lookup is None

    @property
    def is_classification(self) -> bool:
        return self.g2c

    @property
    def n_r(self) -> int:
        """Number of non-same semantic relations (sec. 2), the difficulty knob."""
        refs = [r for r in (self.lookup, self.retrieve) if r is not None]
        return sum(not ref.load()[1].is_same for ref in refs)

    @property
    def syntactic(self) -> str:
        """``"none"``, ``"swapQA"``, ``"swapKV"`` or ``"swapQA,swapKV"``."""
        names = [n for n, on in (("swapQA", self.swap_qa), ("swapKV", self.swap_kv)) if on]
        return ",".join(names) or "none"

    @property
    def n_examples(self) -> int:
        """Examples per task in the paper's dataset: 8 generation, 16 classification."""
        return CLASSIFICATION_EXAMPLES if self.g2c else GENERATION_EXAMPLES

    def functional_relations(self) -> tuple[RelationRef, RelationRef]:
        """(lookup, retrieve) as used when sampling: swapQA exchanges the two hops.

        In the basic form Q and K come from the lookup (person) schema and V, A from
        the retrieve schema.  swapQA puts the former answer side first in the query,
        so Q, K come from the second schema and V, A from the first (App. B, table 4:
        "the one who has car is Lisa").
        """
        if self.lookup is None:
            raise WhiteboxError("a knowledge-recall task has no lookup hop")
        return (self.retrieve, self.lookup) if self.swap_qa else (self.lookup, self.retrieve)


def format_task_id(task: GARTask, abbreviate: bool = False) -> str:
    """The identifier ``r_lookup,r_retrieve×n_KV [semantic](syntactic)`` of sec. 2."""
    rels = task.retrieve.format(abbreviate) if task.lookup is None else \
        f"{task.lookup.format(abbreviate)},{task.retrieve.format(abbreviate)}"
    text = f"{rels}×{task.n_kv}"
    sem = [n for n, on in (("negate", task.negate), ("g2c", task.g2c)) if on]
    syn = [n for n, on in (("swapQA", task.swap_qa), ("swapKV", task.swap_kv)) if on]
    groups = (f"[{','.join(sem)}]" if sem else "") + (f"({','.join(syn)})" if syn else "")
    return f"{text} {groups}" if groups else text


_ID_RE = re.compile(r"^\s*(?P<rels>[^×\[\(]+?)\s*[×x]\s*(?P<n>\d+)\s*"
                    r"(?:\[(?P<sem>[^\]]*)\])?\s*(?:\((?P<syn>[^)]*)\))?\s*$")


def parse_task_id(text: str) -> GARTask:
    """Parse an identifier written by ``format_task_id`` (or abbreviated, see module doc)."""
    m = _ID_RE.match(text)
    if m is None:
        raise WhiteboxError(f"cannot read GAR task id {text!r}; expected e.g. "
                            "'GendersOfPersons/same,KindsOfThings/kindOf×3 [negate](swapKV)'")
    rel_texts = [r for r in m.group("rels").split(",")]
    sem = {s.strip() for s in (m.group("sem") or "").split(",") if s.strip()}
    syn = {s.strip() for s in (m.group("syn") or "").split(",") if s.strip()}
    bad = (sem - {"negate", "g2c"}) | (syn - {"swapQA", "swapKV"})
    if bad:
        raise WhiteboxError(f"unknown variation(s) {sorted(bad)} in {text!r}; semantic ones are "
                            "negate, g2c and syntactic ones swapQA, swapKV")
    n_kv = int(m.group("n"))
    if len(rel_texts) == 1:
        return GARTask(None, RelationRef.parse(rel_texts[0]), n_kv, "negate" in sem, "g2c" in sem,
                       "swapQA" in syn, "swapKV" in syn)
    if len(rel_texts) != 2:
        raise WhiteboxError(f"GAR task id {text!r} must name two relations (r_lookup,r_retrieve)")
    return GARTask(RelationRef.parse(rel_texts[0]), RelationRef.parse(rel_texts[1]), n_kv,
                   "negate" in sem, "g2c" in sem, "swapQA" in syn, "swapKV" in syn)


def relation_pairs() -> list[tuple[RelationRef, RelationRef]]:
    """The 24 (r_lookup, r_retrieve) pairs of the benchmark, in a fixed order."""
    pairs = []
    for lname in LOOKUP_SCHEMAS:
        lschema = load_schema(lname)
        for rname in RETRIEVE_SCHEMAS:
            rschema = load_schema(rname)
            for lrel in lschema.task_relations:
                for rrel in rschema.task_relations:
                    pairs.append((RelationRef(lname, lrel), RelationRef(rname, rrel)))
    return pairs


def enumerate_tasks(n_kv: int = DEFAULT_N_KV) -> list[GARTask]:
    """All 384 GAR tasks (192 generation, then 192 classification), sec. 2."""
    tasks = []
    for g2c in (False, True):
        for (lookup, retrieve), negate, swap_qa, swap_kv in product(
                relation_pairs(), (False, True), (False, True), (False, True)):
            tasks.append(GARTask(lookup, retrieve, n_kv, negate, g2c, swap_qa, swap_kv))
    return tasks


def kr_tasks() -> list[GARTask]:
    """Knowledge-recall sub-problems (n_KV = 0) with each schema's non-same task relation."""
    out = []
    for name in SCHEMA_NAMES:
        schema = load_schema(name)
        for rel in schema.task_relations:
            if not schema.relation(rel).is_same:
                out.append(GARTask(None, RelationRef(name, rel), 0))
    return out


def resolve_task(task: GARTask | str) -> GARTask:
    """A task object from a task or its identifier."""
    return parse_task_id(task) if isinstance(task, str) else task
