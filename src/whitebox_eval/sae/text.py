"""Training text for SAEs: files to fixed-length token chunks, deduplicated, with a held-out share.

Accepted files: plain text (``.txt`` and anything unrecognised; blank lines separate
documents, wikitext's `` = Title = `` lines are kept), JSON lines (``.jsonl``: the ``text``
field, else every string value of the record joined by newlines), JSON (a list of records or
``{"data": [...]}``), CSV/TSV (each row's cells joined), and folders of such files. Documents
are deduplicated, tokenized, joined by the EOS token into one stream per file and cut into
chunks of ``context`` tokens; repeated chunks are dropped. The held-out share is the last
``heldout`` fraction of each file's chunks, so held-out text is running text that the
training chunks never saw (Wikipedia articles continue across chunk boundaries).

``hf:DATASET[:CONFIG][@SPLIT]`` (split ``train`` unless given) names a hub dataset when online:
its rows are streamed and exported once, as JSON lines with a ``text`` field, under the
cache root (``$WHITEBOX_EVAL_CACHE``), up to a character budget, then read like a local file.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.hub import HubPath

TEXT_FIELDS = ("text", "content", "document", "passage")


@dataclass
class TextChunks:
    """Token chunks for training and held-out evaluation, and where they came from."""

    train: list[list[int]] = field(default_factory=list)
    heldout: list[list[int]] = field(default_factory=list)
    sources: dict[str, dict] = field(default_factory=dict)
    n_duplicate_chunks: int = 0

    @property
    def n_train_tokens(self) -> int:
        return sum(len(c) for c in self.train)

    @property
    def n_heldout_tokens(self) -> int:
        return sum(len(c) for c in self.heldout)

    def fingerprint(self) -> str:
        """Hash of every chunk's ids (train and held-out), naming a residual cache."""
        h = hashlib.sha256()
        for part in (self.train, self.heldout):
            h.update(b"|")
            for c in part:
                h.update(b",".join(str(t).encode() for t in c) + b";")
        return h.hexdigest()[:16]


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _record_text(record) -> str:
    if isinstance(record, dict):
        for key in TEXT_FIELDS:
            if isinstance(record.get(key), str):
                return record[key]
    return "\n".join(_strings(record))


