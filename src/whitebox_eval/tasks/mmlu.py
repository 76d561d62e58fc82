"""MMLU (Hendrycks et al.): hendrycks CSVs (one file per subject, or a folder of them)
or a headered CSV; paper 000 App. A.1."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.lm_eval import LmEvalDoc
from whitebox_eval.tasks.rows import (
    Collector, MCQDataset, Row, RowError, existing, letter_index, read_csv)

_SPLIT_SUFFIX = re.compile(r"_(test|dev|val|validation|train|auxiliary_train)$")


def _mmlu_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(p for p in path.glob("*.csv") if p.is_file())
    if not files:
        subdirs = sorted(p.name for p in path.iterdir() if p.is_dir())
        hint = f"; point at one of its sub-folders: {subdirs}" if subdirs else ""
        raise WhiteboxError(f"no MMLU subject CSV files (*.csv) in folder {path}{hint}")
    return files


def _mmlu_header(record: list[str]) -> dict[str, Any] | None:
    cells = [c.strip().lower() for c in record]
    if "question" not in cells or not ({"answer", "label", "target"} & set(cells)):
        return None
    choice_cols: list[tuple[int, int]] = []
    for j, c in enumerate(cells):
        m = re.fullmatch(r"(?:choice|option|answer|ending)_?(\d)", c)
        if m:
            choice_cols.append((int(m.group(1)), j))
        elif len(c) == 1 and c in "abcdefgh":
            choice_cols.append((ord(c) - ord("a"), j))
    if len(choice_cols) < 2:
        return None
    answer_col = next(cells.index(k) for k in ("answer", "label", "target") if k in cells)
    return {"question": cells.index("question"), "choices": [j for _, j in sorted(choice_cols)],
            "answer": answer_col, "subject": cells.index("subject") if "subject" in cells else None,
            "width": len(cells)}


def load_mmlu(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
              seed: int = 0) -> MCQDataset:
    """MMLU (Hendrycks et al.), a subject CSV or a folder of them (paper 000 App. A.1).

    Headerless hendrycks rows are ``question,A,B,C,D,answer`` with a letter answer; a
    first row naming ``question``, choice columns and ``answer`` switches to the headered
    variant, whose answer may be 0-based (0-3) or a letter. The subject is the file name
    without its split suffix (``marketing_test.csv`` -> ``marketing``). ``seed`` is unused.
    """
    path = existing(path)
    col = Collector(on_bad_row)
    items: list[MCQItem] = []
    for file in _mmlu_files(path):
        subject = _SPLIT_SUFFIX.sub("", file.stem)
        header: dict[str, Any] | None = None
        for n, row in enumerate(read_csv(file)):
            if n == 0 and not isinstance(row.data, RowError):
                header = _mmlu_header(row.data)
                if header is not None:
                    continue

            def make(r: Row, header=header, subject=subject) -> MCQItem:
                rec: list[str] = r.data
                if header is None:
                    if len(rec) != 6:
                        raise RowError(f"expected 6 fields (question,A,B,C,D,answer), found {len(rec)}")
                    q, opts, ans = rec[0], rec[1:5], rec[5]
                    gold = letter_index(ans, 4)
                    subj = subject
                else:
                    if len(rec) != header["width"]:
                        raise RowError(f"expected {header['width']} fields as in the header, found {len(rec)}")
                    q = rec[header["question"]]
                    opts = [rec[j] for j in header["choices"]]
                    ans = rec[header["answer"]].strip()
                    gold = int(ans) if ans.isdigit() else letter_index(ans, len(opts))
                    subj = (rec[header["subject"]].strip() if header["subject"] is not None else "") or subject
                meta = {"source": str(r.path), "line": r.line}
                if any(o != o.strip() for o in opts):  # lm-eval lists the options as the file has them
                    meta["file_options"] = list(opts)
                return MCQItem(id=f"mmlu/{subj}/{r.path.name}:{r.line}", question=q.strip(),
                               options=[o.strip() for o in opts], gold=gold, subject=subj, meta=meta)

            item = col.build(row, make)
            if item is not None:
                items.append(item)
    return col.finish(items, "mmlu", path, limit)


HUB_HEADER = ["question", "A", "B", "C", "D", "answer", "subject"]


def hub_row(row: dict) -> list[str]:
    """A cais/mmlu row as a record under :data:`HUB_HEADER` (answer 0-3; the subject kept,
    so the ``all`` config's items keep their subjects for dev demonstrations and headers)."""
    return [row["question"], *row["choices"], str(row["answer"]), str(row.get("subject") or "")]


# ----------------------------------------------------------------------------- lm-eval style

def description(subject: str | None) -> str:
    """The header line of lm-eval's ``mmlu_<subject>`` tasks (and of the MMLU paper)."""
    return f"The following are multiple choice questions (with answers) about {(subject or '').replace('_', ' ')}.\n\n"


def lm_eval_doc(item: MCQItem) -> LmEvalDoc:
    """lm-eval's ``mmlu_<subject>``: ``{question.strip()}\\nA. ..\\nD. ..\\nAnswer:``, choices
    ``A``..``D`` scored as the next token (our letter baseline), acc only."""
    letters = [chr(ord("A") + i) for i in range(len(item.options))]
    options = item.meta.get("file_options", item.options)  # the file's text, surrounding whitespace kept
    text = item.question.strip() + "".join(f"\n{lab}. {opt}" for lab, opt in zip(letters, options)) + "\nAnswer:"
    return LmEvalDoc(task=f"mmlu_{item.subject}", text=text, choices=letters, gold=item.gold, output="letters",
                     description=description(item.subject), metrics=("acc",), options=tuple(options))
