"""Your own multiple-choice file (``--task mcq=PATH``): JSON lines, CSV or Parquet.

Each row is one question. Columns (names matched without regard to case; ``--field
NAME=COLUMN`` names any other column, see :func:`parse_fields`):

- question: ``question`` (or ``query``, ``prompt``, ``stem``, ``input``);
- choices: a list column (``choices``, ``options``, ``endings``, ``candidates``; in a CSV
  cell a JSON list; a hub-style ``{"text": [...], "label": [...]}`` object too), or one
  column per choice: ``A``, ``B``, ... / ``choice1``.. / ``option_a``.. / ``ending0``..
  (in their number or letter order). From 2 to 26 per row; rows may differ (an empty or
  missing trailing per-choice cell means the row has fewer choices). Choice text is
  kept as the file has it;
- answer (``answer``, ``label``, ``gold``, ``target``, ``answerKey``, ...): an integer is a
  **0-based** index (also when written as a digit string, as in a CSV); a single letter
  ``A``-``Z`` (either case) is a label; anything else must equal one choice's text (or,
  with a ``{text, label}`` object, one label). A value that reads two ways (the answer
  ``"2"`` among the choices ``"1", "2", "3"``) is a bad row, never guessed. A file whose
  numeric answers look 1-based (none is 0 and one equals its row's choice count) is
  refused as a whole;
- optional ``context`` (``passage``, ``article``, ...), ``subject`` (``category``, ...)
  and ``id`` (``qid``, ...; else the id is ``FILE:LINE``).

A malformed row follows the bad-row policy of :mod:`.rows` (``file:line: problem``;
Parquet rows are numbered from 1 in place of lines). ``hf:DATASET[:CONFIG][@SPLIT]``
reads a hub split (exported once to JSON lines, :mod:`.hub`) with the same columns.
"""

from __future__ import annotations

import json
import re
import string
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whitebox_eval.datafiles import open_text, reading
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.lm_eval import LmEvalDoc
from whitebox_eval.tasks.rows import Collector, MCQDataset, Row, RowError, existing, read_csv, read_jsonl

FIELD_NAMES = ("question", "choices", "answer", "context", "subject", "id")
GEN_FIELD_NAMES = ("question", "prompt", "answer", "context", "subject", "id")  # your own generation file
COLUMNS: dict[str, tuple[str, ...]] = {  # what each field is looked for as, first match wins
    "question": ("question", "query", "prompt", "stem", "input"),
    "choices": ("choices", "options", "endings", "candidates"),
    "answer": ("answer", "label", "gold", "target", "answerkey", "answer_idx", "answer_index", "correct_answer"),
    "context": ("context", "passage", "article", "paragraph", "ctx"),
    "subject": ("subject", "category", "topic", "domain"),
    "id": ("id", "qid", "question_id", "uid", "idx", "doc_id"),
}
MAX_CHOICES = 26
LETTERS = string.ascii_uppercase
#: one column per choice: ``A``, ``choice1``, ``choice_1``, ``option_a``, ``optionA``, ``ending0``, ``answer0``
_PER_CHOICE = re.compile(r"(?:(choice|option|opt|ending|answer)[ _-]?)?(\d{1,2}|[a-z])", re.IGNORECASE)
SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv",
            ".parquet": "parquet", ".pq": "parquet"}