def read_documents(path: Path) -> list[str]:
    """Documents of one file (see the module docstring for the formats)."""
    suffix = path.suffix.lower()
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise WhiteboxError(f"cannot read training text {path}: {exc}") from exc
    if suffix == ".json":
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            data = None  # many ".json" files are JSON lines
        if data is not None:
            if isinstance(data, dict) and isinstance(data.get("data"), list):
                data = data["data"]
            return [_record_text(r) for r in data] if isinstance(data, list) else [_record_text(data)]
    if suffix in (".jsonl", ".json"):
        docs = []
        for n, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    docs.append(_record_text(json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise WhiteboxError(f"{path} line {n} is neither JSON lines nor part of one JSON document: {exc}") from exc
        return docs
    if suffix in (".csv", ".tsv"):
        rows = csv.reader(raw.splitlines(), delimiter="\t" if suffix == ".tsv" else ",")
        return [" ".join(c for c in row if c.strip()) for row in rows]
    return [d for d in raw.split("\n\n")]


def text_files(paths: list[str | Path]) -> list[Path]:
    """Files named by ``paths`` (folders are walked, sorted; hidden files, READMEs and licences skipped)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith(".")
                          and f.stem.upper() not in ("README", "LICENSE", "LICENCE"))
        elif p.is_file():
            out.append(p)
        else:
            raise WhiteboxError(f"training text not found: {p}")
    if not out:
        raise WhiteboxError(f"no training text files in {[str(p) for p in paths]}")
    return out


HUB_CHARS_PER_TOKEN = 8
"""Characters exported from a hub dataset per wanted token (English runs about 4-5 per token)."""
HUB_DEFAULT_CHARS = 4_000_000
"""Characters exported from a hub dataset when no token budget is given (about a million tokens)."""


def hub_text(spec: str, *, max_chars: int, load_dataset: Callable[..., Any] | None = None) -> Path:
    """The local JSON lines export of hub text ``hf:DATASET[:CONFIG][@SPLIT]``: its first rows, up to
    ``max_chars`` characters, exported once and reused (the budget is part of the file name).
    ``load_dataset`` (``datasets.load_dataset`` by default) can be injected for testing."""
    from whitebox_eval.tasks.hub import datasets_load_dataset, hub_cache_dir, hub_spec

    dataset_id, config, split = hub_spec(spec, "train")
    if not dataset_id:
        raise WhiteboxError(f"{spec!r}: expected hf:DATASET[:CONFIG][@SPLIT], e.g. hf:Salesforce/wikitext:wikitext-103-raw-v1@train")
    target = hub_cache_dir() / f"text-{dataset_id.replace('/', '--')}-{config or 'default'}-{split}-{max_chars}.jsonl"
    if target.is_file():
        return target
    load_dataset = load_dataset or datasets_load_dataset()
    try:
        rows = load_dataset(dataset_id, config or None, split=split, streaming=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp, total = target.with_suffix(".jsonl.partial"), 0
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                text = _record_text(row).strip()
                if text:
                    f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                    total += len(text)
                    if total >= max_chars:
                        break
    except Exception as e:  # network, unknown id, config or split: all end the same way for the user
        raise WhiteboxError(f"could not read {dataset_id!r} ({config or 'default'}, {split}) from the hub: {e}. "
                            "Offline, download the text and pass its local path to --text") from e
    if total == 0:
        tmp.unlink(missing_ok=True)
        raise WhiteboxError(f"{spec}: no text in its rows (text fields: {', '.join(TEXT_FIELDS)}, else every string)")
    tmp.replace(target)
    return target


def chunk_text(tokenizer, paths: list[str | Path], *, context: int = 256, heldout: float = 0.05,
               max_train_tokens: int | None = None) -> TextChunks:
    """Tokenize, deduplicate and chunk the files (``hf:`` names exported first, see
    :func:`hub_text`); the last ``heldout`` share of each file is held out."""
    if context < 2:
        raise WhiteboxError(f"context must be at least 2 tokens, got {context}")
    if not 0.0 <= heldout < 1.0:
        raise WhiteboxError(f"the held-out share must be in [0, 1), got {heldout}")
    budget = (HUB_DEFAULT_CHARS if max_train_tokens is None
              else math.ceil(HUB_CHARS_PER_TOKEN * max_train_tokens / (1 - heldout)))
    paths = [hub_text(p, max_chars=budget) if HubPath.parse(p) else p for p in paths]
    eos = tokenizer.eos_token_id
    seen_docs: set[str] = set()
    seen_chunks: set[bytes] = set()
    out = TextChunks()
    for path in text_files(paths):
        stream: list[int] = []
        for doc in read_documents(path):
            doc = doc.strip()
            if not doc or doc in seen_docs:
                continue
            seen_docs.add(doc)
            stream += tokenizer(doc, add_special_tokens=False)["input_ids"]
            if eos is not None:
                stream.append(eos)
        chunks = []
        for s in range(0, len(stream) - context + 1, context):
            c = stream[s:s + context]
            key = hashlib.sha1(repr(c).encode()).digest()
            if key in seen_chunks:
                out.n_duplicate_chunks += 1
                continue
            seen_chunks.add(key)
            chunks.append(c)
        n_held = round(heldout * len(chunks))
        out.train += chunks[:len(chunks) - n_held]
        out.heldout += chunks[len(chunks) - n_held:]
        out.sources[str(path)] = {"n_tokens": len(stream), "n_train_chunks": len(chunks) - n_held,
                                  "n_heldout_chunks": n_held}
    if max_train_tokens is not None and out.n_train_tokens > max_train_tokens:
        out.train = _spread(out.train, max(1, max_train_tokens // context))
    if not out.train:
        raise WhiteboxError(f"the training text gives no chunk of {context} tokens; give more text or a smaller context")
    return out


def _spread(chunks: list[list[int]], n: int) -> list[list[int]]:
    """``n`` chunks spread evenly over ``chunks`` (so every source keeps its share)."""
    step = len(chunks) / n
    return [chunks[int(i * step)] for i in range(n)]


def first_tokens(chunks: list[list[int]], n_tokens: int) -> list[list[int]]:
    """The leading chunks holding at least ``n_tokens`` tokens (all of them if fewer)."""
    out, total = [], 0
    for c in chunks:
        if total >= n_tokens:
            break
        out.append(c)
        total += len(c)
    return out
