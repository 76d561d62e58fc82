"""Answer normalisation shared by data sources and metrics (paper 004 sec. 2.4.1)."""

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