def parse_fields(values: Sequence[str], kind: str = "mcq") -> tuple[tuple[str, str], ...]:
    """``--field NAME=COLUMN`` values as ``((name, column), ...)`` in :data:`FIELD_NAMES`
    order; ``choices`` may name one list column or several per-choice columns
    (``choices=opt1,opt2,opt3``, kept in that order). ``kind`` ``gen``: your own generation
    file, whose fields are the same but ``choices``, and ``prompt`` (:mod:`.gen_file`)."""
    known = FIELD_NAMES if kind == "mcq" else GEN_FIELD_NAMES
    out: dict[str, str] = {}
    for value in values:
        name, eq, column = str(value).partition("=")
        name, column = name.strip().lower(), ",".join(c.strip() for c in column.split(","))
        if not eq or name not in known or not column.strip(","):
            raise WhiteboxError(f"--field {value!r}: write NAME=COLUMN with NAME one of {', '.join(known)}")
        if "," in column and (name != "choices" or "" in column.split(",")):
            raise WhiteboxError(f"--field {value!r}: only choices takes a comma list of columns (one per choice)")
        if name in out and out[name] != column:
            raise WhiteboxError(f"--field {name} is given twice ({out[name]} and {column})")
        out[name] = column
    return tuple((n, out[n]) for n in known if n in out)


@dataclass(frozen=True)
class Layout:
    """Which columns hold each field; ``choices`` is one list column or per-choice columns."""

    question: str
    choices: str | tuple[str, ...]
    answer: str
    context: str | None = None
    subject: str | None = None
    id: str | None = None


def find_layout(columns: Sequence[str], fields: Mapping[str, str]) -> Layout:
    """The :class:`Layout` of a row or file with these ``columns``; raises RowError naming
    what is missing and the columns there are."""
    lower = {c.lower(): c for c in reversed(list(columns))}  # the first spelling of a name wins
    shown = ", ".join(map(str, columns)) or "none"

    def column(name: str, required: bool) -> str | None:
        if name in fields:
            if fields[name] not in columns:
                raise RowError(f"--field {name}={fields[name]}: no such column (columns: {shown})")
            return fields[name]
        found = next((lower[c] for c in COLUMNS[name] if c in lower), None)
        if found is None and required:
            raise RowError(f"no {name} column (looked for {', '.join(COLUMNS[name])}; columns: {shown}); "
                           f"name it with --field {name}=COLUMN")
        return found

    question, answer = column("question", True), column("answer", True)
    if "choices" in fields:
        names = tuple(fields["choices"].split(","))
        missing = [c for c in names if c not in columns]
        if missing:
            raise RowError(f"--field choices={fields['choices']}: no such column {', '.join(missing)} (columns: {shown})")
        choices: str | tuple[str, ...] = names[0] if len(names) == 1 else names
    else:
        choices = column("choices", False) or _per_choice_columns(columns, {question, answer}, shown)
    return Layout(question, choices, answer, column("context", False), column("subject", False), column("id", False))


def _per_choice_columns(columns: Sequence[str], taken: set[str | None], shown: str) -> tuple[str, ...]:
    groups: dict[str, list[tuple[int, str]]] = {}
    for c in columns:
        m = _PER_CHOICE.fullmatch(str(c).strip())
        if m is None or c in taken or (m.group(1) is None and not m.group(2).isalpha()):
            continue  # a bare number is no choice column; a bare letter is (A, B, ...)
        key = m.group(2)
        index = int(key) if key.isdigit() else LETTERS.index(key.upper())
        groups.setdefault((m.group(1) or "").lower() + ("#" if key.isdigit() else "@"), []).append((index, c))
    runs = []  # each set's consecutive run from its first number (0 or 1) or from A
    for key, found in groups.items():
        found.sort()
        first = found[0][0]
        if first == 0 or (first == 1 and key.endswith("#")):
            run = next((found[:k] for k in range(1, len(found)) if found[k][0] != first + k), found)
            runs.append([(k, c) for k, (_, c) in enumerate(run)])
    best = sorted(runs, key=len, reverse=True)
    if not best or len(best[0]) < 2:
        raise RowError(f"no choices: give a list column ({', '.join(COLUMNS['choices'])}) or one column per choice "
                       f"(A, B, ... or choice1, choice2, ...; columns: {shown}); or name them with --field choices=COL1,COL2,...")
    if len(best) > 1 and len(best[1]) == len(best[0]):
        raise RowError(f"two sets of choice columns ({', '.join(c for _, c in sorted(best[0]))} and "
                       f"{', '.join(c for _, c in sorted(best[1]))}); pick one with --field choices=COL1,COL2,...")
    return tuple(c for _, c in sorted(best[0]))


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or (isinstance(value, float) and value != value)


