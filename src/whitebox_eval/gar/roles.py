"""Token positions of the relational-loop roles and the attention patterns between them.

Paper 002 names attention patterns ``X→Y`` (sec. 4, tables 6-8): the token ``Y``
*attends to* ``X``; ``V→E`` is the END token attending to V.  This module turns a
:class:`~whitebox_eval.gar.generator.GARExample` into token ids plus the token spans
of every role (:class:`EncodedExample`) and resolves pattern strings on them.

Role names (what :func:`parse_pattern` accepts), on either side of ``->`` / ``→``:

* ``Q``, ``K``, ``V``, ``A``, ``E`` (= ``END``, the last prompt token), ``NOT``;
* ``K'`` / ``V'``: every distractor key / value; ``K'1``, ``V'2``: one of them;
* a ``^`` suffix names the role in the one-shot demonstration (``A^`` is the paper's
  Â: ``A^->E`` is the Ind.2 pattern, ``Q^->A^`` the Rel.2 pattern on the demonstration);
* a ``+`` suffix names the token right after the role (App. D: "X+ ... the position
  immediately next to X").

K, V, A always name the pair the answer comes from (see the generator); the paper's
figures call that pair K', V', A' in negate tasks, so its NRel. pattern ``K'→Q`` is
``K->Q`` here on negate tasks (see :data:`HEAD_CLASSES`).

Choices where the paper is silent: the attending (query) position of a role is the
*last* token of its span (where a multi-token word's information has been gathered;
END is one token anyway); the key side of a pattern is *every* token of the span, so a
matched attention weight sums over the span's tokens and a forced pattern spreads
uniformly over them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from whitebox_eval.tasks.token_spans import char_offsets, span_tokens
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.generator import GARExample
from whitebox_eval.gar.prompts import RoleSpans, Span

_ROLE_RE = re.compile(r"^(?P<base>Q|K|V|A|E|END|NOT|K'|V'|K'\d+|V'\d+)(?P<demo>\^?)(?P<next>\+?)$")


@dataclass(frozen=True)
class HeadClass:
    """A class of heads of sec. 4 / App. D with the attention pattern that defines it."""

    name: str
    pattern: str
    paper_pattern: str
    tasks: str
    description: str


#: the head classes of tables 6-8 with their patterns in this module's role names
HEAD_CLASSES: tuple[HeadClass, ...] = (
    HeadClass("Pred.", "V->E", "V→E (V'→E on negate)", "generation",
              "predicting heads: END retrieves r_retrieve(V)"),
    HeadClass("PPred.", "V->E", "V→E (V'→E on negate)", "generation",
              "pre-predicting heads: attend V like the predicting heads"),
    HeadClass("Loc.2", "Q->E", "Q→E", "generation", "higher-order local heads"),
    HeadClass("Ind.2", "A^->E", "Â→E", "generation",
              "higher-order induction heads: demonstration answer to END"),
    HeadClass("Rel.", "V^->A^", "V̂→Â", "generation", "relating heads on the demonstration"),
    HeadClass("Rel.2", "Q^->A^", "Q̂→Â", "generation",
              "higher-order relating (True/False) heads on the demonstration"),
    HeadClass("Ind.", "V->Q", "V→Q", "generation", "induction heads"),
    HeadClass("NRel.", "K->Q", "K'→Q", "generation [negate]",
              "negative-relating heads: Q attends to the key not related to it"),
    HeadClass("Rel.2 (True/False)", "Q->A", "Q→A", "classification",
              "True/False heads: the stated answer attends to Q"),
)


def head_class(name: str) -> HeadClass:
    """A head class of :data:`HEAD_CLASSES` by name (``Pred.``, ``Loc.2``, ...)."""
    for hc in HEAD_CLASSES:
        if hc.name == name or hc.name.rstrip(".") == name.rstrip("."):
            return hc
    raise WhiteboxError(f"unknown head class {name!r}; choose one of "
                        f"{[hc.name for hc in HEAD_CLASSES]}")


@dataclass(frozen=True)
class Pattern:
    """An attention pattern ``key->query``: the ``query`` role's token attends to ``key``."""

    key: str
    query: str

    @property
    def text(self) -> str:
        return f"{self.key}->{self.query}"


