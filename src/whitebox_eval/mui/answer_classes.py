"""What one MUI response is: right, wrong, or off-format (no answer to score at all).

Paper 001 sec. 3.7 (and App. B.5) compares "an equal number of correct and incorrect responses" and
says nothing of a response from which no answer can be read: it has two classes, so such a response
is counted incorrect. Here it is its own class, ``off_format``, counted and reported beside the
comparison (``correct_vs_incorrect`` compares right against wrong and leaves it out), never folded
into the error class. A response the task's check scores correct is ``right`` first; a response that
is not right is ``off_format`` when the check reads no answer from it, per answer check
(:mod:`whitebox_eval.tasks.answer_checks`), else ``wrong``:

- every check: an empty or whitespace-only response;
- ``number`` (arithmetic) and ``final_number`` / ``numeric`` (GSM8K): the check's number reading
  finds no number (:func:`whitebox_eval.tasks.numbers.extract_number` gives None) -- paper 004's
  definition (:func:`whitebox_eval.formats.answers.off_format`) under the check's own extraction rule
  (``arithmetic``, ``final``). A response that restates the question
  ("To find the value of 9 * 8, ...") reads its first number and is ``wrong``, as the check reads it;
- ``choice`` (lettered options: SSD, MMLU, ARC, ...): no option label is read
  (:func:`~whitebox_eval.tasks.answer_checks.choice_from_response` gives None);
- ``exact`` (the response's first line) and ``contains`` (the whole response): nothing is left after
  normalisation, or the response is a refusal (004's, :func:`whitebox_eval.tasks.answers.is_refusal`);
- ``regex:PATTERN``: the pattern does not match;
- ``lm-eval``: the first filter's filtered response is empty or lm-eval's fallback ``[invalid]``;
- ``execution`` (HumanEval): the empty completion only (code that fails is an answer: ``wrong``).

A response checked correct that reads as off-format is a contradiction and refused (:func:`answer_class`).
A run written before the class is classified from its samples' texts (:func:`classes_of_samples`),
its check from its config and a letter task's options from its prompt as the run wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.answers import ANSWER_CLASSES as CLASSES, no_answer, normalize_answer

__all__ = ["CLASSES", "DEFINITION", "answer_class", "class_results", "classes_of_samples", "complete", "off_format",
           "response_class"]

DEFINITION = ("off-format: a response from which the task's check reads no answer -- empty; number checks: "
              "no number read; letter options: no option label read; exact/contains: nothing left after "
              "normalisation, or a refusal; regex: no match; lm-eval: filtered to '[invalid]' or empty. "
              "Counted apart, never incorrect: correct_vs_incorrect compares right against wrong")

ITEM_CHECKS = ("bigbench",)
"""Tasks whose items carry different checks (a run's config names no one check for them)."""
_NUMBER_RULES = {"number": "arithmetic", "final_number": "final", "numeric": "final"}
_OPTION = re.compile(r"^([A-Z])\. (.*)$")


def off_format(check: str, text: str, labels: Sequence[str] = (), options: Sequence[str] = (),
               filtered: Any = None) -> bool:
    """Whether the check ``check`` reads no answer from ``text`` (module docstring); ``labels`` /
    ``options``: a letter task's; ``filtered``: lm-eval's first filtered response."""
    from whitebox_eval.tasks.answer_checks import choice_from_response
    from whitebox_eval.tasks.numbers import extract_number

    if not text.strip():
        return True
    if check in _NUMBER_RULES:  # 004's number rule (formats/answers.py) under this check's reading
        return extract_number(text, _NUMBER_RULES[check]) is None
    if check == "choice":
        return choice_from_response(text, labels, options) is None
    if check == "exact":
        return no_answer(normalize_answer(text.strip().split("\n", 1)[0]))
    if check == "contains":
        return no_answer(normalize_answer(text))
    if check.startswith("regex:"):
        return re.search(check[len("regex:"):], text) is None
    if check == "lm-eval":
        return filtered is None or str(filtered).strip() in ("", "[invalid]")
    if check == "execution":
        return False
    raise WhiteboxError(f"unknown answer check {check!r}")


def answer_class(correct: bool, off: bool, where: str = "a response") -> str:
    """``right`` when the check scored it correct, else ``off_format`` or ``wrong``."""
    if correct and off:
        raise WhiteboxError(f"{where} is scored correct, yet its check reads no answer from it")
    return "right" if correct else "off_format" if off else "wrong"


def response_class(item, record: Mapping[str, Any]) -> str:
    """The class of a response as a study scores it: ``item`` (a
    :class:`~whitebox_eval.tasks.generation.GenItem`: its check, labels and options) and the sample
    ``record`` it wrote (its checked ``response``, ``correct`` and lm-eval's filters)."""
    off = off_format(item.check, record["response"], item.labels, item.options, lm_eval_filtered(record))
    return answer_class(bool(record["correct"]), off, f"item {item.id}")


def lm_eval_filtered(sample: Mapping[str, Any]) -> Any:
    """lm-eval's first filtered response of a sample (None when it kept none)."""
    filters = (sample.get("lm_eval") or {}).get("filters") or {}
    return next(iter(filters.values()), {}).get("filtered")


def options_in_prompt(prompt: str) -> tuple[list[str], list[str]]:
    """The lettered options of a prompt as :func:`whitebox_eval.tasks.generation.letter_question` writes
    them (``A. text`` lines after the last ``Question:``): labels and texts, empty when none."""
    labels, options = [], []
    for line in prompt[prompt.rfind("Question:"):].split("\n"):
        m = _OPTION.match(line.strip())
        if m and m.group(1) == chr(ord("A") + len(labels)):
            labels.append(m.group(1))
            options.append(m.group(2))
    return labels, options


def check_of(config: Mapping[str, Any]) -> str:
    """A mui run's answer check, from its config (``--answer`` of ``gen=PATH``, else the task's own)."""
    from whitebox_eval.tasks.spec import TaskSpec

    spec = TaskSpec.from_config(config)
    if spec.name in ITEM_CHECKS:
        raise WhiteboxError(f"{spec.name}'s items each have their own check (choice or exact), which the run "
                            "did not keep per sample")
    return spec.answer or spec.record.generation.check


def classes_of_samples(samples: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> list[str]:
    """Each sample's class from its text (``response``) and ``correct``, the check from ``config``.
    Raises :class:`WhiteboxError` saying what is missing when the samples cannot be classified."""
    try:
        check = check_of(config)
    except (WhiteboxError, KeyError, TypeError, AttributeError) as e:
        raise WhiteboxError(f"the run's answer check is not known from its config ({e})") from None
    out = []
    for s in samples:
        if not isinstance(s.get("response"), str) or "correct" not in s:
            raise WhiteboxError(f"sample {s.get('id')} keeps no response text or no correct flag")
        labels, options = options_in_prompt(str(s.get("prompt") or "")) if check == "choice" else ([], [])
        if check == "choice" and not labels:
            raise WhiteboxError(f"sample {s.get('id')}: no lettered options in its prompt to read a label against")
        off = off_format(check, s["response"], labels, options, lm_eval_filtered(s))
        out.append(answer_class(bool(s["correct"]), off, f"sample {s.get('id')}"))
    return out


def class_results(classes: Sequence[str]) -> dict[str, Any]:
    """results.json's keys of the classes: ``answer_classes`` (each class's count and the definition)
    and ``off_format`` (the off-format share with its Wilson interval over the responses)."""
    from whitebox_eval import stats

    out: dict[str, Any] = {"answer_classes": {**{c: sum(x == c for x in classes) for c in CLASSES},
                                              "definition": DEFINITION}}
    if classes:
        stats.add_proportion(out, "off_format", [c == "off_format" for c in classes])
    return out


def complete(results: dict[str, Any], samples: list[dict[str, Any]], config: Mapping[str, Any]) -> None:
    """The mui record's read-back (``Suite.read_back``): a finished study written before the class
    gains each sample's ``class`` and :func:`class_results`, from its texts; a written value is never
    replaced and the folder is not written. A run whose samples cannot be classified says why in
    ``answer_classes.not_classified`` (read as *not tested* by the 001 claims), never guessed."""
    if "answer_classes" in results or "correct_vs_incorrect" not in results or not samples:
        return  # written with the class, or not a study's responses (a trajectory, a contamination)
    if all("class" in s for s in samples):
        classes = [s["class"] for s in samples]
    else:
        try:
            classes = classes_of_samples(samples, config)
        except WhiteboxError as e:
            results["answer_classes"] = {"not_classified": str(e), "definition": DEFINITION}
            return
        for s, c in zip(samples, classes):
            s.setdefault("class", c)
    for key, value in class_results(classes).items():
        results.setdefault(key, value)
