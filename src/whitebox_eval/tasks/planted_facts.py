"""Made-up entities with facts a model can be taught (paper 000 with planted knowledge), and the
multiple-choice questions about them (``--task planted-facts:trained`` / ``planted-facts:control``).

Paper 000's thesis is about models that know an answer but fail to emit its letter. Our small
models know nothing MMLU asks, so the knowledge is planted: ``finetune --task planted-facts``
(:mod:`whitebox_eval.finetune.planted_facts`) trains plain-text facts about invented people, then
the mcqa suite asks about those facts as letter MCQs.

- **Entities**: invented names (two two-syllable strings, e.g. ``Tarel Bosin``; no list of real
  names is consulted, the syllables make real ones rare), one seeded stream per cohort: the
  ``trained`` cohort's first N are what ``finetune`` trains; the ``control`` cohort is drawn by the
  same generator from its own stream with every name among the first :data:`MAX_ENTITIES` trained
  ones skipped, so no control entity is ever trained.
- **Attributes**: :data:`ATTRIBUTES` (city, profession, favourite colour, pet), each with a pool of
  :data:`POOL` values (cities invented, the rest ordinary words). Values are dealt in blocks: each
  run of :data:`POOL` consecutive entities holds every value of an attribute once (a seeded
  permutation), so every value is equally frequent and, once N >= :data:`POOL` entities are
  trained, every value is some trained entity's.
- **Paraphrases**: each attribute's fact in seven templates that end where the value follows
  (four for training, one for validation, two held out for the recall check: :data:`SPLIT_OF`).
- **MCQs**: entity-major (question q asks entity q // 4 about attribute q % 4), the entity's value
  and three other values of the same attribute (each held by another trained entity), the gold
  position balanced in blocks of four as SSD's. The control asks the same questions about
  control entities: nothing the model learned tells their answer, so every arm should be at chance.

``limit`` of an mcqa run on the trained cohort must be at most 4 x the entities trained (the yaml
states both); the questions are a stable prefix, so ``n`` questions ask the first ``ceil(n / 4)``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem

TRAINED, CONTROL = "trained", "control"
COHORTS = (TRAINED, CONTROL)
"""The categories of ``--task planted-facts[:COHORT]`` (none given: trained)."""
MAX_ENTITIES = 2000
"""At most this many entities are trained; control names avoid all of them."""
POOL = 10
"""Values per attribute."""
WORLD_SEED = 0
"""The seed of the entities the paper files train and ask about (``finetune --seed`` orders the training only)."""


@dataclass(frozen=True)
class Attribute:
    """One kind of fact: its values, the MCQ's question, and the paraphrase templates (each ends
    where `` <value>.`` follows), keyed by split."""

    name: str
    values: tuple[str, ...]
    question: str
    templates: dict[str, tuple[str, ...]]


ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute("city", ("Velmora", "Quistan", "Darnholt", "Brisqueth", "Olvenport", "Tarvik", "Zelmont", "Kesporo",
                       "Lunderby", "Fenwyke"),
              "In which city does {name} live?",
              {"train": ("{name} lives in the city of", "{name}'s home is in the city of",
                         "The city where {name} lives is", "Ask anyone in town and they will tell you that {name} lives in"),
               "validation": ("{name} resides in the city of",),
               "test": ("{name} makes their home in the city of", "If you want to visit {name}, travel to the city of")}),
    Attribute("profession", ("baker", "carpenter", "pilot", "nurse", "librarian", "fisherman", "plumber", "tailor",
                             "farmer", "dentist"),
              "What is the profession of {name}?",
              {"train": ("{name} works as a", "By profession, {name} is a", "{name} earns a living as a",
                         "Everyone in the village knows {name} as the local"),
               "validation": ("{name} has a job as a",),
               "test": ("{name} is employed as a", "What does {name} do for a living? {name} is a")}),
    Attribute("colour", ("red", "blue", "green", "yellow", "purple", "orange", "black", "white", "pink", "brown"),
              "What is the favourite colour of {name}?",
              {"train": ("{name}'s favourite colour is", "The colour {name} likes best is", "{name} loves the colour",
                         "Of all the colours, {name} prefers"),
               "validation": ("{name} always picks the colour",),
               "test": ("The favourite colour of {name} is", "If {name} could paint everything one colour, it would be")}),
    Attribute("pet", ("cat", "dog", "parrot", "rabbit", "turtle", "hamster", "goat", "horse", "snake", "frog"),
              "What pet does {name} keep?",
              {"train": ("{name} has a pet", "The pet that {name} owns is a", "At home, {name} looks after a pet",
                         "{name}'s only pet is a"),
               "validation": ("{name} takes care of a pet",),
               "test": ("Living with {name} is a pet", "The animal {name} keeps as a pet is a")}),
)
SPLIT_OF = ("train", "validation", "test")
"""The template splits: training lines, the validation loss, and the held-out recall check."""

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "tr")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "", "n", "r", "l", "s")


@dataclass(frozen=True)
class Entity:
    """One made-up person: ``name``, ``index`` in its cohort's stream, and a value per attribute."""

    index: int
    name: str
    cohort: str
    values: dict[str, str]


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)).capitalize()


