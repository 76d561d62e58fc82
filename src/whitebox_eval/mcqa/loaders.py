"""Loaders for local MCQA files in their published formats (paper 000 App. A.1, paper 004 sec. 2.3).

=========  ===============================================================================
name       accepted files
=========  ===============================================================================
mmlu       hendrycks CSV without header ``question,A,B,C,D,answer-letter`` (one file per
           subject, or a folder of them), or a headered CSV ``question,choice0..3,answer``
           (answer 0-3 or a letter; ``A..D`` / ``option0..`` columns also accepted)
hellaswag  original jsonl: ``ctx`` (or ``ctx_a`` + ``ctx_b``), ``endings``, ``label``
cosmosqa   csv or jsonl: ``id, context, question, answer0..answer3, label``
halueval   dialogue JSON lines: ``knowledge, dialogue_history, right_response,
           hallucinated_response``
arc        llm-foundry jsonl (``query, choices, gold``) or AI2 jsonl
           (``question.stem``, ``question.choices[].text/label``, ``answerKey``)
triviaqa   llm-foundry jsonl (``context, answer, aliases``) or rc-style jsonl
           (``question``, ``answer.value``, ``answer.aliases``); optional distractors
           under ``distractors`` / ``incorrect_answers``
=========  ===============================================================================

A malformed row (bad JSON, missing field, gold out of range, duplicate or empty option,
wrong number of CSV fields) is reported as ``file:line: problem`` (1-based line where
the row starts). ``on_bad_row="error"`` raises WhiteboxError at the first one;
``"skip"`` drops it, records a BadRow in the result's ``bad_rows`` and warns once with
a summary. Every other row is loaded; the whole file is read even with ``limit`` (the
first ``limit`` items are returned), so the same file always gives the same items.

Choices where the papers are silent (parameters of the per-dataset functions):
HaluEval options (000 App. A.2 Listing 4: four dialogue continuations) are the right
response (gold), the row's hallucinated response and ``n_options - 2`` responses drawn
from other rows; the context is the dialogue history (the knowledge goes to ``meta``).
TriviaQA MCQ distractors come from the file when it has them, else from other rows'
answers that do not match the gold answer or any alias after normalization (004 sec.
2.3: "ensuring that all generated incorrect answers are truly incorrect"). Gold
positions of built options are exactly balanced in a seeded order.
"""

from __future__ import annotations

import csv
import json
import random
import re
import string
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.datafiles import json_lines, open_text
from whitebox_eval.mcqa.metrics import normalize_answer
from whitebox_eval.mcqa.items import MCQItem

HELLASWAG_QUESTION = "Which of the following is the best ending to the given context?"
HALUEVAL_QUESTION = "Which of the following responses is the most suitable one for the given dialogue?"

ON_BAD_ROW = ("error", "skip")


