"""GSM8K (Cobbe et al. 2021) in its published JSON lines: ``question`` and an ``answer``
whose worked solution ends in ``#### N``; paper 001 scores the final number (App. A.6)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from whitebox_eval.datafiles import json_objects
from whitebox_eval.errors import WhiteboxError

_NUMBER = re.compile(r"[-\u2212]?\$?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class GSM8KRow:
    """One problem: its id, the question, the gold number (text, no separators) and the
    worked solution without the calculator annotations ``<<...>>``."""

    id: str
    question: str
    gold: str
    solution: str


def load_gsm8k(path: str | Path, limit: int | None = None) -> list[GSM8KRow]:
    """The first ``limit`` rows of a GSM8K file; a malformed row is a one-line error naming ``file:line``."""
    rows: list[GSM8KRow] = []
    for line_no, row in json_objects(path):
        q, a = row.get("question"), row.get("answer")
        if not isinstance(q, str) or not isinstance(a, str) or "####" not in a:
            raise WhiteboxError(f"{path}:{line_no}: a GSM8K row needs 'question' and an 'answer' ending in '#### N'")
        gold = a.rsplit("####", 1)[1].strip().replace(",", "")
        if not _NUMBER.search(gold):
            raise WhiteboxError(f"{path}:{line_no}: the answer after '####' is not a number: {gold!r}")
        solution = re.sub(r"<<[^>]*>>", "", a.rsplit("####", 1)[0]).strip()
        rows.append(GSM8KRow(str(row.get("id", f"gsm8k-{line_no}")), q, gold, solution))
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise WhiteboxError(f"{path} holds no GSM8K rows")
    return rows
