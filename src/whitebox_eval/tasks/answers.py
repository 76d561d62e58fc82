"""Answer normalisation shared by data sources and metrics (paper 004 sec. 2.4.1), and what the
suites that classify answers share (an answer is right, wrong or off-format)."""

from __future__ import annotations

import re
import string
import unicodedata

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _is_punctuation(ch: str) -> bool:
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def normalize_answer(text: str) -> str:
    """Lowercase, punctuation to spaces, drop articles a/an/the, collapse whitespace.

    The TriviaQA evaluation normalisation that 004 sec. 2.4.1 follows (via Touvron et
    al. 2023). Punctuation (ASCII and Unicode ``P*``) becomes a space, as in the
    official TriviaQA script, so "rock-and-roll" matches "rock and roll".
    """
    t = text.lower().replace("_", " ")
    t = "".join(" " if _is_punctuation(ch) else ch for ch in t)
    t = _ARTICLES.sub(" ", t)
    return " ".join(t.split())


ANSWER_CLASSES = ("right", "wrong", "off_format")
"""An answer's classes: off-format (no answer at all) is its own, never folded into wrong
(:mod:`whitebox_eval.formats.answers` for 004, :mod:`whitebox_eval.mui.answer_classes` for 001)."""

#: openings that decline to answer rather than name one (compared after normalisation, 004 sec. 2.4.1)
REFUSALS = ("I don't know", "I do not know", "I'm not sure", "I am not sure", "I cannot answer", "I can't answer",
            "I am unable", "I'm unable", "I have no idea", "No idea", "As an AI")


def is_refusal(norm: str) -> bool:
    """Whether a normalised answer is, or opens with, one of :data:`REFUSALS` (normalised alike)."""
    return any(norm == r or norm.startswith(r + " ") for r in map(normalize_answer, REFUSALS))


def no_answer(norm: str) -> bool:
    """Whether a normalised free-text answer holds no answer: nothing left, or a refusal (the off-format
    rule of a text answer, in paper 004's formats and in the MUI answer classes alike)."""
    return not norm or is_refusal(norm)


def off_format_share(flags, definition: str) -> dict:
    """The off-format block, one shape in every paper (001's responses, 002's wrong outputs, 004's
    generations): ``n`` off-format of ``of``, the share ``value`` with its Wilson interval (``lo``, ``hi``,
    ``method``) and the class's ``definition``. ``flags``: one bool per answer (at least one)."""
    from whitebox_eval import stats

    flags = [bool(f) for f in flags]
    est = stats.proportion(flags)
    return {"n": sum(flags), "of": len(flags), "value": est.value, "lo": est.lo, "hi": est.hi,
            "method": est.method, "definition": definition}