def parse_pattern(text: str) -> Pattern:
    """Read ``"V->E"`` / ``"V→E"`` / ``"A^->E"`` (see the module doc for role names)."""
    parts = re.split(r"\s*(?:->|→)\s*", text.strip())
    if len(parts) != 2 or not all(parts):
        raise WhiteboxError(f"cannot read attention pattern {text!r}: write KEY->QUERY, e.g. "
                            "V->E (END attends to V) or Q->A")
    for role in parts:
        if not _ROLE_RE.match(role):
            raise WhiteboxError(f"unknown role {role!r} in pattern {text!r}; roles are Q, K, V, "
                                "A, E, NOT, K', V', K'1, V'2, with ^ for the demonstration and "
                                "+ for the next token")
    return Pattern(parts[0], parts[1])


@dataclass(frozen=True)
class EncodedExample:
    """A GAR example as the model sees it: token ids, role token spans, answer ids."""

    example: GARExample
    input_ids: tuple[int, ...]
    spans: RoleSpans
    demo_spans: RoleSpans
    answer_ids: dict[str, int] = field(hash=False)

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    def role_tokens(self, role: str) -> list[int] | None:
        """Token positions of ``role`` (module doc), or None when the prompt lacks it."""
        m = _ROLE_RE.match(role)
        if m is None:
            raise WhiteboxError(f"unknown role {role!r}")
        spans = self.demo_spans if m.group("demo") else self.spans
        base = m.group("base")
        chosen: list[tuple[int, int]] = []
        single = {"Q": spans.query, "K": spans.key, "V": spans.value, "A": spans.answer,
                  "E": spans.end, "END": spans.end, "NOT": spans.negation}
        if base in single:
            if single[base] is not None:
                chosen = [single[base]]  # type: ignore[list-item]
        elif base in ("K'", "V'"):
            chosen = list(spans.distractor_keys if base == "K'" else spans.distractor_values)
        else:
            i = int(base[2:]) - 1
            group = spans.distractor_keys if base.startswith("K") else spans.distractor_values
            if 0 <= i < len(group):
                chosen = [group[i]]
        if not chosen:
            return None
        positions = sorted({p for s, e in chosen for p in range(s, e)})
        if m.group("next"):
            positions = [max(positions) + 1]
            if positions[0] >= self.n_tokens:
                return None
        return positions

    def attending_position(self, role: str) -> int | None:
        """The query position of ``role``: the last token of its span."""
        toks = self.role_tokens(role)
        return None if toks is None else max(toks)

    def pattern_cells(self, pattern: Pattern | str) -> tuple[int, list[int]] | None:
        """(attending position, key positions) of ``pattern`` or None when a role is absent.

        Key positions after the attending position are dropped (causal attention);
        None when none is left.
        """
        pat = parse_pattern(pattern) if isinstance(pattern, str) else pattern
        q = self.attending_position(pat.query)
        keys = self.role_tokens(pat.key)
        if q is None or keys is None:
            return None
        keys = [k for k in keys if k <= q]
        return (q, keys) if keys else None


# --------------------------------------------------------------------------- character spans -> tokens


def _char_to_token_span(span: Span, offsets: Sequence[tuple[int, int]], prompt: str,
                        role: str) -> Span:
    s, e = span
    idx = span_tokens(offsets, s, e)
    if not idx:
        raise WhiteboxError(f"span {role} {prompt[s:e]!r} at characters {s}:{e} maps to no "
                            "token; the tokenizer's offsets do not cover it")
    if idx != list(range(idx[0], idx[-1] + 1)):
        raise WhiteboxError(f"span {role} {prompt[s:e]!r} maps to non-contiguous tokens {idx}")
    covered = set()
    for i in idx:
        a, b = offsets[i]
        covered.update(range(max(a, s), min(b, e)))
    gaps = [c for c in range(s, e) if c not in covered and not prompt[c].isspace()]
    if gaps:
        raise WhiteboxError(f"span {role} {prompt[s:e]!r}: characters {gaps} belong to no "
                            "token; this tokenizer's offsets cannot be used")
    return idx[0], idx[-1] + 1