@dataclass(frozen=True)
class BadRow:
    """A malformed row: file, 1-based line where the row starts, and what is wrong."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


class MalformedRowsWarning(UserWarning):
    """Emitted once per load when ``on_bad_row="skip"`` dropped rows."""


class MCQDataset(list[MCQItem]):
    """A list of items that also records the rows skipped while loading (``bad_rows``)."""

    def __init__(self, items: Iterable[MCQItem] = (), bad_rows: Iterable[BadRow] = ()) -> None:
        super().__init__(items)
        self.bad_rows: list[BadRow] = list(bad_rows)


class _RowError(Exception):
    """A problem with one row; the message is the reason."""


@dataclass
class _Row:
    path: Path
    line: int
    data: Any  # parsed record, or a _RowError when reading failed


class _Collector:
    """Applies the on_bad_row policy and keeps the bad rows."""

    def __init__(self, on_bad_row: str) -> None:
        if on_bad_row not in ON_BAD_ROW:
            raise WhiteboxError(f"on_bad_row must be one of {list(ON_BAD_ROW)}, got {on_bad_row!r}")
        self.policy = on_bad_row
        self.bad: list[BadRow] = []

    def report(self, path: Path, line: int, reason: str) -> None:
        bad = BadRow(str(path), line, reason)
        if self.policy == "error":
            raise WhiteboxError(f"{bad}  (fix the row, or load with on_bad_row='skip' to drop malformed rows)")
        self.bad.append(bad)

    def build(self, row: _Row, make: Callable[[_Row], MCQItem]) -> MCQItem | None:
        try:
            if isinstance(row.data, _RowError):
                raise row.data
            item = make(row)
            item.validate()
            return item
        except (_RowError, WhiteboxError) as exc:
            self.report(row.path, row.line, _strip_item_prefix(str(exc)))
            return None

    def finish(self, items: list[MCQItem], name: str, path: Path, limit: int | None) -> MCQDataset:
        if limit is not None:
            items = items[:limit]
        if self.bad:
            shown = "; ".join(str(b) for b in self.bad[:5])
            more = f" (and {len(self.bad) - 5} more)" if len(self.bad) > 5 else ""
            warnings.warn(f"skipped {len(self.bad)} malformed row(s) loading {name} from {path}: {shown}{more}",
                          MalformedRowsWarning, stacklevel=3)
        return MCQDataset(items, self.bad)


def _strip_item_prefix(msg: str) -> str:
    return re.sub(r"^item '[^']*': ", "", msg)


# ----------------------------------------------------------------------------- readers


def _read_jsonl(path: Path) -> Iterator[_Row]:
    """One JSON object per non-blank line; a malformed line becomes a row error."""
    for lineno, data in json_lines(path):
        yield _Row(path, lineno, _RowError(data) if isinstance(data, str) else data)


def _read_csv(path: Path) -> Iterator[_Row]:
    """CSV records (quoted fields may span lines); ``line`` is where each record starts."""
    with open_text(path) as f:
        reader = csv.reader(f)
        start = 1
        try:
            for record in reader:
                line, start = start, reader.line_num + 1
                if not record or all(not c.strip() for c in record):
                    continue
                yield _Row(path, line, record)
        except csv.Error as exc:
            yield _Row(path, start, _RowError(f"unreadable CSV ({exc}); the rest of the file was not read"))
        except UnicodeDecodeError as exc:
            raise WhiteboxError(f"{path} is not UTF-8 text ({exc}); re-save it as UTF-8") from exc


def _require(data: dict, key: str, kind: type | tuple[type, ...] = str) -> Any:
    if key not in data or data[key] is None:
        raise _RowError(f"missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _RowError(f"field {key!r} should be {names}, found {type(value).__name__}")
    return value


def _int_label(value: Any, field: str) -> int:
    if isinstance(value, bool):
        raise _RowError(f"field {field!r} should be an integer, found {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise _RowError(f"field {field!r} should be an integer option index, found {value!r}")


def _letter_index(value: str, n: int) -> int:
    v = value.strip()
    if len(v) == 1 and v.upper() in string.ascii_uppercase[:n]:
        return string.ascii_uppercase.index(v.upper())
    raise _RowError(f"answer {value!r} is not an option letter A-{string.ascii_uppercase[n - 1]}")


def _text_list(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise _RowError(f"field {field!r} should be a list of strings")
    return [x.strip() for x in value]


# ----------------------------------------------------------------------------- MMLU

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
    path = _existing(path)
    col = _Collector(on_bad_row)
    items: list[MCQItem] = []
    for file in _mmlu_files(path):
        subject = _SPLIT_SUFFIX.sub("", file.stem)
        header: dict[str, Any] | None = None
        for n, row in enumerate(_read_csv(file)):
            if n == 0 and not isinstance(row.data, _RowError):
                header = _mmlu_header(row.data)
                if header is not None:
                    continue

            def make(r: _Row, header=header, subject=subject) -> MCQItem:
                rec: list[str] = r.data
                if header is None:
                    if len(rec) != 6:
                        raise _RowError(f"expected 6 fields (question,A,B,C,D,answer), found {len(rec)}")
                    q, opts, ans = rec[0], rec[1:5], rec[5]
                    gold = _letter_index(ans, 4)
                    subj = subject
                else:
                    if len(rec) != header["width"]:
                        raise _RowError(f"expected {header['width']} fields as in the header, found {len(rec)}")
                    q = rec[header["question"]]
                    opts = [rec[j] for j in header["choices"]]
                    ans = rec[header["answer"]].strip()
                    gold = int(ans) if ans.isdigit() else _letter_index(ans, len(opts))
                    subj = rec[header["subject"]].strip() if header["subject"] is not None else subject
                return MCQItem(id=f"mmlu/{subj}/{r.path.name}:{r.line}", question=q.strip(),
                               options=[o.strip() for o in opts], gold=gold, subject=subj,
                               meta={"source": str(r.path), "line": r.line})

            item = col.build(row, make)
            if item is not None:
                items.append(item)
    return col.finish(items, "mmlu", path, limit)


# ----------------------------------------------------------------------------- HellaSwag


def load_hellaswag(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
                   seed: int = 0) -> MCQDataset:
    """HellaSwag jsonl (Zellers et al.) as in paper 000 Listing 3: context = ``ctx``,
    the fixed question HELLASWAG_QUESTION, options = ``endings``. ``seed`` is unused."""
    path = _existing(path, file=True)
    col = _Collector(on_bad_row)

    def make(r: _Row) -> MCQItem:
        d = r.data
        if "ctx" in d and d["ctx"] is not None:
            ctx = _require(d, "ctx")
        else:
            ctx = f"{_require(d, 'ctx_a')} {_require(d, 'ctx_b')}".strip()
        endings = _text_list(_require(d, "endings", list), "endings")
        if "label" not in d or d["label"] in (None, ""):
            raise _RowError("missing field 'label' (unlabelled test rows cannot be scored)")
        gold = _int_label(d["label"], "label")
        ident = d.get("ind", r.line)
        return MCQItem(id=f"hellaswag/{ident}", question=HELLASWAG_QUESTION, options=endings, gold=gold,
                       context=ctx.strip(), subject=d.get("activity_label"),
                       meta={k: d[k] for k in ("ind", "source_id", "split", "split_type") if k in d})

    items = [i for r in _read_jsonl(path) if (i := col.build(r, make)) is not None]
    return col.finish(items, "hellaswag", path, limit)


# ----------------------------------------------------------------------------- CosmosQA


def _records(path: Path) -> Iterator[_Row]:
    """Rows of a headered CSV (as dicts) or of a jsonl file, chosen by extension."""
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        yield from _read_jsonl(path)
        return
    header: list[str] | None = None
    for row in _read_csv(path):
        if isinstance(row.data, _RowError):
            yield row
            continue
        if header is None:
            header = [c.strip() for c in row.data]
            continue
        if len(row.data) != len(header):
            yield _Row(path, row.line, _RowError(f"expected {len(header)} fields as in the header, found {len(row.data)}"))
        else:
            yield _Row(path, row.line, dict(zip(header, row.data)))


def load_cosmosqa(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
                  seed: int = 0) -> MCQDataset:
    """CosmosQA (Huang et al.; paper 000 Listing 2), csv or jsonl with
    ``id, context, question, answer0..answer3, label``. ``seed`` is unused."""
    path = _existing(path, file=True)
    col = _Collector(on_bad_row)

    def make(r: _Row) -> MCQItem:
        d = r.data
        keys = sorted((k for k in d if re.fullmatch(r"answer\d+", k)), key=lambda k: int(k[6:]))
        if not keys:
            raise _RowError("missing fields 'answer0'..'answer3'")
        opts = []
        for k in keys:
            opts.append(str(_require(d, k)).strip())
        gold = _int_label(_require(d, "label", (str, int)), "label")
        return MCQItem(id=f"cosmosqa/{d.get('id') or r.line}", question=str(_require(d, "question")).strip(),
                       options=opts, gold=gold, context=str(_require(d, "context")).strip())

    items = [i for r in _records(path) if (i := col.build(r, make)) is not None]
    return col.finish(items, "cosmosqa", path, limit)


# ----------------------------------------------------------------------------- HaluEval


def _balanced_golds(n: int, n_options: int, rng: random.Random) -> list[int]:
    golds = [i % n_options for i in range(n)]
    rng.shuffle(golds)
    return golds


def load_halueval(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
                  seed: int = 0, n_options: int = 4, include_knowledge: bool = False) -> MCQDataset:
    """HaluEval dialogue (Li et al.) as the 4-option HaluDialogue of paper 000 App. A.1-A.2.

    Options: the right response (gold), this row's hallucinated response and
    ``n_options - 2`` responses drawn (seeded) from other rows. Context: the dialogue
    history (``include_knowledge`` prepends the knowledge). Question: HALUEVAL_QUESTION.
    """
    path = _existing(path, file=True)
    if n_options < 2:
        raise WhiteboxError(f"n_options must be >= 2, got {n_options}")
    col = _Collector(on_bad_row)
    parsed: list[tuple[_Row, dict[str, str]]] = []
    for r in _read_jsonl(path):
        try:
            if isinstance(r.data, _RowError):
                raise r.data
            rec = {k: _require(r.data, k).strip() for k in
                   ("knowledge", "dialogue_history", "right_response", "hallucinated_response")}
            for k in ("dialogue_history", "right_response", "hallucinated_response"):
                if not rec[k]:
                    raise _RowError(f"field {k!r} is empty")
            if rec["right_response"] == rec["hallucinated_response"]:
                raise _RowError("right_response and hallucinated_response are identical")
            parsed.append((r, rec))
        except _RowError as exc:
            col.report(r.path, r.line, str(exc))
    pool = sorted({x for _, rec in parsed for x in (rec["right_response"], rec["hallucinated_response"])})
    rng = random.Random(f"halueval/{seed}")
    golds = _balanced_golds(len(parsed), n_options, rng)
    items: list[MCQItem] = []
    for (r, rec), gold in zip(parsed, golds):
        own = [rec["right_response"], rec["hallucinated_response"]][:n_options]
        wrong = own[1:]
        for cand in _candidates([], pool, rng):
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
        built = col.build(_Row(r.path, r.line, None), lambda _r, item=item: item)
        if built is not None:
            items.append(built)
    return col.finish(items, "halueval", path, limit)


# ----------------------------------------------------------------------------- ARC


def _strip_cue(text: str) -> str:
    text = text.strip()
    text = re.sub(r"^Question:\s*", "", text)
    text = re.sub(r"\s*Answer:\s*$", "", text)
    return text.strip()


def load_arc(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
             seed: int = 0) -> MCQDataset:
    """ARC (Clark et al.; paper 004 sec. 1): llm-foundry jsonl (``query`` starting
    ``Question:``, ``choices``, 0-based ``gold``) or AI2 jsonl (``question.stem``,
    ``question.choices``, ``answerKey`` as a label such as ``B`` or ``2``). ``seed`` is unused."""
    path = _existing(path, file=True)
    col = _Collector(on_bad_row)

    def make(r: _Row) -> MCQItem:
        d = r.data
        if "query" in d:
            q = _strip_cue(_require(d, "query"))
            opts = _text_list(_require(d, "choices", list), "choices")
            gold = _int_label(_require(d, "gold", (int, str)), "gold")
            ident = d.get("id", r.line)
        elif isinstance(d.get("question"), dict):
            qd = d["question"]
            q = _require(qd, "stem").strip()
            choices = _require(qd, "choices", list)
            if not all(isinstance(c, dict) and isinstance(c.get("text"), str) and "label" in c for c in choices):
                raise _RowError("question.choices should be a list of {text, label} objects")
            opts = [c["text"].strip() for c in choices]
            labels = [str(c["label"]).strip() for c in choices]
            key = str(_require(d, "answerKey", (str, int))).strip()
            if key not in labels:
                raise _RowError(f"answerKey {key!r} is not one of the choice labels {labels}")
            gold = labels.index(key)
            ident = d.get("id", r.line)
        else:
            raise _RowError("missing field 'query' (llm-foundry layout) or 'question' object (AI2 layout)")
        return MCQItem(id=f"arc/{ident}", question=q, options=opts, gold=gold)

    items = [i for r in _read_jsonl(path) if (i := col.build(r, make)) is not None]
    return col.finish(items, "arc", path, limit)


# ----------------------------------------------------------------------------- TriviaQA

_normalized = normalize_answer  # distractors must differ from the answer after 004's normalisation


def _candidates(own: list[str], pool: list[str], rng: random.Random) -> Iterator[str]:
    """The row's own distractors, then random draws from ``pool``, then all of it shuffled."""
    yield from own
    for _ in range(min(64, len(pool))):
        yield pool[rng.randrange(len(pool))]
    yield from rng.sample(pool, len(pool))