def _text(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RowError(f"{what} should be text, found {type(value).__name__}")
    return value if isinstance(value, str) else str(value)


def read_choices(data: Mapping[str, Any], layout: Layout) -> tuple[list[str], list[str] | None]:
    """The row's choice texts, and their labels when the choices are a ``{text, label}`` object."""
    if isinstance(layout.choices, tuple):
        cells = [data.get(c) for c in layout.choices]
        n = max((i + 1 for i, v in enumerate(cells) if not _blank(v)), default=0)
        gap = next((layout.choices[i] for i in range(n) if _blank(cells[i])), None)
        if gap is not None:
            raise RowError(f"choice column {gap!r} is empty but a later choice column is not")
        options, labels = [_text(v, f"choice column {c!r}") for v, c in zip(cells[:n], layout.choices)], None
    else:
        value = data.get(layout.choices)
        if isinstance(value, str) and value.strip().startswith("["):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise RowError(f"choices {layout.choices!r} is not a JSON list ({exc.msg})") from None
        labels = None
        if isinstance(value, Mapping) and "text" in value:
            labels = [str(x).strip() for x in value.get("label") or []] or None
            value = value["text"]
        if _blank(value):
            raise RowError(f"missing field {layout.choices!r}")
        if hasattr(value, "tolist"):  # a numpy array (pandas' Parquet rows)
            value = value.tolist()
        if not isinstance(value, list):
            raise RowError(f"choices {layout.choices!r} should be a list (a JSON list in a CSV cell), found {type(value).__name__}")
        options = [_text(v, f"choice {i}") for i, v in enumerate(value)]
        if labels is not None and len(labels) != len(options):
            raise RowError(f"choices {layout.choices!r} has {len(options)} texts but {len(labels)} labels")
    if not 2 <= len(options) <= MAX_CHOICES:
        raise RowError(f"has {len(options)} choice(s); give 2 to {MAX_CHOICES}")
    return options, labels


def numeric_answer(value: Any) -> int | None:
    """The answer as an integer when it is one (``2``, ``2.0`` from Parquet, ``"2"`` in a CSV), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def gold_index(value: Any, options: Sequence[str], labels: Sequence[str] | None = None) -> int:
    """The 0-based index the answer names (see the module docstring); RowError when it
    names none, or two different choices."""
    n = len(options)
    if _blank(value) or isinstance(value, bool):
        raise RowError("the answer is empty" if _blank(value) else f"answer {value!r} is neither index, letter nor text")
    text = value.strip() if isinstance(value, str) else str(value)
    if labels is not None:
        if text in labels:
            return labels.index(text)
        raise RowError(f"answer {text!r} is not one of the choice labels {list(labels)}")
    by_text = [i for i, o in enumerate(options) if o == value or o.strip() == text]
    number = numeric_answer(value)
    readings: dict[str, int] = {}
    if number is not None:
        if number >= n and not by_text:
            raise RowError(f"answer {number} is out of range for {n} choices (numbers are 0-based indices: 0..{n - 1})")
        if number < n:
            readings["as a 0-based index"] = number
    elif len(text) == 1 and text.upper() in LETTERS:
        if LETTERS.index(text.upper()) < n:
            readings["as a letter"] = LETTERS.index(text.upper())
        elif not by_text:
            raise RowError(f"answer {text!r} is not a letter of the {n} choices (A-{LETTERS[n - 1]})")
    if len(by_text) > 1:
        raise RowError(f"answer {text!r} is the text of choices {by_text[0]} and {by_text[1]}; give its index or letter")
    if by_text:
        readings["as text"] = by_text[0]
    if len(set(readings.values())) > 1:
        (how_a, a), (how_b, b) = readings.items()
        raise RowError(f"answer {text!r} reads two ways ({how_a}: choice {a}; {how_b}: choice {b}); write it so that "
                       "it names one choice only (an index, a letter or the choice's text)")
    if not readings:
        raise RowError(f"answer {text!r} is neither a 0-based index, a letter A-{LETTERS[n - 1]} nor the text of a choice")
    return next(iter(readings.values()))


def read_rows(path: Path) -> tuple[Iterator[Row], list[str] | None]:
    """The rows of ``path`` as dicts, and the file's columns (None for JSON lines, whose
    rows each carry their own keys)."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise WhiteboxError(f"cannot tell the format of {path} from its suffix; name it .jsonl (JSON lines), .csv, .tsv "
                            "or .parquet")
    if kind == "jsonl":
        return read_jsonl(path), None
    if kind == "parquet":
        return _parquet_rows(path)
    records = list(read_csv(path) if kind == "csv" else _tsv(path))
    if not records or isinstance(records[0].data, RowError):
        raise WhiteboxError(f"{path}: no header row; the first row names the columns (question, choices or A, B, ..., answer)")
    header = [c.strip() for c in records[0].data]

    def rows() -> Iterator[Row]:
        for r in records[1:]:
            if not isinstance(r.data, RowError) and len(r.data) != len(header):
                r = Row(r.path, r.line, RowError(f"expected {len(header)} fields as in the header, found {len(r.data)}"))
            yield r if isinstance(r.data, RowError) else Row(r.path, r.line, dict(zip(header, r.data)))
    return rows(), header


