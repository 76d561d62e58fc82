"""HaluEval dialogue (Li et al.) as the 4-option HaluDialogue of paper 000 App. A.1-A.2."""

from __future__ import annotations

import random
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.rows import (
    Collector, MCQDataset, Row, RowError, balanced_golds, candidates, existing, read_jsonl, require)

HALUEVAL_QUESTION = "Which of the following responses is the most suitable one for the given dialogue?"


def load_halueval(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
                  seed: int = 0, n_options: int = 4, include_knowledge: bool = False) -> MCQDataset:
    """HaluEval dialogue (Li et al.) as the 4-option HaluDialogue of paper 000 App. A.1-A.2.

    Options: the right response (gold), this row's hallucinated response and
    ``n_options - 2`` responses drawn (seeded) from other rows. Context: the dialogue
    history (``include_knowledge`` prepends the knowledge). Question: HALUEVAL_QUESTION.
    """
    path = existing(path, file=True)
    if n_options < 2:
        raise WhiteboxError(f"n_options must be >= 2, got {n_options}")
    col = Collector(on_bad_row)
    parsed: list[tuple[Row, dict[str, str]]] = []
    for r in read_jsonl(path):
        try:
            if isinstance(r.data, RowError):
                raise r.data
            rec = {k: require(r.data, k).strip() for k in
                   ("knowledge", "dialogue_history", "right_response", "hallucinated_response")}
            for k in ("dialogue_history", "right_response", "hallucinated_response"):
                if not rec[k]:
                    raise RowError(f"field {k!r} is empty")
            if rec["right_response"] == rec["hallucinated_response"]:
                raise RowError("right_response and hallucinated_response are identical")
            parsed.append((r, rec))
        except RowError as exc:
            col.report(r.path, r.line, str(exc))
    pool = sorted({x for _, rec in parsed for x in (rec["right_response"], rec["hallucinated_response"])})
    rng = random.Random(f"halueval/{seed}")
    golds = balanced_golds(len(parsed), n_options, rng)
    items: list[MCQItem] = []
    for (r, rec), gold in zip(parsed, golds):
        own = [rec["right_response"], rec["hallucinated_response"]][:n_options]
        wrong = own[1:]
        for cand in candidates([], pool, rng):
            if len(wrong) >= n_options - 1:
                break
            if cand not in own and cand not in wrong:
                wrong.append(cand)
        rng.shuffle(wrong)
        if len(wrong) < n_options - 1:
            col.report(r.path, r.line, f"not enough other responses in the file to build {n_options} options")
            continue
        context = rec["dialogue_history"]
        if include_knowledge:
            context = f"{rec['knowledge']}\n{context}"
        item = MCQItem(id=f"halueval/{r.line}", question=HALUEVAL_QUESTION,
                       options=wrong[:gold] + [rec["right_response"]] + wrong[gold:], gold=gold,
                       context=context, subject="dialogue",
                       meta={"knowledge": rec["knowledge"], "hallucinated_response": rec["hallucinated_response"]})
        built = col.build(Row(r.path, r.line, None), lambda _r, item=item: item)
        if built is not None:
            items.append(built)
    return col.finish(items, "halueval", path, limit)
