"""ARC (Clark et al.; paper 004 sec. 1): llm-foundry jsonl or AI2 jsonl."""

from __future__ import annotations

from pathlib import Path

from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.lm_eval import LmEvalDoc
from whitebox_eval.tasks.rows import (
    Collector, MCQDataset, Row, RowError, existing, int_label, read_jsonl, require, strip_cue, text_list)

def load_arc(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
             seed: int = 0) -> MCQDataset:
    """ARC (Clark et al.; paper 004 sec. 1): llm-foundry jsonl (``query`` starting
    ``Question:``, ``choices``, 0-based ``gold``) or AI2 jsonl (``question.stem``,
    ``question.choices``, ``answerKey`` as a label such as ``B`` or ``2``). ``seed`` is unused."""
    path = existing(path, file=True)
    col = Collector(on_bad_row)

    def make(r: Row) -> MCQItem:
        d = r.data
        if "query" in d:
            q = strip_cue(require(d, "query"))
            opts = text_list(require(d, "choices", list), "choices")
            gold = int_label(require(d, "gold", (int, str)), "gold")
            ident = d.get("id", r.line)
        elif isinstance(d.get("question"), dict):
            qd = d["question"]
            q = require(qd, "stem").strip()
            choices = require(qd, "choices", list)
            if not all(isinstance(c, dict) and isinstance(c.get("text"), str) and "label" in c for c in choices):
                raise RowError("question.choices should be a list of {text, label} objects")
            opts = [c["text"].strip() for c in choices]
            labels = [str(c["label"]).strip() for c in choices]
            key = str(require(d, "answerKey", (str, int))).strip()
            if key not in labels:
                raise RowError(f"answerKey {key!r} is not one of the choice labels {labels}")
            gold = labels.index(key)
            ident = d.get("id", r.line)
        else:
            raise RowError("missing field 'query' (llm-foundry layout) or 'question' object (AI2 layout)")
        return MCQItem(id=f"arc/{ident}", question=q, options=opts, gold=gold, meta={"file": path.name})

    items = [i for r in read_jsonl(path) if (i := col.build(r, make)) is not None]
    return col.finish(items, "arc", path, limit)


def hub_row(row: dict) -> dict:
    """An allenai/ai2_arc row in the llm-foundry layout this module reads."""
    choices = row["choices"]
    return {"query": f"Question: {row['question']}\nAnswer:", "choices": list(choices["text"]),
            "gold": list(choices["label"]).index(row["answerKey"])}


def lm_eval_doc(item: MCQItem) -> LmEvalDoc:
    """lm-eval's ``arc_challenge`` / ``arc_easy``: ``Question: {question}\\nAnswer:``, the
    choice texts as continuations (cloze). The task name follows the file name."""
    task = "arc_easy" if "easy" in str(item.meta.get("file", "")).lower() else "arc_challenge"
    return LmEvalDoc(task=task, text=f"Question: {item.question}\nAnswer:", choices=list(item.options),
                     gold=item.gold, output="cloze")
