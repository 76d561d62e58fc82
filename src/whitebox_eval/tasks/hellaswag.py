"""HellaSwag (Zellers et al.): the original jsonl (``ctx`` or ``ctx_a`` + ``ctx_b``,
``endings``, ``label``); paper 000 Listing 3."""

from __future__ import annotations

import re
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.lm_eval import LmEvalDoc
from whitebox_eval.tasks.rows import (
    Collector, MCQDataset, Row, RowError, existing, int_label, read_jsonl, require, text_list)

HELLASWAG_QUESTION = "Which of the following is the best ending to the given context?"


def load_hellaswag(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
                   seed: int = 0) -> MCQDataset:
    """HellaSwag jsonl (Zellers et al.) as in paper 000 Listing 3: context = ``ctx``,
    the fixed question HELLASWAG_QUESTION, options = ``endings``. ``seed`` is unused."""
    path = existing(path, file=True)
    col = Collector(on_bad_row)

    def make(r: Row) -> MCQItem:
        d = r.data
        if "ctx" in d and d["ctx"] is not None:
            ctx = require(d, "ctx")
        else:
            ctx = f"{require(d, 'ctx_a')} {require(d, 'ctx_b')}".strip()
        endings = text_list(require(d, "endings", list), "endings")
        if "label" not in d or d["label"] in (None, ""):
            raise RowError("missing field 'label' (unlabelled test rows cannot be scored)")
        gold = int_label(d["label"], "label")
        ident = d.get("ind", r.line)
        return MCQItem(id=f"hellaswag/{ident}", question=HELLASWAG_QUESTION, options=endings, gold=gold,
                       context=ctx.strip(), subject=d.get("activity_label"),
                       meta={k: d[k] for k in ("ind", "source_id", "split", "split_type", "ctx_a", "ctx_b") if k in d})

    items = [i for r in read_jsonl(path) if (i := col.build(r, make)) is not None]
    return col.finish(items, "hellaswag", path, limit)


# ----------------------------------------------------------------------------- lm-eval style

def preprocess(text: str) -> str:
    """lm-eval's ``hellaswag/utils.preprocess``: strip, `` [title]`` -> ``". "``, drop
    ``[...]`` (WikiHow artefacts), one double space -> one space (a single pass, as there)."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def lm_eval_doc(item: MCQItem) -> LmEvalDoc:
    """lm-eval's ``hellaswag`` task (``process_docs``): query = preprocess(activity_label +
    ": " + ctx_a + " " + ctx_b.capitalize()), choices = preprocessed endings, cloze."""
    if "ctx_a" in item.meta:
        ctx = f"{item.meta['ctx_a']} {str(item.meta.get('ctx_b') or '').capitalize()}"
    else:  # a file with ``ctx`` only: it is ctx_a + " " + ctx_b already
        ctx = f"{item.context or ''} "
    if item.subject is None:
        raise WhiteboxError(f"item {item.id!r} has no activity_label; lm-eval's hellaswag prompt starts with it")
    return LmEvalDoc(task="hellaswag", text=preprocess(f"{item.subject}: {ctx}"),
                     choices=[preprocess(e) for e in item.options], gold=item.gold, output="cloze")
