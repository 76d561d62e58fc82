"""TriviaQA (Joshi et al.; paper 004 sec. 2.3) for free generation and MCQ."""

from __future__ import annotations

import random
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.answers import normalize_answer
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.rows import (
    Collector, MCQDataset, Row, RowError, balanced_golds, candidates, existing, read_jsonl, require, strip_cue, text_list)

_normalized = normalize_answer  # distractors must differ from the answer after 004's normalisation


def load_triviaqa(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
                  seed: int = 0, n_options: int = 4) -> MCQDataset:
    """TriviaQA (Joshi et al.; paper 004 sec. 2.3) for free generation and MCQ.

    Free generation uses ``question`` and ``aliases``; MCQ options are the answer plus
    ``n_options - 1`` distractors: the row's own (``distractors`` / ``incorrect_answers``
    / ``wrong_answers``) when it has enough, else (seeded) other rows' answers, always
    excluding anything equal to the answer or an alias after normalization.
    """
    path = existing(path, file=True)
    if n_options < 2:
        raise WhiteboxError(f"n_options must be >= 2, got {n_options}")
    col = Collector(on_bad_row)
    parsed: list[tuple[Row, str, str, list[str], list[str]]] = []
    for r in read_jsonl(path):
        try:
            if isinstance(r.data, RowError):
                raise r.data
            d = r.data
            if "context" in d:
                q = strip_cue(require(d, "context"))
                answer = require(d, "answer").strip()
                aliases = text_list(d.get("aliases", []), "aliases")
            else:
                q = require(d, "question").strip()
                ans = require(d, "answer", (str, dict))
                if isinstance(ans, dict):
                    answer = require(ans, "value").strip()
                    aliases = text_list(ans.get("aliases", []), "answer.aliases")
                else:
                    answer = ans.strip()
                    aliases = text_list(d.get("aliases", []), "aliases")
            if not q:
                raise RowError("the question is empty")
            if not answer:
                raise RowError("field 'answer' is empty")
            own = next((d[k] for k in ("distractors", "incorrect_answers", "wrong_answers") if k in d), [])
            own = text_list(own, "distractors")
            parsed.append((r, q, answer, aliases, own))
        except RowError as exc:
            col.report(r.path, r.line, str(exc))
    all_answers = sorted({a for _, _, a, _, _ in parsed})
    rng = random.Random(f"triviaqa/{seed}")
    golds = balanced_golds(len(parsed), n_options, rng)
    items: list[MCQItem] = []
    for (r, q, answer, aliases, own), gold in zip(parsed, golds):
        banned = {_normalized(x) for x in [answer, *aliases]}
        wrong: list[str] = []
        seen = set(banned)
        source = "file" if len([x for x in own if _normalized(x) not in banned]) >= n_options - 1 else "sampled"
        for c in candidates(own, all_answers, rng):
            key = _normalized(c)
            if c.strip() and key not in seen:
                wrong.append(c.strip())
                seen.add(key)
            if len(wrong) == n_options - 1:
                break
        if len(wrong) < n_options - 1:
            col.report(r.path, r.line, f"not enough distinct wrong answers in the file to build {n_options} options")
            continue
        ident = r.data.get("question_id", r.line) if isinstance(r.data, dict) else r.line
        item = MCQItem(id=f"triviaqa/{ident}", question=q, options=wrong[:gold] + [answer] + wrong[gold:],
                       gold=gold, aliases=[a for a in aliases if a != answer],
                       meta={"distractor_source": source})
        built = col.build(Row(r.path, r.line, None), lambda _r, item=item: item)
        if built is not None:
            items.append(built)
    return col.finish(items, "triviaqa", path, limit)


def hub_row(row: dict) -> dict:
    """A mandarjoshi/trivia_qa row in the llm-foundry layout this module reads."""
    answer = row["answer"]
    return {"context": row["question"], "answer": answer["value"], "aliases": list(answer.get("aliases", []))}