def token_spans(example: GARExample, tokenizer: Any, *, add_special_tokens: bool = True,
                demo: bool = False) -> RoleSpans:
    """Map the example's character spans to token index ranges (half-open).

    Works with any fast tokenizer via ``return_offsets_mapping`` (the paper's reference
    code relied on Llama's tokens).  Token indices count the special tokens the
    tokenizer adds when ``add_special_tokens`` (e.g. BOS), as the model sees them.
    ``end`` becomes the single last token of the prompt.  ``demo=True`` maps the
    demonstration's spans instead.  Raises WhiteboxError when a span cannot be mapped.
    """
    offsets = char_offsets(tokenizer, example.prompt, add_special_tokens=add_special_tokens)[1]
    spans = example.demo_spans if demo else example.spans

    def conv(name: str, span: Span | None) -> Span | None:
        return None if span is None else _char_to_token_span(span, offsets, example.prompt, name)

    end = conv("END", spans.end)
    assert end is not None
    last = end[1] - 1
    return RoleSpans(
        end=(last, last + 1), query=conv("Q", spans.query), key=conv("K", spans.key),
        value=conv("V", spans.value), answer=conv("A", spans.answer),
        distractor_keys=tuple(conv(f"K'{i}", s) for i, s in enumerate(spans.distractor_keys, 1)),
        distractor_values=tuple(conv(f"V'{i}", s)
                                for i, s in enumerate(spans.distractor_values, 1)),
        negation=conv("NOT", spans.negation))


def answer_token_ids(example: GARExample, tokenizer: Any, *,
                     add_special_tokens: bool = True) -> dict[str, int]:
    """First token id of each alternative as it continues the prompt (App. C rule).

    The prompt plus " " + alternative is tokenized together, so tokenizers that mark
    word starts (SentencePiece "▁", byte-level "Ġ") give the in-context token.  Raises
    WhiteboxError when the tokenizer merges the answer with the prompt's last token or
    emits the separating space as a token of its own.
    """
    out: dict[str, int] = {}
    n = len(example.prompt)
    for alt in example.alternatives:
        text = example.prompt + " " + alt
        offsets = char_offsets(tokenizer, text, add_special_tokens=add_special_tokens)[1]
        enc = tokenizer(text, add_special_tokens=add_special_tokens)
        ids = enc["input_ids"]
        first = next((i for i, (a, b) in enumerate(offsets) if b > a and b > n), None)
        if first is None or offsets[first][0] < n:
            raise WhiteboxError(f"the tokenizer merges the answer {alt!r} with the end of the "
                                "prompt; its first answer token cannot be isolated")
        a, b = offsets[first]
        if not text[a:b].strip():
            raise WhiteboxError(f"the tokenizer emits the space before {alt!r} as a token of its "
                                "own, so the answer's first-token probability (App. C) is not "
                                "defined; use a tokenizer with word-initial tokens")
        out[alt] = int(ids[first])
    return out


def encode_example(example: GARExample, tokenizer: Any) -> EncodedExample:
    """Tokenize the prompt (with the tokenizer's special tokens, as the engine does),
    map every role to token spans and find each alternative's first token (App. C)."""
    ids = tokenizer(example.prompt, add_special_tokens=True)["input_ids"]
    return EncodedExample(example=example, input_ids=tuple(int(i) for i in ids),
                          spans=token_spans(example, tokenizer),
                          demo_spans=token_spans(example, tokenizer, demo=True),
                          answer_ids=answer_token_ids(example, tokenizer))


def encode_examples(examples: Sequence[GARExample], tokenizer: Any) -> list[EncodedExample]:
    return [encode_example(e, tokenizer) for e in examples]
