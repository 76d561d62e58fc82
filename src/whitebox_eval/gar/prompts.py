"""GAR prompt text and the positions of Q, K, V, A, K', V' and END in it (paper 002, App. B).

Step 3 of the workflow (sec. 2) fills templates; App. B lists what the actual prompts
add to the bare statements of table 2: a shuffled list of candidate answers when
``r_retrieve`` is not ``same`` ("Countries of cities include Spain, Thailand, Italy and
Russia."), the K-V pairs bracketed with ``< ... >``, the pairs called the "Premise" and
"Answer with Yes or No." in classification tasks, and a one-shot demonstration.

Every role is recorded as a *character* span of the final prompt while the text is
built (never found by searching); :func:`whitebox_eval.gar.roles.token_spans` maps the
spans onto the tokens of any Hugging Face fast tokenizer through ``return_offsets_mapping``.

Templates (our wording where table 2 / App. B give none):

* pairs: things "John has apple." / swapKV "The apple is John's."; places "John likes
  Paris." / swapKV "Paris attracts John."; traits "John is careful." / swapKV
  "Careful describes John.";
* query: "So John has a kind of" → fruit; negated "So the boys do not have a kind of";
  synonym retrieval "In other words, John is" → cautious; swapQA "So the one who has
  a kind of fruit is the" → girl;
* classification: "Premise: < ... >. Answer with Yes or No. Can it be inferred from the
  premise that <statement>? Answer:" → Yes / No.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.schemas import Schema
from whitebox_eval.gar.tasks import GARTask

Span = tuple[int, int]

CLASSIFICATION_INSTRUCTION = "Answer with Yes or No."
CLASSIFICATION_QUESTION = "Can it be inferred from the premise that "
CLASSIFICATION_LABELS = ("Yes", "No")

_VERBS = {  # frame -> (affirmative singular, affirmative plural, negated singular, negated plural)
    "things": ("has", "have", "does not have", "do not have"),
    "places": ("wants to go to", "want to go to", "does not want to go to", "do not want to go to"),
    "traits": ("is", "are", "is not", "are not"),
}


@dataclass(frozen=True)
class RoleSpans:
    """Half-open ``(start, end)`` spans of the relational-loop roles in one example.

    Character offsets in :class:`GARExample.spans`, token indices after
    :func:`~whitebox_eval.gar.roles.token_spans`.  ``answer`` is None where the answer is not in the text (the
    generation target).  ``end`` is the position whose next-token prediction is the
    answer (the last prompt character / token).  ``negation`` covers "not".
    """

    end: Span
    query: Span | None = None
    key: Span | None = None
    value: Span | None = None
    answer: Span | None = None
    distractor_keys: tuple[Span, ...] = ()
    distractor_values: tuple[Span, ...] = ()
    negation: Span | None = None

    def map(self, fn: Callable[[Span], Span]) -> RoleSpans:
        """Apply ``fn`` to every span."""
        def opt(s: Span | None) -> Span | None:
            return None if s is None else fn(s)
        return RoleSpans(end=fn(self.end), query=opt(self.query), key=opt(self.key),
                         value=opt(self.value), answer=opt(self.answer),
                         distractor_keys=tuple(fn(s) for s in self.distractor_keys),
                         distractor_values=tuple(fn(s) for s in self.distractor_values),
                         negation=opt(self.negation))

    def shifted(self, offset: int) -> RoleSpans:
        return self.map(lambda s: (s[0] + offset, s[1] + offset))

    def as_dict(self) -> dict[str, Span]:
        """``{"Q", "K", "V", "A", "END", "K'1", "V'1", ..., "NOT"}`` for the spans present."""
        out: dict[str, Span] = {}
        for name, span in (("Q", self.query), ("K", self.key), ("V", self.value),
                           ("A", self.answer), ("END", self.end), ("NOT", self.negation)):
            if span is not None:
                out[name] = span
        for i, span in enumerate(self.distractor_keys, 1):
            out[f"K'{i}"] = span
        for i, span in enumerate(self.distractor_values, 1):
            out[f"V'{i}"] = span
        return out


class _Line:
    """Text built piece by piece, remembering where each role landed."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.roles: dict[str, list[Span]] = {}

    def add(self, text: str, role: str | None = None) -> Span:
        span = (self.length, self.length + len(text))
        self.parts.append(text)
        self.length += len(text)
        if role is not None:
            self.roles.setdefault(role, []).append(span)
        return span

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _capitalize(s: str) -> str:
    return s[:1].upper() + s[1:]


def _add_pair(line: _Line, frame: str, person: str, obj: str, person_role: str,
              obj_role: str, object_first: bool) -> None:
    if frame == "things":
        if object_first:
            line.add("The "); line.add(obj, obj_role); line.add(" is ")
            line.add(person, person_role); line.add("'s.")
        else:
            line.add(person, person_role); line.add(" has "); line.add(obj, obj_role); line.add(".")
    elif frame == "places":
        if object_first:
            line.add(obj, obj_role); line.add(" attracts "); line.add(person, person_role)
            line.add(".")
        else:
            line.add(person, person_role); line.add(" likes "); line.add(obj, obj_role)
            line.add(".")
    elif frame == "traits":
        if object_first:
            line.add(_capitalize(obj), obj_role); line.add(" describes ")
            line.add(person, person_role); line.add(".")
        else:
            line.add(person, person_role); line.add(" is "); line.add(obj, obj_role); line.add(".")
    else:  # pragma: no cover - schemas are validated on load
        raise WhiteboxError(f"unknown template frame {frame!r}")