def load_triviaqa(path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
                  seed: int = 0, n_options: int = 4) -> MCQDataset:
    """TriviaQA (Joshi et al.; paper 004 sec. 2.3) for free generation and MCQ.

    Free generation uses ``question`` and ``aliases``; MCQ options are the answer plus
    ``n_options - 1`` distractors: the row's own (``distractors`` / ``incorrect_answers``
    / ``wrong_answers``) when it has enough, else (seeded) other rows' answers, always
    excluding anything equal to the answer or an alias after normalization.
    """
    path = _existing(path, file=True)
    if n_options < 2:
        raise WhiteboxError(f"n_options must be >= 2, got {n_options}")
    col = _Collector(on_bad_row)
    parsed: list[tuple[_Row, str, str, list[str], list[str]]] = []
    for r in _read_jsonl(path):
        try:
            if isinstance(r.data, _RowError):
                raise r.data
            d = r.data
            if "context" in d:
                q = _strip_cue(_require(d, "context"))
                answer = _require(d, "answer").strip()
                aliases = _text_list(d.get("aliases", []), "aliases")
            else:
                q = _require(d, "question").strip()
                ans = _require(d, "answer", (str, dict))
                if isinstance(ans, dict):
                    answer = _require(ans, "value").strip()
                    aliases = _text_list(ans.get("aliases", []), "answer.aliases")
                else:
                    answer = ans.strip()
                    aliases = _text_list(d.get("aliases", []), "aliases")
            if not q:
                raise _RowError("the question is empty")
            if not answer:
                raise _RowError("field 'answer' is empty")
            own = next((d[k] for k in ("distractors", "incorrect_answers", "wrong_answers") if k in d), [])
            own = _text_list(own, "distractors")
            parsed.append((r, q, answer, aliases, own))
        except _RowError as exc:
            col.report(r.path, r.line, str(exc))
    all_answers = sorted({a for _, _, a, _, _ in parsed})
    rng = random.Random(f"triviaqa/{seed}")
    golds = _balanced_golds(len(parsed), n_options, rng)
    items: list[MCQItem] = []
    for (r, q, answer, aliases, own), gold in zip(parsed, golds):
        banned = {_normalized(x) for x in [answer, *aliases]}
        wrong: list[str] = []
        seen = set(banned)
        source = "file" if len([x for x in own if _normalized(x) not in banned]) >= n_options - 1 else "sampled"
        for c in _candidates(own, all_answers, rng):
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
        built = col.build(_Row(r.path, r.line, None), lambda _r, item=item: item)
        if built is not None:
            items.append(built)
    return col.finish(items, "triviaqa", path, limit)


