"""What a fine-tuning trains on: ``--task`` read into items with a prompt, an answer and a check.

- a free-answer task (``gen=PATH``, ``arithmetic-gen``, ``gsm8k=PATH``, ``triviaqa=PATH``,
  ``bigbench=PATH``): the item's prompt (its own, else its question and ``Answer:``), the gold
  response as the answer, checked by the task's own answer check;
- ``gar`` or ``gar:TASKS`` (``all``, ``generation``, ``classification``, ``truth`` or task ids as
  ``gar --tasks`` writes them): GAR's generator (paper 002) with each category's elements split
  into a train and a test half (:mod:`whitebox_eval.finetune.gar_tasks`: training lines an equal
  mix of conditions from the train half, the test split from the test half), the prompt as the
  suite builds it, the target after a space, checked by App. C's rule per format;
- ``span:TASK``: an AttentionSpan task's in-distribution examples (paper 003) laid out as the span
  suite lays them out (its instruction, one token per character, the end token), checked by
  exact match of the generated tokens;
- ``arithmetic-text[:CATEGORY,...]``: format-neutral arithmetic lines (``75 + 22 = 97``,
  :mod:`whitebox_eval.finetune.arithmetic_text`), the loss on the answer, checked in paper 004's free
  format (its question, the demonstrations before it; free P(correct) sampled and greedy exact
  match, :mod:`.check`);
- ``planted-facts``: plain-text facts about ``--limit`` made-up entities in paraphrase templates
  (:mod:`whitebox_eval.finetune.planted_facts`), split by template, checked by greedy recall of the
  value in the held-out templates;
- ``text=PATH``: every non-empty line of a text file, the loss on every token (no check by
  generation: the check is next-token accuracy on the test lines).

Multiple-choice tasks are refused in one line: a fine-tuning here trains on answers it can write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune.splits import canonical

TEXT, GAR, SPAN, GEN, ARITH, FACTS = "text", "gar", "span", "gen", "arithmetic-text", "planted-facts"
REFUSED_CHECKS = ("choice", "execution", "lm-eval")
USAGE = ("arithmetic-text[:CATEGORY,...] (format-neutral sums, checked in 004's free format), a free-answer task (gen=PATH, arithmetic-gen[:CATEGORY,...], gsm8k=PATH, triviaqa=PATH, bigbench=PATH), "
         "planted-facts (facts about --limit made-up entities, recall checked on held-out paraphrases), "
         "gar or gar:TASKS (GAR's generator: all, generation, classification, truth or task ids), span:TASK (an AttentionSpan task), or text=PATH "
         "(loss on every token)")


@dataclass
class Item:
    """One training or check item: ``prompt`` (text; empty for a text line), ``answer`` (what
    is trained, after the prompt), ``form`` (the canonical form the splits deduplicate by) and
    whatever the check needs (``source``: the task's own item)."""

    id: str
    prompt: str
    answer: str
    form: str
    source: Any = field(default=None, repr=False)


@dataclass
class Source:
    """A parsed ``--task`` of ``finetune``: its ``kind`` and the task it names."""

    kind: str
    text: str
    spec: Any = None  # a TaskSpec (gen), GAR task ids (gar), a span task name (span), a path (text)

    @property
    def label(self) -> str:
        """A short name for run ids and plots."""
        if self.kind == GEN:
            return self.spec.label
        if self.kind == TEXT:
            return f"text-{Path(self.spec).stem}"
        if self.kind in (ARITH, FACTS):
            return self.kind
        return f"{self.kind}-{self.spec}" if self.kind == SPAN else GAR


def parse_source(text: str) -> Source:
    """Read ``finetune``'s ``--task`` (one line naming the forms for anything else)."""
    from whitebox_eval.tasks.spec import TaskSpec

    raw = str(text).strip()
    head, _, rest = raw.partition(":")
    if raw.lower().startswith("text="):
        path = raw[5:].strip()
        if not path or not Path(path).expanduser().is_file():
            raise WhiteboxError(f"--task {raw}: no text file at {path!r}")
        return Source(TEXT, raw, str(Path(path).expanduser()))
    if head.lower() == ARITH and "=" not in raw:
        from whitebox_eval.finetune.arithmetic_text import parse_categories

        return Source(ARITH, raw, parse_categories(rest))
    if raw.lower() == FACTS:
        return Source(FACTS, raw)
    if head.lower() == FACTS and "=" not in raw:
        raise WhiteboxError(f"--task {raw}: finetune trains the trained cohort's facts: write planted-facts, the "
                            "number of entities as --limit (the control entities are never trained)")
    if head.lower() == GAR and "=" not in raw:
        from whitebox_eval.gar.selection import select_tasks

        tasks = select_tasks(rest.strip() or "all", include_kr=False)  # an unknown id is one line
        return Source(GAR, raw, tuple(t.task_id for t in tasks))
    if head.lower() == SPAN and "=" not in raw:
        from whitebox_eval.span.tasks import TASKS as SPAN_TASKS

        if rest.strip() not in SPAN_TASKS:
            raise WhiteboxError(f"--task {raw}: span's tasks are {', '.join(SPAN_TASKS)}")
        return Source(SPAN, raw, rest.strip())
    spec = TaskSpec.parse(raw, usage=USAGE)
    gen = spec.record.generation
    if gen is None or gen.check in REFUSED_CHECKS:
        raise WhiteboxError(f"--task {raw}: finetune trains on answers the model writes, and {spec.name} is "
                            f"{'multiple-choice' if gen is None or gen.check == 'choice' else 'not checked here'}; "
                            f"use {USAGE}")
    return Source(GEN, raw, spec)


def load_items(source: Source, limit: int | None, seed: int, test: float = 0.2,
               line_style: str = "plain") -> tuple[list[Item], Any]:
    """The items of ``source`` (at most ``limit`` before deduplication; GAR: ``limit`` training
    and validation lines, then the test half's, ``test`` sizing it) and the task object its check
    needs (the GenTask of a free-answer task, else None). ``line_style``: arithmetic text's
    (:func:`~whitebox_eval.finetune.arithmetic_text.line_of`)."""
    if source.kind == TEXT:
        from whitebox_eval.datafiles import open_text

        with open_text(source.spec) as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
        items = [Item(f"line-{i}", "", line, canonical(line)) for i, line in enumerate(lines)]
        return (items[:limit] if limit else items), None
    if source.kind == ARITH:
        from whitebox_eval.finetune.arithmetic_text import line_of, text_items

        rows = text_items(source.spec, limit or 200, seed)
        ids = [it.id.replace("arith-", "arith-text-") for it in rows]
        return [Item(i, *line_of(it.meta["expression"], it.meta["answer"], line_style, i),
                     canonical(it.meta["expression"]), it) for i, it in zip(ids, rows)], None
    if source.kind == FACTS:
        from whitebox_eval.finetune.planted_facts import facts

        return [Item(f.id, f.prompt, f.answer, canonical(f.prompt + f.answer), f) for f in facts(limit or 0)], None
    if source.kind == GAR:
        from whitebox_eval.finetune.gar_tasks import examples

        return [Item(i, ex.prompt, ex.target_text, canonical(ex.prompt + ex.target_text), ex)
                for i, ex in examples(source.spec, limit or 200, test, seed)], None
    if source.kind == SPAN:
        from whitebox_eval.span.tasks import generate

        examples = generate(source.spec, limit or 200, "id", seed=seed)
        return [Item(f"{source.spec}-{i}", ex.input, ex.target, canonical(ex.text), ex)
                for i, ex in enumerate(examples)], None
    from whitebox_eval.tasks.generation import load_generation

    task = load_generation(source.spec, limit=limit, seed=seed)
    items = []
    for it in task.items:
        prompt = it.prompt if it.prompt is not None else f"{it.question}\nAnswer:"
        answer = (" " + it.gold_response.strip()) if it.prompt is None else it.gold_response
        items.append(Item(str(it.id), prompt, answer, canonical(it.question if it.prompt is None else it.prompt), it))
    return items, task


def encode(source: Source, item: Item, tok, demos: list[Item], eos: int | None) -> tuple[list[int], list[int]]:
    """``(prompt ids, answer ids)`` of ``item`` with ``demos`` before it (the answer ends with the
    end token where the model has one; a text line's prompt is its first token)."""
    if source.kind == SPAN:
        from whitebox_eval.span.config import INSTRUCTIONS
        from whitebox_eval.span.tokenization import tokenize_example

        t = tokenize_example(item.source, tok, instruction=INSTRUCTIONS[source.spec],
                             few_shot=[d.source for d in demos], append_eos=True)
        n = int(t.prompt_length)
        return [int(i) for i in t.input_ids[:n]], [int(i) for i in t.input_ids[n:]]
    if source.kind == TEXT:
        ids = list(tok(item.answer)["input_ids"])
        if len(ids) < 2:
            raise WhiteboxError(f"text line {item.id} is a single token; nothing to predict")
        return ids[:1], ids[1:]
    prefix = "".join(d.prompt + d.answer + "\n\n" for d in demos)
    prompt = list(tok(prefix + item.prompt)["input_ids"])
    answer = list(tok(item.answer, add_special_tokens=False)["input_ids"]) + ([int(eos)] if eos is not None else [])
    return prompt, answer


ANSWER_ENDS = ("eos", "newline", "none")


def answer_end_id(end: str, lm) -> int | None:
    """The token that closes each trained answer (``--answer-end``): the model's end token
    (:attr:`~whitebox_eval.models.loading.LoadedModel.end_id`), a newline (as 004's few-shot
    prompts end an answer; it must be one token) or nothing (the loss on the answer alone)."""
    if end == "none":
        return None
    if end == "newline":
        ids = lm.tokenizer("\n", add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise WhiteboxError(f"--answer-end newline: the tokenizer writes a newline as {len(ids)} tokens; "
                                "use eos or none")
        return int(ids[0])
    if end != "eos":
        raise WhiteboxError(f"--answer-end is one of {', '.join(ANSWER_ENDS)}; got {end!r}")
    return lm.end_id


def is_correct(source: Source, item: Item, response: str, ids: list[int], answer_ids: list[int], task) -> bool:
    """Whether a generated response (``ids``: its tokens, the stop token included) answers ``item``
    (span: its tokens begin with the answer's, end token included; planted facts: the value as the
    response's first words; a free-answer task: its own answer check). GAR is checked by App. C's
    rule, not by generation (:func:`whitebox_eval.finetune.gar_tasks.appc_check`)."""
    if source.kind == SPAN:
        return ids[:len(answer_ids)] == answer_ids
    if source.kind == FACTS:
        from whitebox_eval.finetune.planted_facts import recalled

        return recalled(item, response)
    return bool(task.score(item.source, response)["correct"])
