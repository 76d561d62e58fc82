"""The ``lm-eval`` prompt style: lm-evaluation-harness 0.4.13's text for the tasks it has.

A dataset that lm-eval has a task for (its record's ``lm_eval_output``, :mod:`.registry`) names
its ``lm_eval_doc(item) -> LmEvalDoc`` in its record (its ``doc_to_text``, ``doc_to_choice``,
``doc_to_target`` and ``description``).

How lm-eval builds a multiple-choice request (``api/task.py`` ``fewshot_context`` and
``build_qa_turn``, ``api/model.py`` ``_encode_pair``) and what we do the same way
(:func:`context`, :func:`encode_request`):

- context = description + every demonstration as ``text + " " + answer + "\\n\\n"`` +
  the query's text (target delimiter ``" "``, few-shot delimiter ``"\\n\\n"``);
- each choice is the continuation ``" " + choice``; trailing whitespace of the context
  moves to the continuation; context + continuation is tokenized as one string (the
  tokenizer's default special tokens) and the continuation is what follows the
  context's tokens;
- ``acc`` = argmax of the summed log-likelihoods, ``acc_norm`` = argmax of the
  log-likelihoods divided by the number of *characters* of each choice (without the
  delimiter); ties go to the first choice (``np.argmax``).

``letters`` tasks (MMLU) list the options in the prompt and score the choices ``A``..``D``
as one next token: that is our baseline's letter logits, so the white-box scores (QK,
attention, lens) come from the same pass. ``cloze`` tasks (HellaSwag, ARC) score the
option texts as continuations and show no options in the prompt.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.lazy import resolve
from whitebox_eval.tasks.prompts import OptionSpans, RenderedPrompt, Span
from whitebox_eval.tasks.registry import TaskRecord

PAPER, LM_EVAL = "paper", "lm-eval"
LM_EVAL_VERSION = "0.4.13"  # the release whose task configs this module follows
TARGET_DELIMITER, FEWSHOT_DELIMITER = " ", "\n\n"
FEWSHOT_SEED = 1234  # lm_eval.simple_evaluate's default fewshot_random_seed


@dataclass(frozen=True)
class LmEvalDoc:
    """One item as lm-eval's task config turns it into text.

    ``task``: lm-eval's task name (``mmlu_anatomy``, ``hellaswag``, ``arc_challenge``);
    ``text``: ``doc_to_text``; ``choices``: ``doc_to_choice``; ``gold``: ``doc_to_target``
    as an index; ``output``: ``"letters"`` (choices are option labels listed in the text
    as ``\\n{label}. {option}`` lines) or ``"cloze"``; ``description``: the task's header;
    ``metrics``: what lm-eval reports; ``options``: the listed texts (letters only).
    """

    task: str
    text: str
    choices: list[str]
    gold: int
    output: str
    description: str = ""
    metrics: tuple[str, ...] = field(default=("acc", "acc_norm"))
    options: tuple[str, ...] = ()  # letters: the option texts listed after the labels

    @property
    def answer(self) -> str:
        return self.choices[self.gold]


def letters_text(question: str, options: list[str]) -> str:
    """The letters view's text: ``question`` without a final ``Answer:`` cue, ``\nA. option``
    lines, ``\nAnswer:`` (lm-eval's MMLU layout)."""
    if len(options) > 26:
        raise WhiteboxError(f"{len(options)} choices: the letters view labels options A to Z (26 at most)")
    base = re.sub(r"\s*Answer:\s*$", "", question)
    return base + "".join(f"\n{chr(ord('A') + i)}. {c}" for i, c in enumerate(options)) + "\nAnswer:"


def letters_doc(item) -> LmEvalDoc:
    """The letters view of an item read by ``--task lm-eval:TASK`` (:mod:`.lm_eval_tasks`; also of
    its permuted copies, so permutation accuracy and PriDe re-render it)."""
    m = item.meta
    return LmEvalDoc(task=m["lm_eval_task"], text=letters_text(item.question, list(item.options)),
                     choices=[chr(ord("A") + i) for i in range(len(item.options))], gold=item.gold, output="letters",
                     description=m["lm_eval_description"], metrics=tuple(m["lm_eval_metrics"]),
                     options=tuple(item.options))


def check_style(rec: TaskRecord, style: str) -> None:
    """Raise a one-line error if dataset ``rec`` (its record) has no prompt style ``style``. Every dataset offers
    the ``paper`` style (papers 000/004's formats); those lm-eval has a task for also ``lm-eval``,
    scored as that task scores an answer (the record's ``lm_eval_output``: ``letters``, the option
    labels as the next token; ``cloze``, the option texts as continuations)."""
    styles = (PAPER, LM_EVAL) if rec.lm_eval_output else (PAPER,)
    if style not in (PAPER, LM_EVAL):
        raise WhiteboxError(f"unknown --prompt style {style!r}; choose {PAPER} or {LM_EVAL}")
    if style not in styles:
        raise WhiteboxError(f"task {rec.name} has prompt styles: {', '.join(styles)} ({rec.no_lm_eval}); use --prompt {PAPER}")


def doc(rec: TaskRecord, item) -> LmEvalDoc:
    """``item`` as lm-eval's task for dataset ``rec`` (its record) sees it."""
    if "lm_eval_task" in item.meta:  # read through lm-eval's own task objects
        return letters_doc(item)
    check_style(rec, LM_EVAL)
    return resolve(rec.lm_eval_doc)(item)


def sampler_draws(rec: TaskRecord, pool: Sequence, items: Sequence, k: int) -> dict[str, list]:
    """Each item's ``k`` demonstrations as lm-eval 0.4.13's default ``ContextSampler`` draws them
    (``api/samplers.py``) for dataset ``rec``: one ``random.Random(FEWSHOT_SEED)`` shared by the items in
    order, ``rnd.sample(pool, k)`` per item, or where the record's ``lm_eval_draws_extra`` says lm-eval's
    few-shot split is its test split, ``rnd.sample(pool, k + 1)``, documents equal to the evaluated one
    (the same :func:`doc`) dropped, the first ``k`` kept (and, if fewer remain, ``rnd.sample`` of the pool
    without them). ``pool`` is the few-shot split in file order."""
    extra = rec.lm_eval_draws_extra
    if len(pool) < k + extra:
        raise WhiteboxError(f"the demonstration file has {len(pool)} rows but lm-eval's sampler needs "
                            f"{k + extra} for --shots {k}; use fewer shots")
    rnd = random.Random(FEWSHOT_SEED)
    out: dict[str, list] = {}
    for it in items:
        if not extra:
            out[it.id] = rnd.sample(list(pool), k)
            continue
        query = doc(rec, it)
        drawn = [d for d in rnd.sample(list(pool), k + 1) if doc(rec, d) != query][:k]
        if len(drawn) < k:
            drawn = rnd.sample([d for d in pool if doc(rec, d) != query], k)
        out[it.id] = drawn
    return out


def context(query: LmEvalDoc, demos: Sequence[LmEvalDoc] = ()) -> str:
    """lm-eval's plain-text context: description, demonstrations, the query's text."""
    shots = "".join(d.text + TARGET_DELIMITER + d.answer + FEWSHOT_DELIMITER for d in demos)
    return query.description + shots + query.text


def continuations(query: LmEvalDoc) -> list[str]:
    """What is scored after the context for each choice (target delimiter + choice)."""
    return [TARGET_DELIMITER + c for c in query.choices]


def encode_request(encode: Callable[[str], list[int]], context_text: str,
                   continuations: Sequence[str]) -> tuple[list[int], list[list[int]]]:
    """lm-eval's ``_encode_pair`` for causal models, for every continuation of one context
    (``encode``: text -> token ids with the tokenizer's special tokens): trailing
    whitespace of the context moves to the continuation; context + continuation is
    tokenized as one string and the continuation is the tokens after the context's own
    (``whole[len(context):]``, no prefix check). The context is tokenized once."""
    n = len(context_text) - len(context_text.rstrip())
    moved, core = (context_text[-n:], context_text[:-n]) if n else ("", context_text)
    ctx = encode(core)
    return list(ctx), [list(encode(core + moved + c)[len(ctx):]) for c in continuations]


def choice_lengths(choices: Sequence[str]) -> np.ndarray:
    """acc_norm's denominators: characters of each choice, without the target delimiter."""
    return np.array([float(len(c)) for c in choices])


def first_argmax(scores: np.ndarray) -> np.ndarray:
    """Index of the largest score per row, the first one on ties (lm-eval's ``np.argmax``);
    ``nan`` / ``-inf`` padding never wins over a real score."""
    return np.argmax(np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=-np.inf), axis=-1)


