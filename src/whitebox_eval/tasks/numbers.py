"""Reading a number from a model's free answer: the one place that does (paper 001 App. A.6,
paper 004 sec. 2.4.1, GSM8K).

Two readings of a written number: 004's (:func:`first_number`: sign, thousands separators in
groups of three, a decimal part; integral values as ``int``) and a response's (:func:`to_number`:
also ``$`` and loose separators, as a float). :func:`extract_number` takes a rule: ``paper`` (004's
first number), ``last-number``, ``after-equals`` (:data:`EXTRACTORS`, the formats study's
``--extract``), ``arithmetic`` (the first number after the last ``=``, else the first: the
arithmetic answer check) and ``final`` (GSM8K's final answer).
"""

from __future__ import annotations

import re

from whitebox_eval.errors import WhiteboxError

_NUMBER = re.compile(r"[-\u2212]?\d+(?:,\d{3})*(?:\.\d+)?")  # 004's reading
_NUM = re.compile(r"[-\u2212]?\$?\d[\d,]*(?:\.\d+)?")  # a response's reading


def to_number(s: str) -> float | None:
    """A number written with optional sign, ``$`` and thousands separators, or None."""
    s = s.replace("\u2212", "-").replace("$", "").replace(",", "").rstrip(".")
    try:
        return float(s)
    except ValueError:
        return None


def final_number(text: str) -> float | None:
    """The final answer of a GSM8K-style response.

    The number after the last ``####``, else after the last "answer is", else the
    last number in the text (thousands separators and ``$`` ignored). None if none.
    """
    for marker in ("####", "answer is"):
        idx = text.lower().rfind(marker)
        if idx >= 0:
            m = _NUM.search(text[idx + len(marker):])
            if m:
                return to_number(m.group(0))
    found = _NUM.findall(text)
    return to_number(found[-1]) if found else None


def arithmetic_answer(text: str) -> float | None:
    """The answer of an arithmetic response: the first number after the last ``=`` when the
    response restates the expression (``"1 + 9 = 10"``), else the first number (004 sec. 2.4.1)."""
    if "=" in text:
        m = _NUM.search(text[text.rfind("=") + 1:])
        if m:
            return to_number(m.group(0))
    m = _NUM.search(text)
    return to_number(m.group(0)) if m else None


def first_number(text: str) -> int | float | None:
    """The first number in a generation (004 sec. 2.4.1, arithmetic), or None.

    Accepts a leading ``-`` (or Unicode minus), thousands separators ``6,237`` and a
    decimal part; integral values come back as ``int``.
    """
    m = _NUMBER.search(text)
    return None if m is None else _as_number(m.group(0))


def _as_number(s: str) -> int | float:
    s = s.replace("\u2212", "-").replace(",", "")
    if "." in s:
        v = float(s)
        return int(v) if v.is_integer() else v
    return int(s)


#: Answer extraction rules for arithmetic: ``paper`` is 004 sec. 2.4.1 ("take the first
#: number"); the stricter ones read "9 + 2 = 11" as 11: ``last-number`` takes the last
#: number of the (one-line) answer, ``after-equals`` the first number after its last
#: ``=`` (the paper's rule when there is no ``=``).
EXTRACTORS = ("paper", "last-number", "after-equals")


RULES = (*EXTRACTORS, "arithmetic", "final")


def extract_number(text: str, rule: str = "paper") -> int | float | None:
    """The answer number of a generation under one of :data:`RULES`, or None."""
    if rule == "paper":
        return first_number(text)
    if rule == "last-number":
        found = _NUMBER.findall(text)
        return _as_number(found[-1]) if found else None
    if rule == "after-equals":
        return first_number(text.rsplit("=", 1)[-1])
    if rule == "arithmetic":
        return arithmetic_answer(text)
    if rule == "final":
        return final_number(text)
    raise WhiteboxError(f"unknown answer extraction rule {rule!r}; choose one of {', '.join(RULES)}")
