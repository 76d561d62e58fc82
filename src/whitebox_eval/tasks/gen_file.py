"""Your own generation file (``--task gen=PATH``): JSON lines, CSV or Parquet.

Each row is one prompt with one or more reference answers. Columns (names matched without
regard to case; ``--field NAME=COLUMN`` names any other column):

- ``prompt``: the whole prompt, given to the model as it is; or ``question`` (``query``,
  ``input``, ``problem``): the question, which the suite writes in its own format
  (``Question: ...`` and ``Answer:``, paper 001 App. A.6);
- answer (``answer``, ``answers``, ``reference``, ``references``, ``target``, ``targets``,
  ``gold``, ``output``): one reference (text or a number) or a list of them (in a CSV cell a
  JSON list); a column ``aliases`` adds more;
- optional ``context`` (``passage``, ...: shown on its own line before the question),
  ``subject`` (``category``, ...: the group of sec. 3.6's subset MUIs) and ``id`` (else
  ``FILE:LINE``).

A response is checked against the references by ``--answer`` (config.yaml
``task_spec.answer``; :mod:`.answer_checks`): ``exact`` (after normalisation, the default),
``numeric``, ``contains`` or ``regex:PATTERN``; with ``numeric`` every reference must be a
number. A malformed row follows the bad-row policy of :mod:`.rows` (``file:line: problem``).
``hf:DATASET[:CONFIG][@SPLIT]`` reads a hub split (exported once to JSON lines, :mod:`.hub`)
with the same columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.answer_checks import to_number
from whitebox_eval.tasks.generation import GenItem
from whitebox_eval.tasks.hub import local_file
from whitebox_eval.tasks.mcq import _blank, rows_and_layout
from whitebox_eval.tasks.rows import Collector, Row, RowError, existing
from whitebox_eval.tasks.spec import TaskSpec

COLUMNS: dict[str, tuple[str, ...]] = {  # what each field is looked for as, first match wins
    "prompt": ("prompt",),
    "question": ("question", "query", "input", "problem"),
    "answer": ("answer", "answers", "reference", "references", "target", "targets", "gold", "output"),
    "context": ("context", "passage", "article", "paragraph"),
    "subject": ("subject", "category", "topic", "domain"),
    "id": ("id", "qid", "question_id", "uid", "idx", "doc_id"),
}


def _layout(columns, fields: Mapping[str, str]) -> dict[str, str | None]:
    """Which column holds each field; RowError naming what is missing."""
    lower = {str(c).lower(): c for c in reversed(list(columns))}
    shown = ", ".join(map(str, columns)) or "none"
    out: dict[str, str | None] = {}
    for name, names in COLUMNS.items():
        if name in fields:
            if fields[name] not in columns:
                raise RowError(f"--field {name}={fields[name]}: no such column (columns: {shown})")
            out[name] = fields[name]
        else:
            out[name] = next((lower[c] for c in names if c in lower), None)
    if "question" in fields:
        out["prompt"] = None
    elif "prompt" in fields:
        out["question"] = None
    if out["prompt"] is None and out["question"] is None:
        raise RowError(f"no prompt or question column (looked for prompt, {', '.join(COLUMNS['question'])}; "
                       f"columns: {shown}); name it with --field question=COLUMN")
    if out["answer"] is None:
        raise RowError(f"no answer column (looked for {', '.join(COLUMNS['answer'])}; columns: {shown}); "
                       "name it with --field answer=COLUMN")
    aliases = lower.get("aliases")
    out["aliases"] = aliases if aliases is not None and aliases != out["answer"] else None
    return out


def _text(value: Any, what: str) -> str:
    """A cell as text; a whole float (Parquet's numbers) without its ``.0``."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RowError(f"{what} should be text, found {type(value).__name__}")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else str(value)


def references(value: Any, what: str) -> list[str]:
    """One reference or a list of them (a JSON list in a CSV cell), stripped, none empty."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RowError(f"{what} is not a JSON list ({exc.msg})") from None
    if hasattr(value, "tolist"):  # a numpy array (pandas' Parquet rows)
        value = value.tolist()
    values = value if isinstance(value, list) else [value]
    out = [_text(v, what).strip() for v in values if not _blank(v)]
    if not out:
        raise RowError(f"{what} is empty; give at least one reference answer")
    return out


def gen_items(spec: TaskSpec, *, limit: int | None = None, on_bad_row: str = "skip", **_: Any) -> list[GenItem]:
    """Your own generation file's rows (module docstring), the first ``limit`` of them."""
    path = local_file("gen", spec.hub) if spec.is_hub else existing(spec.path, file=True)
    fields = dict(spec.fields)
    check = spec.answer or "exact"
    col = Collector(on_bad_row)
    rows, layout_of = rows_and_layout(path, lambda columns: _layout(columns, fields))
    seen: dict[str, int] = {}
    items: list[GenItem] = []
    for r in rows:
        try:
            if isinstance(r.data, RowError):
                raise r.data
            items.append(_item(r, layout_of(r.data), check, seen, path.name))
        except (RowError, WhiteboxError) as exc:
            col.report(r.path, r.line, str(exc))
    if not items and not col.bad:
        raise WhiteboxError(f"{path} holds no rows")
    return list(col.finish(items, "gen", path, limit))


def _item(r: Row, lay: dict[str, str | None], check: str, seen: dict[str, int], file: str) -> GenItem:
    d = r.data
    key = lay["prompt"] or lay["question"]
    if _blank(d.get(key)):
        raise RowError(f"missing field {key!r}")
    text = _text(d[key], key)
    refs = references(d.get(lay["answer"]), f"answer {lay['answer']!r}")
    if lay["aliases"] and not _blank(d.get(lay["aliases"])):
        refs += [a for a in references(d[lay["aliases"]], "aliases") if a not in refs]
    if check == "numeric":
        bad = [x for x in refs if to_number(x) is None]
        if bad:
            raise RowError(f"reference {bad[0]!r} is not a number, but --answer numeric compares numbers")
    ident = None if lay["id"] is None or _blank(d.get(lay["id"])) else _text(d[lay["id"]], "id").strip()
    if ident is not None and seen.setdefault(ident, r.line) != r.line:
        raise RowError(f"id {ident!r} repeats line {seen[ident]}'s; every row needs its own id")
    context = None if lay["context"] is None or _blank(d.get(lay["context"])) else _text(d[lay["context"]], "context")
    subject = None if lay["subject"] is None or _blank(d.get(lay["subject"])) else _text(d[lay["subject"]], "subject")
    if lay["prompt"] is not None:
        question, prompt = text, text
    else:
        question = (" ".join(context.split()) + "\n" if context else "") + f"Question: {' '.join(text.split())}"
        prompt = None
    return GenItem(id=f"gen/{ident if ident is not None else f'{file}:{r.line}'}", question=question, check=check,
                   gold=refs[0], references=refs, gold_response=f" {refs[0]}", group=subject, prompt=prompt,
                   meta={"source": str(r.path), "line": r.line})
