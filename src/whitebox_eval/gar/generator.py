"""The GAR example generator: the three-step workflow of paper 002, sec. 2.

Step 1 chooses ``r_lookup`` and ``r_retrieve`` (a :class:`GARTask`, see
:mod:`whitebox_eval.gar.tasks`).  Step 2 samples Q, K from ``r_lookup`` and V, A from
``r_retrieve`` so that they form the relational loop, plus ``n_KV - 1`` distracting
(K', V') pairs, and shuffles the pairs (:func:`sample_loop`).  Step 3 fills templates
(:mod:`whitebox_eval.gar.prompts`), with a one-shot demonstration and, when
``r_retrieve`` is not ``same``, the candidate-answer list of App. B.

Relational loop, affirmative:  ``r_lookup(K, Q)``, ``r_retrieve(V, A)``, and for every
distractor ``not r_lookup(K', Q)`` and ``r_retrieve(V', A')`` with ``A' != A``.
negate (sec. 2, the set complement of IOI): the key of the answer pair is the one
*not* related to Q and every distractor key is related to it, ``r_lookup(K', Q)``; for
``same`` this makes every K' equal to Q ("John likes Paris. Mary likes Tokyo. John
likes Lyon. So John does not want to go to" → Tokyo), as in the authors' generator.
K, V, A always name the pair the answer comes from; the paper's figures call that pair
K', V', A' in negative tasks (table 7) — :attr:`GARExample.paper_spans` gives that naming.

g2c (sec. 2): each sampled loop gives two classification examples sharing data and
demonstration, one stating A (label Yes) and one stating the answer A' of a random
distractor (label No): 8 loops → 16 examples, labels exactly balanced.  The label
follows the closed-world reading of the statement, so for negated tasks "Q does not
... A" is Yes and "Q does not ... A'" is No.

Balancing (our choice, the paper gives none): over a task's loops the answer pair's
position cycles evenly through the ``n_KV`` slots and the answers A cycle through a
shuffled list of every possible answer, so no answer repeats before all have appeared.
Distractor answers are distinct from A, pairwise distinct and of distinct first words
when the schema allows it (GendersOfPersons has only two categories).  Randomness comes
from ``random.Random`` seeded with a hash of (seed, task id): same seed, same data.

Element halves (:mod:`whitebox_eval.gar.elements`): given ``half``, every element of an example
and of its demonstration comes from that half of the element split (the task seed then also
hashes the half's name); without it, every element, as above.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Iterable

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.prompts import (
    CLASSIFICATION_LABELS,
    RoleSpans,
    candidate_line,
    render_kr_line,
    render_line,
)
from whitebox_eval.gar.elements import ElementHalf
from whitebox_eval.gar.schemas import Relation, Schema
from whitebox_eval.gar.tasks import (
    DEFAULT_N_KV,
    GENERATION_EXAMPLES,
    GARTask,
    enumerate_tasks,
    format_task_id,
    parse_task_id,
    resolve_task,
)

__all__ = ["GARExample", "LoopDraw", "sample_loop", "generate_task_examples", "generate_gar",
           "format_task_id", "parse_task_id", "enumerate_tasks"]

_MAX_TRIES = 200
_DEMO_TRIES = 30


@dataclass(frozen=True)
class LoopDraw:
    """Step 2 output: one relational loop and its distractors, pairs in context order."""

    query: str
    pairs: tuple[tuple[str, str], ...]
    answers: tuple[str, ...]
    target_position: int

    @property
    def key(self) -> str:
        return self.pairs[self.target_position][0]

    @property
    def value(self) -> str:
        return self.pairs[self.target_position][1]

    @property
    def answer(self) -> str:
        return self.answers[self.target_position]

    def entities(self) -> set[str]:
        """Every K and V in the context."""
        return {x for pair in self.pairs for x in pair}


@dataclass(frozen=True)
class GARExample:
    """One GAR example: the prompt, the target and where every role sits in the prompt.

    ``target`` is what follows the prompt after a space (the answer A for generation,
    "Yes"/"No" for classification); ``alternatives`` are the answers the App. C rule
    compares it with (the distinct candidate answers of the context, or Yes/No).
    ``spans`` are character spans in ``prompt`` of the test example, ``demo_spans``
    those of the one-shot demonstration.  ``stated_answer`` / ``stated_position`` are
    the answer a classification statement asserts and the context pair it comes from.
    """

    task: GARTask
    index: int
    seed: int
    prompt: str
    target: str
    alternatives: tuple[str, ...]
    label: str | None
    query: str | None
    key: str | None
    value: str
    answer: str
    distractor_keys: tuple[str, ...]
    distractor_values: tuple[str, ...]
    distractor_answers: tuple[str, ...]
    target_position: int
    stated_answer: str | None
    stated_position: int | None
    spans: RoleSpans
    demo_spans: RoleSpans

    @property
    def task_id(self) -> str:
        return self.task.task_id

    @property
    def is_classification(self) -> bool:
        return self.task.g2c

    @property
    def n_r(self) -> int:
        return self.task.n_r

    @property
    def chance(self) -> float:
        """App. C threshold: 1 / number of alternatives (1/3 generation, 1/2 classification)."""
        return 1.0 / len(self.alternatives)

    @property
    def target_text(self) -> str:
        """The continuation to score: a space and the target."""
        return " " + self.target

    @property
    def context_pairs(self) -> tuple[tuple[str, str], ...]:
        """(K, V) pairs in context order, the answer pair at ``target_position``."""
        keys = list(self.distractor_keys)
        values = list(self.distractor_values)
        if self.key is None:
            return ()
        keys.insert(self.target_position, self.key)
        values.insert(self.target_position, self.value)
        return tuple(zip(keys, values))

    @property
    def paper_spans(self) -> dict[str, tuple[int, int]]:
        """Spans named as in the paper's figures: in negate tasks the answer pair is
        K', V', A' and the pairs related to Q are K1, V1, ... (table 7)."""
        spans = self.spans.as_dict()
        if not self.task.negate:
            return spans
        out = {k: v for k, v in spans.items() if k in ("Q", "END", "NOT")}
        for old, new in (("K", "K'"), ("V", "V'"), ("A", "A'")):
            if old in spans:
                out[new] = spans[old]
        for i, span in enumerate(self.spans.distractor_keys, 1):
            out[f"K{i}"] = span
        for i, span in enumerate(self.spans.distractor_values, 1):
            out[f"V{i}"] = span
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (spans as {role: [start, end]})."""
        return {
            "task_id": self.task_id, "index": self.index, "seed": self.seed,
            "prompt": self.prompt, "target": self.target,
            "alternatives": list(self.alternatives), "label": self.label,
            "query": self.query, "key": self.key, "value": self.value, "answer": self.answer,
            "distractor_keys": list(self.distractor_keys),
            "distractor_values": list(self.distractor_values),
            "distractor_answers": list(self.distractor_answers),
            "target_position": self.target_position, "stated_answer": self.stated_answer,
            "stated_position": self.stated_position, "n_r": self.n_r,
            "spans": {k: list(v) for k, v in self.spans.as_dict().items()},
            "demo_spans": {k: list(v) for k, v in self.demo_spans.as_dict().items()},
        }


def _task_seed(seed: int, task_id: str, half: ElementHalf | None = None) -> int:
    digest = hashlib.sha256(f"{seed}|{task_id}{'' if half is None else '|' + half.name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _load(ref, half: ElementHalf | None) -> tuple[Schema, Relation]:
    return ref.load() if half is None else half.load(ref)


def _first_word(s: str) -> str:
    return s.split()[0].lower() if s.split() else s


def _balanced(pool: list[str] | list[int], m: int, rng: random.Random) -> list:
    out: list = []
    while len(out) < m:
        chunk = list(pool)
        rng.shuffle(chunk)
        out.extend(chunk)
    return out[:m]


def _sample_distractor_answers(rrel: Relation, answer: str, value: str, k: int,
                               rng: random.Random) -> tuple[list[str], list[str]] | None:
    """k distractor (V', A') with r_retrieve(V', A'), A' != A and not r_retrieve(V', A)."""
    pool = [y for y in rrel.codomain() if y != answer]
    rng.shuffle(pool)
    vals: list[str] = []
    vs: list[str] = []

    def options(y: str) -> list[str]:
        return [x for x in rrel.preimage(y)
                if x not in vs and x != value and x != answer and not rrel.holds(x, answer)]

    first_words = {_first_word(answer)}
    for distinct_first in (True, False):  # prefer distinct values with distinct first words
        for y in pool:
            if len(vals) == k:
                break
            if y in vals or (distinct_first and _first_word(y) in first_words):
                continue
            opts = options(y)
            if opts:
                vals.append(y)
                vs.append(rng.choice(opts))
                first_words.add(_first_word(y))
    while len(vals) < k:  # too few distinct answers (e.g. two genders): repeat values
        ys = [y for y in pool if options(y)]
        if not ys:
            return None
        y = rng.choice(ys)
        vals.append(y)
        vs.append(rng.choice(options(y)))
    return vs, vals


def _sample_lookup(lschema: Schema, lrel: Relation, negate: bool, k: int,
                   rng: random.Random) -> tuple[str, str, list[str]] | None:
    """Q, K and k distractor keys; affirmative r_lookup(K, Q), negated the complement."""
    query = rng.choice(lrel.codomain())
    related = lrel.preimage(query)
    unrelated = [x for x in lschema.elements if x != query and not lrel.holds(x, query)]
    if not negate:
        if not related:
            return None
        key = rng.choice(related)
        pool = [x for x in unrelated if x != key]
        if len(pool) < k:
            return None
        return query, key, rng.sample(pool, k)
    if not unrelated or not related:
        return None
    key = rng.choice(unrelated)
    if len(related) >= k:
        return query, key, rng.sample(related, k)
    return query, key, [rng.choice(related) for _ in range(k)]


def sample_loop(task: GARTask | str, rng: random.Random, *, answer: str | None = None,
                position: int | None = None, half: ElementHalf | None = None) -> LoopDraw:
    """Step 2 of sec. 2: one relational loop plus ``n_KV - 1`` distractors, shuffled.

    ``answer`` fixes A and ``position`` the slot of the answer pair (for balancing); ``half``
    the element half every element comes from.
    """
    task = resolve_task(task)
    lref, rref = task.functional_relations()
    lschema, lrel = _load(lref, half)
    _, rrel = _load(rref, half)
    n = task.n_kv
    if answer is not None and not rrel.preimage(answer):
        raise WhiteboxError(f"{answer!r} cannot be an answer of {rref.format()}")
    if position is not None and not 0 <= position < n:
        raise WhiteboxError(f"position must be in 0..{n - 1} (got {position})")
    for _ in range(_MAX_TRIES):
        a = answer if answer is not None else rng.choice(rrel.codomain())
        value = rng.choice(rrel.preimage(a))
        distractors = _sample_distractor_answers(rrel, a, value, n - 1, rng)
        lookup = _sample_lookup(lschema, lrel, task.negate, n - 1, rng)
        if distractors is None or lookup is None:
            continue
        d_values, d_answers = distractors
        query, key, d_keys = lookup
        order = list(range(n - 1))
        rng.shuffle(order)
        pairs = [(d_keys[i], d_values[i]) for i in order]
        answers = [d_answers[i] for i in order]
        pos = position if position is not None else rng.randrange(n)
        pairs.insert(pos, (key, value))
        answers.insert(pos, a)
        return LoopDraw(query, tuple(pairs), tuple(answers), pos)
    raise WhiteboxError(f"could not sample a relational loop for {task.task_id}: the schema "
                        f"data has too few elements for n_KV = {n}")


def _sample_demo(task: GARTask, rng: random.Random, avoid: set[str], half: ElementHalf | None) -> LoopDraw:
    demo = sample_loop(task, rng, half=half)
    for _ in range(_DEMO_TRIES):
        if not demo.entities() & avoid:
            break
        demo = sample_loop(task, rng, half=half)
    return demo


def _dedup(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _assemble(task: GARTask, index: int, seed: int, draw: LoopDraw, demo: LoopDraw,
              rng: random.Random, cands: list[str] | None, *, stated_position: int | None = None,
              demo_stated_position: int | None = None) -> GARExample:
    lines = []
    if cands is not None:
        _, rref = task.functional_relations()
        lines.append(candidate_line(rref.load()[0], cands))
    demo_label = None
    demo_stated = None
    if task.g2c:
        demo_stated = demo.answers[demo_stated_position] if demo_stated_position is not None \
            else demo.answer
        demo_label = CLASSIFICATION_LABELS[0] if demo_stated_position is None \
            else CLASSIFICATION_LABELS[1]
    demo_text, demo_spans = render_line(task, demo.query, demo.pairs, demo.target_position,
                                        demo.answer, stated=demo_stated, label=demo_label,
                                        with_answer=True)
    demo_offset = sum(len(line) + 1 for line in lines)
    lines.append(demo_text)
    prefix = "\n".join(lines) + "\n"
    label = None
    stated = None
    if task.g2c:
        stated = draw.answers[stated_position] if stated_position is not None else draw.answer
        label = CLASSIFICATION_LABELS[0] if stated_position is None else CLASSIFICATION_LABELS[1]
    text, spans = render_line(task, draw.query, draw.pairs, draw.target_position, draw.answer,
                              stated=stated, label=label)
    d_idx = [i for i in range(len(draw.pairs)) if i != draw.target_position]
    return GARExample(
        task=task, index=index, seed=seed, prompt=prefix + text,
        target=label if label is not None else draw.answer,
        alternatives=CLASSIFICATION_LABELS if task.g2c else tuple(_dedup(draw.answers)),
        label=label, query=draw.query, key=draw.key, value=draw.value, answer=draw.answer,
        distractor_keys=tuple(draw.pairs[i][0] for i in d_idx),
        distractor_values=tuple(draw.pairs[i][1] for i in d_idx),
        distractor_answers=tuple(draw.answers[i] for i in d_idx),
        target_position=draw.target_position, stated_answer=stated,
        stated_position=(None if not task.g2c else
                         draw.target_position if stated_position is None else stated_position),
        spans=spans.shifted(len(prefix)), demo_spans=demo_spans.shifted(demo_offset))


def generate_task_examples(task: GARTask | str, n_examples: int | None = None,
                           seed: int = 0, half: ElementHalf | None = None) -> list[GARExample]:
    """Examples of one task: 8 (generation) / 16 (classification) by default, sec. 3, on the
    elements of ``half`` when given. Knowledge-recall tasks (n_KV = 0) get 8 by default.
    """
    task = resolve_task(task)
    if task.is_kr:
        return _generate_kr(task, GENERATION_EXAMPLES if n_examples is None else n_examples,
                            seed, half)
    n = task.n_examples if n_examples is None else n_examples
    if n < 1:
        raise WhiteboxError(f"n_examples must be >= 1 (got {n})")
    if task.g2c and (n % 2 or task.n_kv < 2):
        raise WhiteboxError("classification examples come in Yes/No pairs built from a "
                            "distractor: use an even n_examples and n_KV >= 2")
    rng = random.Random(_task_seed(seed, task.task_id, half))
    n_loops = n // 2 if task.g2c else n
    _, rref = task.functional_relations()
    _, rrel = _load(rref, half)
    positions = _balanced(list(range(task.n_kv)), n_loops, rng)
    answers = _balanced(rrel.codomain(), n_loops, rng)
    with_candidates = not rrel.is_same
    examples: list[GARExample] = []
    for i in range(n_loops):
        draw = sample_loop(task, rng, answer=answers[i], position=positions[i], half=half)
        demo = _sample_demo(task, rng, draw.entities(), half)
        cands = None
        if with_candidates:
            cands = _dedup(list(demo.answers) + list(draw.answers))
            rng.shuffle(cands)
        if not task.g2c:
            examples.append(_assemble(task, len(examples), seed, draw, demo, rng, cands))
            continue
        demo_no = rng.random() < 0.5
        demo_pos = rng.choice([p for p in range(task.n_kv) if p != demo.target_position]) \
            if demo_no else None
        no_pos = rng.choice([p for p in range(task.n_kv) if p != draw.target_position])
        for stated_position in (None, no_pos):  # Yes, then No
            examples.append(_assemble(task, len(examples), seed, draw, demo, rng, cands,
                                      stated_position=stated_position,
                                      demo_stated_position=demo_pos))
    return examples


def _generate_kr(task: GARTask, n: int, seed: int, half: ElementHalf | None,
                 n_alternatives: int = 3) -> list[GARExample]:
    """Knowledge-recall sub-problems (table 2 first row, sec. 3 compositionality gap).

    Our choice: the prompt has the App. B candidate list (the answer, ``n_alternatives
    - 1`` other answers and the demonstration's) so the App. C threshold matches the
    generation tasks' 1/3.
    """
    rng = random.Random(_task_seed(seed, task.task_id, half))
    schema, rel = _load(task.retrieve, half)
    answers = _balanced(rel.codomain(), n, rng)
    out = []
    for i, a in enumerate(answers):
        value = rng.choice(rel.preimage(a))
        others = [y for y in rel.codomain() if y != a and _first_word(y) != _first_word(a)]
        alts = [a] + rng.sample(others, min(n_alternatives - 1, len(others)))
        demo_a = rng.choice(rel.codomain())
        demo_v = rng.choice([x for x in rel.preimage(demo_a) if x != value] or
                            rel.preimage(demo_a))
        cands = _dedup(alts + [demo_a])
        rng.shuffle(cands)
        cand = candidate_line(schema, cands)
        demo_text, demo_spans = render_kr_line(task, demo_v, demo_a, with_answer=True)
        text, spans = render_kr_line(task, value, a)
        prefix = cand + "\n" + demo_text + "\n"
        out.append(GARExample(
            task=task, index=i, seed=seed, prompt=prefix + text, target=a,
            alternatives=tuple(alts), label=None, query=None, key=None, value=value, answer=a,
            distractor_keys=(), distractor_values=(), distractor_answers=(), target_position=0,
            stated_answer=None, stated_position=None, spans=spans.shifted(len(prefix)),
            demo_spans=demo_spans.shifted(len(cand) + 1)))
    return out


def generate_gar(tasks: Iterable[GARTask | str] | None = None, seed: int = 0,
                 n_kv: int = DEFAULT_N_KV, half: ElementHalf | None = None) -> list[GARExample]:
    """The GAR dataset: every task of :func:`enumerate_tasks` (4,608 examples) or ``tasks``."""
    chosen = enumerate_tasks(n_kv) if tasks is None else [resolve_task(t) for t in tasks]
    return [ex for task in chosen for ex in generate_task_examples(task, seed=seed, half=half)]