def _tsv(path: Path) -> Iterator[Row]:
    import csv

    with open_text(path) as f:
        for line, record in enumerate(csv.reader(f, delimiter="\t"), start=1):
            if record and any(c.strip() for c in record):
                yield Row(path, line, record)


def _parquet_rows(path: Path) -> tuple[Iterator[Row], list[str]]:
    open_text(path).close()  # recorded in config.yaml data_files like every other data file (the bytes are hashed)
    try:
        import pyarrow.parquet as pq
        from pyarrow import ArrowException
    except ImportError:
        raise WhiteboxError(f"reading {path.name} (Parquet) needs pyarrow: pip install pyarrow") from None
    with reading(path, damaged=ArrowException):  # not Parquet, cut short, EIO: one line naming the file
        table = pq.read_table(path)
        columns, records = list(table.column_names), table.to_pylist()
    return (Row(path, i, rec) for i, rec in enumerate(records, start=1)), columns


def rows_and_layout(path: Path, find: Callable[[Sequence[str]], Any]) -> tuple[list[Row], Callable[[Any], Any]]:
    """The rows of ``path`` and a function giving a row's column layout, ``find(columns)``: the
    header's for a file with one (a bad header is one line naming the file), else each JSON line's
    own keys' (cached by keys; a row whose keys give none raises its RowError)."""
    records, header = read_rows(path)
    if header is not None:
        try:
            file_layout = find(header)
        except RowError as exc:
            raise WhiteboxError(f"{path}: {exc}") from None
        return list(records), lambda data: file_layout
    layouts: dict[tuple[str, ...], Any] = {}

    def layout_of(data: Any) -> Any:
        keys = tuple(data) if isinstance(data, Mapping) else ()
        if keys not in layouts:
            try:
                layouts[keys] = find(keys)
            except RowError as exc:
                layouts[keys] = exc
        if isinstance(layouts[keys], RowError):
            raise layouts[keys]
        return layouts[keys]

    return list(records), layout_of