# ----------------------------------------------------------------------------- entry point

LOADERS: dict[str, Callable[..., MCQDataset]] = {
    "mmlu": load_mmlu,
    "hellaswag": load_hellaswag,
    "cosmosqa": load_cosmosqa,
    "halueval": load_halueval,
    "arc": load_arc,
    "triviaqa": load_triviaqa,
}


def _existing(path: str | Path, *, file: bool = False) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise WhiteboxError(
            f"{path} does not exist; give a local file (or, for MMLU, a folder of subject CSVs). "
            "or a Hugging Face dataset as hf:DATASET_ID[:CONFIG][@SPLIT] when online")
    if file and not p.is_file():
        raise WhiteboxError(f"{path} is a folder; this dataset is read from a single file")
    return p


#: Hub rows -> the published local format each loader reads (one JSON object per line,
#: or for MMLU a headered CSV). Hub layouts: cais/mmlu, Rowan/hellaswag, allenai/ai2_arc,
#: allenai/cosmos_qa, pminervini/HaluEval (dialogue), mandarjoshi/trivia_qa (rc.nocontext).
def _hub_row(name: str, row: dict[str, Any]) -> dict[str, Any] | list[str]:
    if name == "mmlu":
        return [row["question"], *row["choices"], str(row["answer"])]
    if name == "arc":
        choices = row["choices"]
        return {"query": f"Question: {row['question']}\nAnswer:", "choices": list(choices["text"]),
                "gold": list(choices["label"]).index(row["answerKey"])}
    if name == "triviaqa":
        answer = row["answer"]
        return {"context": row["question"], "answer": answer["value"], "aliases": list(answer.get("aliases", []))}
    return dict(row)  # hellaswag, cosmosqa and halueval rows already have the file layout