def _add_verb(line: _Line, frame: str, negate: bool, plural: bool) -> None:
    verb = _VERBS[frame][2 * int(negate) + int(plural)]
    if negate:
        head, tail = verb.split(" not", 1)
        line.add(head + " ")
        line.add("not", "NOT")
        line.add(tail)
    else:
        line.add(verb)


def _add_clause(line: _Line, task: GARTask, query: str) -> None:
    """The query clause after the lead ("So "), ending right before the answer."""
    lref, rref = task.functional_relations()
    lschema, lrel = lref.load()
    rschema, rrel = rref.load()
    if lschema.side == "person":  # basic form: Q is a person (or a person category)
        frame = rschema.frame
        plural = False
        if lrel.kind == "same":
            line.add(query, "Q")
        else:
            plural = task.negate
            line.add("the ")
            line.add(lschema.plural(query) if plural else query, "Q")
        line.add(" ")
        _add_verb(line, frame, task.negate, plural)
        phrase = rschema.phrase(rrel.name)
        if phrase:
            line.add(" " + phrase)
    else:  # swapQA: Q is on the object side, the answer is a person (or category)
        frame = lschema.frame
        line.add("the one who ")
        _add_verb(line, frame, task.negate, False)
        line.add(" ")
        phrase = lschema.phrase(lrel.name)
        if phrase:
            line.add(phrase + " ")
        line.add(query, "Q")
        line.add(" is")
        if rrel.kind == "category":
            line.add(" the")


def render_line(task: GARTask, query: str, pairs: Sequence[tuple[str, str]],
                target_position: int, answer: str, *, stated: str | None = None,
                label: str | None = None, with_answer: bool = False) -> tuple[str, RoleSpans]:
    """One example line of a GAR task (sec. 2 step 3, App. B), with its role spans.

    ``pairs`` are the (K, V) pairs in context order, ``pairs[target_position]`` being
    the pair of the relational loop.  Generation lines end at END unless
    ``with_answer`` (the demonstration), which appends " " + ``answer``.
    Classification lines state ``stated`` and end at "Answer:" unless ``with_answer``
    appends " " + ``label``.
    """
    lref, rref = task.functional_relations()
    lschema, _ = lref.load()
    rschema, rrel = rref.load()
    obj_schema = rschema if lschema.side == "person" else lschema
    line = _Line()
    line.add("Premise: < " if task.g2c else "< ")
    for i, (k, v) in enumerate(pairs):
        if i:
            line.add(" ")
        suffix = "" if i == target_position else "'"
        k_role, v_role = "K" + suffix, "V" + suffix
        if lschema.side == "person":
            _add_pair(line, obj_schema.frame, k, v, k_role, v_role, task.swap_kv)
        else:
            _add_pair(line, obj_schema.frame, v, k, v_role, k_role, task.swap_kv)
    line.add(" >.")
    if task.g2c:
        if stated is None:
            raise WhiteboxError("a classification line needs the stated answer")
        line.add(f" {CLASSIFICATION_INSTRUCTION} {CLASSIFICATION_QUESTION}")
        _add_clause(line, task, query)
        line.add(" ")
        line.add(stated, "A")
        line.add("? Answer")
        end = line.add(":")
        if with_answer:
            if label is None:
                raise WhiteboxError("a classification demonstration needs its label")
            line.add(" " + label)
    else:
        lead = "In other words, " if rrel.kind == "synonym" else "So "
        line.add(" " + lead)
        _add_clause(line, task, query)
        end = (line.length - 1, line.length)
        if with_answer:
            line.add(" ")
            line.add(answer, "A")
    return line.text, _spans_from_roles(line.roles, end)


def render_kr_line(task: GARTask, value: str, answer: str,
                   with_answer: bool = False) -> tuple[str, RoleSpans]:
    """A knowledge-recall line (n_KV = 0, table 2 first row): "Papaya is a kind of" → fruit."""
    schema, _ = task.retrieve.load()
    before, _, after = schema.kr_template.partition("{x}")
    line = _Line()
    if before:
        line.add(before)
        line.add(value, "V")
    else:
        line.add(_capitalize(value), "V")
    line.add(after)
    end = (line.length - 1, line.length)
    if with_answer:
        line.add(" ")
        line.add(answer, "A")
    return line.text, _spans_from_roles(line.roles, end)


def _spans_from_roles(roles: dict[str, list[Span]], end: Span) -> RoleSpans:
    def one(name: str) -> Span | None:
        spans = roles.get(name, [])
        return spans[0] if spans else None
    return RoleSpans(end=end, query=one("Q"), key=one("K"), value=one("V"), answer=one("A"),
                     distractor_keys=tuple(roles.get("K'", [])),
                     distractor_values=tuple(roles.get("V'", [])), negation=one("NOT"))


def candidate_line(schema: Schema, candidates: Sequence[str]) -> str:
    """App. B: "Countries of cities include Spain, Thailand, Italy and Russia." """
    cands = list(candidates)
    if not cands:
        raise WhiteboxError("a candidate list needs at least one candidate")
    joined = cands[0] if len(cands) == 1 else ", ".join(cands[:-1]) + " and " + cands[-1]
    return f"{schema.candidates_intro} {joined}."