def load_mcq_file(path, *, fields: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
                  on_bad_row: str = "error", limit: int | None = None, seed: int = 0) -> MCQDataset:
    """Your own multiple-choice file (module docstring): every row an :class:`MCQItem` with
    its own number of options. ``fields``: ``{name: column}`` (:func:`parse_fields`);
    ``path`` may be a hub split (``hf:DATASET[:CONFIG][@SPLIT]`` or its :class:`~.hub.HubPath`). ``seed`` is unused."""
    fields = dict(fields or {})
    from whitebox_eval.tasks.hub import local_file, location

    path = existing(local_file("mcq", location(path) if isinstance(path, str) else path), file=True)  # a hub split is exported once
    col = Collector(on_bad_row)
    rows, layout_of = rows_and_layout(path, lambda columns: find_layout(columns, fields))
    _refuse_one_based(path, rows, layout_of)
    seen: dict[str, int] = {}

    def make(r: Row) -> MCQItem:
        lay = layout_of(r.data)
        d = r.data
        if _blank(d.get(lay.question)):
            raise RowError(f"missing field {lay.question!r}")
        options, labels = read_choices(d, lay)
        gold = gold_index(d.get(lay.answer), options, labels)
        ident = None if lay.id is None or _blank(d.get(lay.id)) else _text(d[lay.id], f"id {lay.id!r}").strip()
        if ident is not None and seen.setdefault(ident, r.line) != r.line:
            raise RowError(f"id {ident!r} repeats line {seen[ident]}'s; every row needs its own id")
        optional = {k: (None if getattr(lay, k) is None or _blank(d.get(getattr(lay, k)))
                        else _text(d[getattr(lay, k)], k).strip()) for k in ("context", "subject")}
        return MCQItem(id=f"mcq/{ident if ident is not None else f'{path.name}:{r.line}'}",
                       question=_text(d[lay.question], "the question").strip(), options=options, gold=gold,
                       meta={"source": str(path), "line": r.line}, **optional)

    items = [i for r in rows if (i := col.build(r, make)) is not None]
    return col.finish(items, "mcq", path, limit)


def _refuse_one_based(path: Path, rows: list[Row], layout_of) -> None:
    """A file whose numeric answers never say 0 and once equal their row's choice count
    counts from 1: refused as a whole (reading it 0-based would shift every answer)."""
    numbers: list[tuple[int, int, int]] = []  # (answer, choices, line)
    for r in rows:
        if not isinstance(r.data, Mapping):
            continue
        try:
            lay = layout_of(r.data)
            value = r.data.get(lay.answer)
            options, labels = read_choices(r.data, lay)
        except RowError:
            continue
        number = numeric_answer(value)
        if number is not None and labels is None and not any(o.strip() == str(value).strip() for o in options):
            numbers.append((number, len(options), r.line))
    if numbers and min(a for a, _, _ in numbers) >= 1:
        top = next(((a, line) for a, n, line in numbers if a == n), None)
        if top is not None:
            raise WhiteboxError(f"{path}: the numeric answers look 1-based (none is 0; line {top[1]} answers {top[0]} "
                                f"of {top[0]} choices), but numbers are read as 0-based indices; subtract 1 from every "
                                "answer or write them as letters")
        if len(numbers) >= 2:
            warnings.warn(f"{path}: no numeric answer is 0; numbers are read as 0-based indices (if the file counts from "
                          "1, subtract 1 or write letters)", UserWarning, stacklevel=3)


def hub_row(row: dict) -> dict:
    """A hub row as one JSON line of its own columns (the file layout above)."""
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in dict(row).items()}


def lm_eval_doc(item: MCQItem) -> LmEvalDoc:
    """lm-eval's MMLU letters format without the subject header: ``{question}\\nA. ..\\nAnswer:``
    with the item's own number of letters as continuations ``" A"``, ``" B"``, ... (acc only,
    as lm-eval's MMLU); a context, when the row has one, opens the text on its own line."""
    letters = list(LETTERS[: len(item.options)])
    head = (item.context.strip() + "\n" if item.context else "") + item.question.strip()
    text = head + "".join(f"\n{lab}. {opt}" for lab, opt in zip(letters, item.options)) + "\nAnswer:"
    return LmEvalDoc(task="mcq", text=text, choices=letters, gold=item.gold, output="letters", metrics=("acc",),
                     options=tuple(item.options))