def hub_cache_dir() -> Path:
    """Where hub datasets are exported in their local formats (under the model cache root)."""
    from whitebox_eval.models.loading import cache_root

    return cache_root() / "datasets"


def load_from_hub(name: str, spec: str, *, on_bad_row: str = "error", limit: int | None = None, seed: int = 0,
                  load_dataset: Callable[..., Any] | None = None) -> MCQDataset:
    """Load ``name`` from the Hugging Face hub: ``spec`` is ``DATASET_ID[:CONFIG][@SPLIT]``.

    The split is exported once to :func:`hub_cache_dir` in the dataset's published local
    format and read by the same loader as a local file, so malformed rows are reported
    with a file and line you can open. Needs the ``datasets`` package and network
    access (``load_dataset`` can be injected for testing).
    """
    import csv as _csv

    key = name.strip().lower()
    if key not in LOADERS:
        raise WhiteboxError(f"unknown MCQ dataset {name!r}; known: {', '.join(LOADERS)}")
    ident, _, split = spec.partition("@")
    dataset_id, _, config = ident.partition(":")
    split = split or "test"
    if load_dataset is None:
        try:
            from datasets import load_dataset
        except ImportError:
            raise WhiteboxError("loading from the Hugging Face hub needs the `datasets` package: pip install datasets") from None
    target = hub_cache_dir() / f"{key}-{dataset_id.replace('/', '--')}-{config or 'default'}-{split}"
    target = target.with_suffix(".csv" if key == "mmlu" else ".jsonl")
    if not target.is_file():
        try:
            rows = load_dataset(dataset_id, config or None, split=split)
        except Exception as e:  # network, unknown id, unknown split: all end the same way for the user
            raise WhiteboxError(f"could not load {dataset_id!r} ({config or 'default'}, {split}) from the hub: {e}. "
                                "Offline, download the files and pass their local path") from e
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(target.suffix + ".partial")
        with tmp.open("w", newline="", encoding="utf-8") as f:
            if key == "mmlu":
                writer = _csv.writer(f)
                writer.writerow(["question", "A", "B", "C", "D", "answer"])
                for row in rows:
                    writer.writerow(_hub_row(key, row))
            else:
                for row in rows:
                    f.write(json.dumps(_hub_row(key, row), ensure_ascii=False) + "\n")
        tmp.replace(target)
    return LOADERS[key](target, on_bad_row=on_bad_row, limit=limit, seed=seed)


