"""What a reproduction reads of paper 004's children beyond their summaries (the record's
``statistics``).

- ``answered_vs_mcq``: free-generation P(correct) among the generations that answered (format
  ``format``: ``free`` or ``free_options``) minus the MCQ first-token P(correct) renormalised over
  the letters, paired bootstrap over the questions that answered at least once. Off-format
  generations (:mod:`whitebox_eval.formats.answers`: no answer at all) are their own class, left
  out of right and wrong alike, as the MCQ side leaves out its mass outside the letters; their share
  (Wilson, over generations), the questions without any answer and the MCQ's mass outside the
  letters are reported beside. Each generation is classified from its text, so a child written
  before the class is read alike (and says so); its written P(correct) must be the samples' share
  right of all generations. The questions whose MCQ top token is no letter (:func:`top_token_no_letter`)
  are read from each sample's ``top_is_letter``, or from the letters' mass where a run written before
  it leaves no other token room to be on top; else "not recorded by this run".

``kit`` is the reproduction's readers (``arm``, ``arm_of``, ``answer_key``, ``record``, ``Missing``),
so this module imports none of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.formats.answered import answer_type_of
from whitebox_eval.formats.answers import DEFINITION, answered_p_correct, classes_of
from whitebox_eval.formats.config import FREE_FORMATS
from whitebox_eval.tasks.answers import off_format_share


def answered_vs_mcq(study, spec: Mapping[str, Any], kit) -> dict[str, Any]:
    """The paired test (value, interval, p), its two arms on the shared questions, the per-question
    counts of right, wrong and off-format generations as its observations, and ``off_format``."""
    fmt = str(spec.get("format", "free"))
    if fmt not in FREE_FORMATS:
        raise kit.Missing(f"no free format {fmt!r}; the child generates in {', '.join(FREE_FORMATS)}")
    cfg = getattr(study, "config", None) or {}
    extract = str(cfg.get("extract", "paper"))
    samples = [s for s in study.samples if (s.get("generations") or {}).get(fmt)]
    if not samples:
        raise kit.Missing(f"no sample keeps its {fmt} generations")
    answer_type = answer_type_of(samples)
    reclassified = any("classes" not in s for s in samples)
    classes = {}
    for s in samples:
        cls = classes_of(s, fmt, answer_type, extract)
        if not reclassified and s["classes"][fmt] != cls:
            raise kit.Missing(f"question {s['id']}: the child wrote classes {s['classes'][fmt]}, its texts read {cls}")
        if abs(float(s["p_correct"][fmt]) - float(np.mean([c == "right" for c in cls]))) > 1e-12:
            raise kit.Missing(f"question {s['id']}: the child wrote {fmt} P(correct) {s['p_correct'][fmt]}, "
                              f"its texts give {np.mean([c == 'right' for c in cls])}")
        classes[str(s["id"])] = cls
    answered = {i: v for i, v in ((i, answered_p_correct(c)) for i, c in classes.items()) if v is not None}
    rows = [s for s in samples if str(s["id"]) in answered]
    if len(rows) < 2:
        raise kit.Missing(f"{len(rows)} questions have an answer in {fmt}")
    x = np.array([answered[str(s["id"])] for s in rows])
    y = np.array([float(s["p_correct"]["mcq"]) for s in rows])
    out = dict(kit.record(stats.paired_bootstrap(x, y), f"samples.jsonl {fmt} generations, classified "
                          f"(formats/answers.py), vs p_correct.mcq"))
    flags = [c == "off_format" for cls in classes.values() for c in cls]
    share = off_format_share(flags, DEFINITION)
    unanswered = sorted(set(classes) - set(answered))
    out["off_format"] = {**share, "questions_without_answer": len(unanswered), "of_questions": len(classes),
                         "mcq_mass_outside_letters": float(np.mean([1 - float(s["mcq"]["letter_mass"]) for s in samples])),
                         "mcq_top_token_no_letter": top_token_no_letter(samples, int(cfg.get("n_options") or 4))}
    out["source"] += (f" ({sum(flags)} of {len(flags)} generations off-format, {share['value']:.1%} "
                      f"[{share['lo']:.1%}, {share['hi']:.1%}] (Wilson), counted apart; "
                      f"{len(unanswered)} questions without an answer left out"
                      f"{'; reclassified from their texts' if reclassified else ''})")
    a = kit.arm_of(f"free generation ({fmt}) P(correct) among its answers", {str(s["id"]): float(v) for s, v in zip(rows, x)})
    options = {"answers": "options", "options": int(cfg.get("n_options") or 4), "gold": "gold"}
    key = options if fmt == "free_options" else {"answers": "free", "gold": "answer"}  # listed options: 1/K to guess
    a["answers"] = {str(s["id"]): kit.answer_key(s, key) for s in rows}
    b = kit.arm(study.results, rows, {"label": "MCQ first-token P(correct)", "samples": "p_correct.mcq", **options})
    out["arms"] = {"a": a, "b": b}
    out["observations"] = {"ids": list(classes), "right": [cls.count("right") for cls in classes.values()],
                           "wrong": [cls.count("wrong") for cls in classes.values()],
                           "off_format": [cls.count("off_format") for cls in classes.values()]}
    return out


NOT_RECORDED = "not recorded by this run"


def top_token_no_letter(samples, n_options: int) -> int | str:
    """How many questions' top next token over the vocabulary is no option letter (the first-token
    answer off-format): each sample's ``top_is_letter``. A sample written before it keeps the letters'
    mass and P(gold) (where kept): its top token is a letter when its largest letter, at least
    max(P(gold), mass / K), outweighs the whole mass outside the letters; where that does not decide
    every question, :data:`NOT_RECORDED` (with how many it leaves open), never a guess or a silent 0."""
    letter = []
    for s in samples:
        m = s["mcq"]
        if "top_is_letter" in m:
            letter.append(bool(m["top_is_letter"]))
        elif max(float(m.get("p_raw", 0.0)), float(m["letter_mass"]) / n_options) > 1 - float(m["letter_mass"]):
            letter.append(True)  # no token outside the letters can be on top
    if len(letter) < len(samples):
        return f"{NOT_RECORDED} ({len(samples) - len(letter)} of {len(samples)} questions' top token not kept)"
    return sum(not x for x in letter)