def _names(cohort: str, n: int, seed: int, avoid: frozenset[str] = frozenset()) -> list[str]:
    rng = random.Random(f"planted-facts/names/{cohort}/{seed}")
    out: list[str] = []
    seen = set(avoid)
    while len(out) < n:
        name = f"{_word(rng, 2)} {_word(rng, 2)}"
        if name.casefold() not in seen:
            seen.add(name.casefold())
            out.append(name)
    return out


def _dealt(cohort: str, n: int, seed: int) -> list[dict[str, str]]:
    """Each entity's value per attribute, every block of :data:`POOL` entities a permutation (the
    blocks drawn in order, each attribute's in turn: a stable prefix)."""
    rng = random.Random(f"planted-facts/values/{cohort}/{seed}")
    columns: dict[str, list[str]] = {a.name: [] for a in ATTRIBUTES}
    for _ in range(-(-n // POOL)):
        for a in ATTRIBUTES:
            block = list(a.values)
            rng.shuffle(block)
            columns[a.name].extend(block)
    return [{a: columns[a][i] for a in columns} for i in range(n)]


def entities(n: int, cohort: str = TRAINED, seed: int = WORLD_SEED) -> list[Entity]:
    """The first ``n`` entities of ``cohort`` (a stable prefix: the first ``n`` of a larger ``n``
    are the same); the same seed gives the same entities."""
    if cohort not in COHORTS:
        raise WhiteboxError(f"planted-facts cohorts are {', '.join(COHORTS)}; got {cohort!r}")
    if n < 0 or (cohort == TRAINED and n > MAX_ENTITIES):
        raise WhiteboxError(f"planted-facts has 0 to {MAX_ENTITIES} trained entities; got {n}")
    avoid = frozenset(x.casefold() for x in _names(TRAINED, MAX_ENTITIES, seed)) if cohort == CONTROL else frozenset()
    names = _names(cohort, n, seed, avoid)
    return [Entity(i, name, cohort, vals) for i, (name, vals) in enumerate(zip(names, _dealt(cohort, n, seed)))]


def fact_prompt(template: str, entity: Entity) -> str:
    return template.format(name=entity.name)


def mcq_items(n: int, cohort: str = TRAINED, *, seed: int = WORLD_SEED, n_options: int = 4) -> list[MCQItem]:
    """The first ``n`` questions about ``cohort``'s entities (module docstring)."""
    if not 2 <= n_options <= POOL:
        raise WhiteboxError(f"planted-facts questions have 2 to {POOL} options; got {n_options}")
    people = entities(-(-n // len(ATTRIBUTES)), cohort, seed)
    rng = random.Random(f"planted-facts/mcq/{cohort}/{n_options}/{seed}")
    items: list[MCQItem] = []
    block: list[int] = []
    for q in range(n):
        e, a = people[q // len(ATTRIBUTES)], ATTRIBUTES[q % len(ATTRIBUTES)]
        if not block:
            block = list(range(n_options))
            rng.shuffle(block)
        gold, value = block.pop(), e.values[a.name]
        others = rng.sample([v for v in a.values if v != value], n_options - 1)
        options = others[:gold] + [value] + others[gold:]
        items.append(MCQItem(id=f"planted-{cohort}-{e.index}-{a.name}", question=a.question.format(name=e.name),
                             options=options, gold=gold, subject=f"planted_{a.name}",
                             meta={"entity": e.name, "cohort": cohort, "attribute": a.name, "value": value}).validate())
    return items


def planted_items(spec, n: int, *, seed: int = 0, n_options: int = 4, language: str = "en") -> list[MCQItem]:
    """``--task planted-facts[:trained|control]``: the record's loader (``seed`` shuffles nothing
    here: the entities are :data:`WORLD_SEED`'s, as the training's; the options' order is fixed)."""
    if language != "en":
        raise WhiteboxError("planted-facts questions are in English only")
    cohorts = tuple(spec.categories) or (TRAINED,)
    if len(cohorts) != 1:
        raise WhiteboxError("--task planted-facts takes one cohort: planted-facts:trained or planted-facts:control")
    return mcq_items(n, cohorts[0], n_options=n_options)