def render_letters(query: LmEvalDoc, demos: Sequence[LmEvalDoc], item_id: str) -> RenderedPrompt:
    """A ``letters`` request as a :class:`RenderedPrompt`, so the white-box scorers find
    every option's tokens: the shared prefix is description + demonstrations, each option
    line ``\\n{label}. {text}`` gives the label, ``.`` and content spans and its line end
    (the next ``\\n``), and the answers are the continuations ``" A"``.. ``" D"``."""
    if query.output != "letters":
        raise WhiteboxError(f"lm-eval's {query.task} task scores option texts as continuations (a cloze task): "
                            "only --methods cloze applies with --prompt lm-eval")
    text = context(query, demos)
    prefix_len = len(text) - len(query.text)
    pos, spans = prefix_len, []
    for i, (label, option) in enumerate(zip(query.choices, query.options)):
        line = f"\n{label}. {option}"
        at = text.find(line, pos)
        if at < 0:
            raise WhiteboxError(f"item {item_id}: option line {line!r} not found in lm-eval's text")
        start = at + 1
        content = Span(start + len(label) + 2, start + len(line) - 1)
        eol_at = text.index("\n", content.end)
        spans.append(OptionSpans(i, Span(start, start + len(label)), Span(start + len(label), start + len(label) + 1),
                                 content, None, Span(eol_at, eol_at + 1), False))
        pos = content.end
    cue = text.rindex("Answer:")
    first_line = re.match(r"[^\n]*", text[prefix_len:]).group(0)
    return RenderedPrompt(text=text, prefix_len=prefix_len, fmt="lm-eval", item_id=item_id, labels=list(query.choices),
                          answer_strings=continuations(query), options=spans, n_essential=len(query.choices),
                          gold=query.gold, question=Span(prefix_len, prefix_len + len(first_line)), context=None,
                          answer_cue=Span(cue, cue + len("Answer:")))