def load_mcq_dataset(name: str, path: str | Path, *, on_bad_row: str = "error", limit: int | None = None,
                     seed: int = 0) -> MCQDataset:
    """Load a local MCQA dataset by name (one of LOADERS) into MCQItems.

    Args:
        name: ``"mmlu"``, ``"hellaswag"``, ``"cosmosqa"``, ``"halueval"``, ``"arc"``, ``"triviaqa"``.
        path: the file (or for MMLU a folder of subject CSVs), or ``hf:DATASET_ID[:CONFIG][@SPLIT]``
            for a Hugging Face hub dataset when online (see :func:`load_from_hub`).
        on_bad_row: ``"error"`` raises at the first malformed row (``file:line: problem``);
            ``"skip"`` drops such rows, lists them in the result's ``bad_rows`` and warns.
        limit: return only the first ``limit`` items.
        seed: seeds the options built by HaluEval and TriviaQA.
    """
    key = name.strip().lower()
    if key not in LOADERS:
        raise WhiteboxError(f"unknown MCQ dataset {name!r}; known: {', '.join(LOADERS)}")
    if limit is not None and limit < 0:
        raise WhiteboxError(f"limit must be >= 0, got {limit}")
    if isinstance(path, str) and path.startswith("hf:"):
        return load_from_hub(key, path[3:], on_bad_row=on_bad_row, limit=limit, seed=seed)
    return LOADERS[key](path, on_bad_row=on_bad_row, limit=limit, seed=seed)
