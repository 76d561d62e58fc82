"""Answer checks: whether a free response answers an item (paper 001 App. A.6, paper 004 sec. 2.4.1).

A task's record names its check (:class:`~whitebox_eval.tasks.registry.Generation`), your own
generation file takes one with ``--answer``; :func:`is_correct` applies it to a
:class:`~whitebox_eval.tasks.generation.GenItem` and a response:

- ``number`` (arithmetic): the first number after the last ``=`` when the response restates
  the expression (``"1 + 9 = 10"``), else the first number (004 sec. 2.4.1);
- ``final_number`` (GSM8K): the number after the last ``####``, else after the last "answer
  is", else the last number (thousands separators and ``$`` ignored), equal to the gold;
- ``choice`` (lettered options): the option label read from the response
  (:func:`choice_from_response`) is the gold label;
- ``exact``: the response (its first line) equals a reference after the TriviaQA
  normalisation of both (lowercase, punctuation, articles a/an/the, whitespace; 004 sec. 2.4.1);
- ``numeric``: the response's final number (as ``final_number``) equals a reference that is a
  number (within 1e-6 relative, for decimals);
- ``contains``: a normalised reference occurs in the normalised response as whole words;
- ``regex:PATTERN``: the first match of PATTERN in the response (its first group if it has
  one) equals a reference after normalisation;
- ``lm-eval``: lm-eval's own filters and metrics (:mod:`.lm_eval_generation`), not here;
- ``execution``: the response runs against the item's tests (HumanEval, :mod:`.humaneval`), not here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.answers import normalize_answer
from whitebox_eval.tasks.numbers import arithmetic_answer, final_number, to_number

def choice_from_response(response: str, labels: Sequence[str], options: Sequence[str] = ()) -> str | None:
    """The option label a response picks, or None.

    In order: a label at the start (``"B"``, ``"B."``, ``"(B)"``, ``"B)"``); a label
    after "answer is" / "answer:"; a line that is exactly one option's text; the first
    standalone capital label anywhere (``"... is C."``).
    """
    text = response.strip()
    labs = "".join(re.escape(lab) for lab in labels)
    if not labs:
        return None
    m = re.match(rf"^\(?([{labs}])(?:[.):,\s]|$)", text)
    if m:
        return m.group(1)
    m = re.search(rf"answer(?: is|:)\s*(?:option\s*)?\(?([{labs}])\b", text, flags=re.IGNORECASE)
    if m and m.group(1) in labels:
        return m.group(1)
    norm = " ".join(text.split()).rstrip(".").lower()
    for lab, opt in zip(labels, options):
        if norm and norm == " ".join(opt.split()).rstrip(".").lower():
            return lab
    m = re.search(rf"(?<![A-Za-z])([{labs}])(?![A-Za-z])", text)
    return m.group(1) if m else None


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0]


def _same_number(value: float | None, references: Sequence[str]) -> bool:
    if value is None:
        return False
    for ref in references:
        r = to_number(ref.strip())
        if r is not None and abs(value - r) <= 1e-6 * max(1.0, abs(r)):
            return True
    return False


def matches(check: str, response: str, references: Sequence[str]) -> bool:
    """Whether ``response`` matches one of ``references`` under a text check (exact, numeric,
    contains, regex:PATTERN; module docstring)."""
    refs = [normalize_answer(r) for r in references]
    if check == "exact":
        return normalize_answer(_first_line(response)) in refs
    if check == "numeric":
        return _same_number(final_number(response), references)
    if check == "contains":
        said = f" {normalize_answer(response)} "
        return any(r and f" {r} " in said for r in refs)
    if check.startswith("regex:"):
        m = re.search(check[len("regex:"):], response)
        if m is None:
            return False
        found = m.group(1) if m.re.groups and m.group(1) is not None else m.group(0)
        return normalize_answer(found) in refs
    raise WhiteboxError(f"unknown answer check {check!r}")


def is_correct(item, response: str) -> bool:
    """Whether ``response`` answers ``item`` (a :class:`~whitebox_eval.tasks.generation.GenItem`)
    by its task's check (module docstring)."""
    check = item.check
    if check == "number":
        v = arithmetic_answer(response)
        return v is not None and v == float(item.gold)
    if check == "final_number":
        v = final_number(response)
        return v is not None and abs(v - float(item.gold)) < 1e-6
    if check == "choice":
        return choice_from_response(response, item.labels, item.options) == item.gold
    if check == "lm-eval":
        raise WhiteboxError("an lm-eval task is checked by its own filters and metrics (tasks.lm_eval_generation)")
    if check == "execution":
        raise WhiteboxError("a HumanEval completion is checked by running its tests (tasks.humaneval)")
    return matches(check, response, item.references)
