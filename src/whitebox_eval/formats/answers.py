"""What one answer of paper 004 is: right, wrong, or off-format (no answer at all).

004 scores each of a question's sampled generations by exact match (sec. 2.4: "the fraction of
exact matches"; sec. 2.4.1: arithmetic takes "the first number in the sampled response", TriviaQA
normalises the text up to its first "." or newline) and says nothing of a generation that holds
no answer to match; its fraction counts one as not correct. Here such a generation is its own
class, ``off_format``, counted and reported beside P(correct), never folded into ``wrong``:

- ``number`` answers (arithmetic): the run's extraction rule (``--extract``, by default 004's first
  number) reads no number -- an empty or whitespace-only text, words only ("Styloseness");
- ``text`` answers (TriviaQA): nothing is left after 004's normalisation (an empty text, " The",
  punctuation), or the answer is a refusal (:data:`REFUSALS`: "I don't know", ...).

A generation that matches the gold is ``right`` before anything else (a gold answer may itself read
like a refusal). A generation that names a wrong answer, or in the options format an answer that is
none of the listed options, is ``wrong``: it is an answer (as paper 002's off-candidate errors).

The first-token (MCQ) answer is off-format when the top next token over the whole vocabulary is no
option letter (``top_is_letter`` false); its off-format part is the next-token mass outside the
letters, ``1 - letter_mass``: the headline P(correct) is renormalised over the letters, so that mass
is already left out of its right and wrong alike (the raw P(correct) counts it as not correct).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError

from whitebox_eval.tasks.answers import ANSWER_CLASSES as CLASSES, REFUSALS, is_refusal, no_answer  # noqa: F401  (shared with mui)

DEFINITION = ("off-format: a generation with no answer to score -- arithmetic: the extraction rule reads no number; "
              "TriviaQA: nothing left after 004's normalisation, or a refusal (I don't know, ...); "
              "MCQ: a top next token that is no option letter (the mass outside the letters left out by renormalising)")


def off_format(text: str, answer_type: str, extract: str = "paper") -> bool:
    """Whether a generation holds no answer at all (the module's definition)."""
    from whitebox_eval.formats.metrics import extract_number, normalize_generation

    if answer_type == "number":
        return extract_number(text, extract) is None
    if answer_type != "text":
        raise WhiteboxError(f"answer_type must be 'text' or 'number'; got {answer_type!r}")
    return no_answer(normalize_generation(text))


def answer_class(text: str, gold: Any, answer_type: str, extract: str = "paper") -> str:
    """``right`` (004's exact match: the number, or the normalised text against the gold and its
    aliases, the gold normalised alike), else ``off_format`` (:func:`off_format`), else ``wrong``."""
    from whitebox_eval.formats.metrics import exact_match, number_match

    right = (number_match(text, gold, extract) if answer_type == "number"
             else exact_match(text, gold, truncate_gold=True))
    if right:
        return "right"
    return "off_format" if off_format(text, answer_type, extract) else "wrong"


def classes_of(sample: Mapping[str, Any], fmt: str, answer_type: str, extract: str = "paper") -> list[str]:
    """One sample's class per generation of format ``fmt``, classified from its texts (a run written
    before the class kept its generations: it is reclassified so, nothing re-run)."""
    gold = sample["answer"]
    return [answer_class(t, gold, answer_type, extract) for t in sample["generations"][fmt]]


def answered_p_correct(classes: Sequence[str]) -> float | None:
    """P(correct) among the generations that answered: right / (right + wrong); None when every
    generation is off-format (the item has no answer to score)."""
    answered = [c for c in classes if c != "off_format"]
    return float(np.mean([c == "right" for c in answered])) if answered else None
