"""Prompt rendering with character spans of every option part.

Formats (``fmt``):

* ``"mcq"`` — paper 000 App. A.3, Listings 6-8 (the default)::

      [Context: {context}\\n]
      Question: {question}?\\n
      Options:\\n
      A. {option A} .\\n
      ...
      E. I don't know .\\n
      F. None of the above .\\n
      Answer:

  "each question ends with question mark, and each choice ends with point" (App. A.3):
  a question not ending in ``?`` gets one appended; an option not ending in ``.`` gets
  ``" ."`` appended (Listing 6 writes ``A._{Text}_.``), an option already ending in
  ``.`` is left as is (Listings 2-3 show such options once-terminated). The two
  uncertainty options take the next labels after the essential ones (App. H: with ten
  options they are ``K`` and ``L``), are never shuffled and never gold (sec. 5.1, 5.3).
* ``"mcq_plain"`` — paper 004 App. A.2 "MCQs": ``Question: ..\\nA. 130\\n...Answer:``.
* ``"free"`` — paper 004 App. A.2 "Free-Generation": ``Question: ..\\nAnswer:``.
* ``"free_options"`` — paper 004 App. A.2 "Free-Generation with answers options":
  ``Question: ..\\nHere are some possible answers:\\n130\\n...\\nAnswer:``.

Demonstrations (paper 000 sec. 5.3) are rendered in the same format with the answer
after ``Answer:`` as a single space then the label (``"Answer: A"``, never without the
space; App. A.3) or, in free formats, the gold text; items are separated by single line
breaks. The prompt ends with ``Answer:`` and no trailing whitespace.

Choices where the papers are silent (all parameters): uncertainty options default to on
for ``"mcq"`` and off for paper 004's formats (004 has none); line breaks inside a
question or option are replaced by a space so each option stays on one line; an
optional ``instruction`` line precedes the demonstrations (neither paper uses one).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem

#: Label symbol sets (paper 000 sec. 5.1, App. H fig. 25-26: "ABCD", "$&#..", "ptgU"),
#: plus digits and lower-case letters. Each has 26 labels: 24 essential + 2 uncertainty.
LABEL_SETS: dict[str, tuple[str, ...]] = {
    "letters": tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    "symbols": ("$", "&", "#", "@", "%", "*", "+", "=", "~", "^", "!", "?", "<", ">",
                "|", "/", ";", "(", ")", "[", "]", "{", "}", "-", "_", "`"),
    "arbitrary": tuple("ptgUkRmwEyLbqZdHnJcVfXsOiA"),
    "digits": tuple(str(i) for i in range(1, 27)),
    "lowercase": tuple("abcdefghijklmnopqrstuvwxyz"),
}

#: Uncertainty options appended after the essential ones, in the order of App. A.2/A.3.
UNCERTAINTY_OPTIONS: tuple[str, str] = ("I don't know", "None of the above")

FORMATS: tuple[str, ...] = ("mcq", "mcq_plain", "free", "free_options")

_FORMAT_DEFAULTS = {  # fmt -> (uncertainty, ensure_question_mark)
    "mcq": (True, True),
    "mcq_plain": (False, False),
    "free": (False, False),
    "free_options": (False, False),
}


@dataclass(frozen=True)
class Span:
    """Half-open character range ``[start, end)`` of a prompt string."""

    start: int
    end: int

    def of(self, text: str) -> str:
        """The characters this span covers in ``text``."""
        return text[self.start:self.end]


@dataclass(frozen=True)
class OptionSpans:
    """Character spans of one option line (paper 000 fig. 2a option-representative tokens).

    ``label``/``label_sep`` are None in ``free_options`` (no labels); ``content_end`` is
    the period after the content in ``"mcq"`` and None where the format has none.
    """

    index: int
    label: Span | None
    label_sep: Span | None
    content: Span
    content_end: Span | None
    eol: Span
    is_uncertainty: bool


@dataclass
class RenderedPrompt:
    """A rendered prompt plus where everything sits in it.

    Attributes:
        text: the full prompt, ending with ``Answer:``.
        prefix_len: length of the shared prefix (instruction + demonstrations);
            ``text[:prefix_len]`` is identical for every item rendered with the same
            demonstrations and settings, so its key/value cache can be reused.
        fmt: the format name.
        item_id: the query item's id.
        labels: labels of the query's options (essential, then uncertainty).
        answer_strings: what follows ``Answer:`` for each option: ``" A"`` in MCQ
            formats, ``" " + content`` in free formats.
        options: spans of the query's option lines (empty for ``"free"``).
        n_essential: number of essential options (the rest are uncertainty options).
        gold: index of the correct option (always < ``n_essential``).
        question: span of the question text (after ``"Question: "``).
        context: span of the context text, if the item has one.
        answer_cue: span of the final ``Answer:``.
    """

    text: str
    prefix_len: int
    fmt: str
    item_id: str
    labels: list[str]
    answer_strings: list[str]
    options: list[OptionSpans]
    n_essential: int
    gold: int
    question: Span
    context: Span | None
    answer_cue: Span

    @property
    def prefix(self) -> str:
        """The shared prefix (instruction + demonstrations)."""
        return self.text[:self.prefix_len]

    @property
    def gold_answer(self) -> str:
        """The continuation after ``Answer:`` that is correct (e.g. ``" B"`` or ``" 97"``)."""
        return self.answer_strings[self.gold]


def option_labels(n: int, labels: str | Sequence[str] = "letters") -> list[str]:
    """The first ``n`` labels of a named label set (see LABEL_SETS) or of a given sequence."""
    if isinstance(labels, str):
        if labels not in LABEL_SETS:
            raise WhiteboxError(
                f"unknown label set {labels!r}; choose one of {sorted(LABEL_SETS)} "
                "or pass a sequence of label strings")
        pool: Sequence[str] = LABEL_SETS[labels]
    else:
        pool = list(labels)
        if len(set(pool)) != len(pool) or any(not str(x) or "\n" in str(x) for x in pool):
            raise WhiteboxError("custom labels must be distinct, non-empty, single-line strings")
    if n > len(pool):
        raise WhiteboxError(
            f"{n} options need {n} labels but the label set has only {len(pool)}; "
            "use fewer options, drop the uncertainty options, or give a longer label set")
    return [str(x) for x in pool[:n]]


def answer_strings(labels: Sequence[str]) -> list[str]:
    """Answer labels as written after ``Answer:`` — one space then the label (App. A.3)."""
    return [" " + str(label) for label in labels]


def _one_line(text: str) -> str:
    return re.sub(r"\s*[\r\n]+\s*", " ", text).strip()


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pos = 0

    def add(self, s: str) -> Span:
        self.parts.append(s)
        start = self.pos
        self.pos += len(s)
        return Span(start, self.pos)

    def text(self) -> str:
        return "".join(self.parts)


@dataclass
class _Block:
    labels: list[str]
    options: list[OptionSpans]
    question: Span
    context: Span | None
    answer_cue: Span


def _write_item(w: _Writer, item: MCQItem, fmt: str, labels: str | Sequence[str],
                uncertainty: bool, ensure_qmark: bool) -> _Block:
    """Write one item up to and including ``Answer:`` (no trailing whitespace)."""
    context_span = None
    if item.context is not None and item.context.strip():
        w.add("Context: ")
        context_span = w.add(item.context.strip())
        w.add("\n")
    question = _one_line(item.question)
    if ensure_qmark and not question.endswith("?"):
        question += "?"
    w.add("Question: ")
    q_span = w.add(question)
    w.add("\n")
    contents = [_one_line(o) for o in item.options]
    n_ess = len(contents)
    if uncertainty:
        contents += list(UNCERTAINTY_OPTIONS)
    labs: list[str] = []
    spans: list[OptionSpans] = []
    if fmt == "free":
        pass
    elif fmt == "free_options":
        w.add("Here are some possible answers:\n")
        for i, c in enumerate(contents):
            cs = w.add(c)
            eol = w.add("\n")
            spans.append(OptionSpans(i, None, None, cs, None, eol, i >= n_ess))
    else:
        labs = option_labels(len(contents), labels)
        if fmt == "mcq":
            w.add("Options:\n")
        for i, (lab, c) in enumerate(zip(labs, contents)):
            ls = w.add(lab)
            sep = w.add(".")
            w.add(" ")
            if fmt == "mcq":
                if c.endswith("."):
                    body = c[:-1]
                    stripped = body.rstrip()
                    cs = w.add(stripped)
                    w.add(body[len(stripped):])
                    end = w.add(".")
                else:
                    cs = w.add(c)
                    w.add(" ")
                    end = w.add(".")
            else:
                cs = w.add(c)
                end = None
            eol = w.add("\n")
            spans.append(OptionSpans(i, ls, sep, cs, end, eol, i >= n_ess))
    cue = w.add("Answer:")
    return _Block(labs, spans, q_span, context_span, cue)


def render_prompt(item: MCQItem, *, fmt: str = "mcq", demos: Sequence[MCQItem] = (),
                  labels: str | Sequence[str] = "letters", uncertainty: bool | None = None,
                  ensure_question_mark: bool | None = None,
                  instruction: str | None = None) -> RenderedPrompt:
    """Render ``item`` (after ``demos``) in one of FORMATS; see the module docstring.

    Args:
        item: the query item (validated here).
        fmt: ``"mcq"`` (paper 000 App. A.3), ``"mcq_plain"``, ``"free"``,
            ``"free_options"`` (paper 004 App. A.2).
        demos: demonstrations (:func:`whitebox_eval.tasks.demos.select_demos`).
        labels: a LABEL_SETS name or a sequence of label strings.
        uncertainty: append "I don't know" / "None of the above"; None = the format's
            default (on for ``"mcq"``, off otherwise).
        ensure_question_mark: append ``?`` to questions lacking one; None = format default
            (on for ``"mcq"``).
        instruction: optional first line, part of the shared prefix.
    """
    if fmt not in FORMATS:
        raise WhiteboxError(f"unknown prompt format {fmt!r}; choose one of {list(FORMATS)}")
    default_unc, default_q = _FORMAT_DEFAULTS[fmt]
    unc = default_unc if uncertainty is None else bool(uncertainty)
    qmark = default_q if ensure_question_mark is None else bool(ensure_question_mark)
    if fmt == "free" and unc:
        raise WhiteboxError("the 'free' format shows no options, so it cannot add uncertainty options; "
                            "use uncertainty=False or fmt='free_options'")
    item.validate()
    w = _Writer()
    if instruction:
        w.add(_one_line(instruction) + "\n")
    for demo in demos:
        demo.validate()
        block = _write_item(w, demo, fmt, labels, unc, qmark)
        if fmt in ("mcq", "mcq_plain"):
            w.add(answer_strings(block.labels)[demo.gold])
        else:
            w.add(" " + _one_line(demo.gold_text))
        w.add("\n")
    prefix_len = w.pos
    block = _write_item(w, item, fmt, labels, unc, qmark)
    text = w.text()
    if fmt in ("mcq", "mcq_plain"):
        answers = answer_strings(block.labels)
    else:
        answers = [" " + _one_line(o) for o in item.options]
        if unc:
            answers += [" " + u for u in UNCERTAINTY_OPTIONS]
    return RenderedPrompt(text=text, prefix_len=prefix_len, fmt=fmt, item_id=item.id,
                          labels=block.labels, answer_strings=answers, options=block.options,
                          n_essential=len(item.options), gold=item.gold, question=block.question,
                          context=block.context, answer_cue=block.answer_cue)
