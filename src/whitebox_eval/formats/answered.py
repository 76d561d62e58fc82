"""Paper 004's numbers among the answers (an off-format generation is its own class, never
an error): per question, P(correct) among the generations that answered (``p_correct_answered``,
None for a question with no answer, :mod:`whitebox_eval.formats.answers`), and per run the
off-format share and what 004's per-question analyses become on those values.

:func:`answered_results` is what ``finalize_formats`` writes; :func:`complete` is the formats
record's read-back (``Suite.read_back``): a finished run written before a key derives it from its
samples' texts when read, adding missing keys only (its folder untouched, no written value changed).

Per free format ``f``: ``off_format,{f}`` (Wilson over generations), ``n_unanswered,{f}``,
``p_correct_answered,{f}`` (bootstrap over the questions with an answer); and over the questions
whose free generations answered at least once: ``pearson_answered,mcq~free`` (004 Table 1's r,
bootstrap over questions) and ``mcq_by_free_answered`` (004 Tables 2-3's partition at 0.5 with its
permutation ``test``). A question with no answer is left out of both and counted (``n_unanswered,free``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.formats.answers import answered_p_correct, classes_of
from whitebox_eval.formats.config import FREE_FORMATS

PEARSON = "pearson_answered,mcq~free"
PARTITION = "mcq_by_free_answered"


def answer_type_of(samples: Sequence[Mapping[str, Any]]) -> str:
    """``number`` where the gold answer is a number (arithmetic), else ``text``."""
    return "number" if samples and isinstance(samples[0]["answer"], (int, float)) else "text"


def per_question(sample: Mapping[str, Any], answer_type: str, extract: str = "paper") -> dict[str, float | None]:
    """One question's P(correct) among its answers per free format (None: no generation answered)."""
    return {f: answered_p_correct(classes_of(sample, f, answer_type, extract)) for f in FREE_FORMATS
            if f in (sample.get("generations") or {})}


def answered_results(samples: Sequence[Mapping[str, Any]], answer_type: str, extract: str = "paper") -> dict[str, Any]:
    """The results keys of the module docstring, from the samples' generations."""
    from whitebox_eval.formats.metrics import correlation_or_reason, format_correlation, mcq_by_free_partition

    out: dict[str, Any] = {}
    for f in FREE_FORMATS:
        classes = [classes_of(s, f, answer_type, extract) for s in samples]
        stats.add_proportion(out, f"off_format,{f}", [c == "off_format" for cs in classes for c in cs])
        answered = [v for v in map(answered_p_correct, classes) if v is not None]
        out[f"n_unanswered,{f}"] = len(classes) - len(answered)
        if answered:
            stats.add_mean(out, f"p_correct_answered,{f}", answered)
    pairs = [(float(s["p_correct"]["mcq"]), v) for s in samples
             if (v := answered_p_correct(classes_of(s, "free", answer_type, extract))) is not None]
    mcq, free = (np.array([p[i] for p in pairs], dtype=np.float64) for i in (0, 1))
    r, reason = correlation_or_reason(mcq, free, ("mcq", "free among the answers")) if mcq.size >= 2 else (
        None, f"{mcq.size} questions with an answer")
    if r is None:
        out[PEARSON], out[stats.derived_key(PEARSON, "reason")] = None, reason
    else:
        est, undefined = stats.bootstrap_pairs(mcq, free, format_correlation)
        stats.add_estimate(out, PEARSON, est)
        if undefined:
            out[stats.derived_key(PEARSON, "undefined_resamples")] = undefined
    out[PARTITION] = mcq_by_free_partition(mcq, free)
    out[PARTITION]["n_unanswered"] = len(samples) - len(pairs)
    hi, lo = mcq[free >= 0.5], mcq[free < 0.5]
    if hi.size >= 2 and lo.size >= 2:
        out[PARTITION]["test"] = stats.permutation_test(hi, lo).as_dict()
    return out


def complete(results: dict[str, Any], samples: list[dict[str, Any]], config: Mapping[str, Any]) -> None:
    """The read-back of a finished formats run: each sample gains ``p_correct_answered`` and the
    results the keys of :func:`answered_results` where they are missing (a run written before them);
    a value the run wrote is never replaced."""
    if not samples or not all("generations" in s and "p_correct" in s for s in samples):
        return
    extract = str(results.get("extract") or config.get("extract") or "paper")
    answer_type = answer_type_of(samples)
    for s in samples:
        s.setdefault("p_correct_answered", per_question(s, answer_type, extract))
    keys = ("off_format,free", "p_correct_answered,free", PEARSON, PARTITION)
    if all(k in results for k in keys):
        return
    for key, value in answered_results(samples, answer_type, extract).items():
        results.setdefault(key, value)
