"""Where the real benchmarks are: ``--data NAME=PATH`` and ``--data-root DIR``.

The rule: ``--data NAME=PATH`` names one benchmark's file (or folder); every other
benchmark a plan needs is looked up under the data root, in ``DIR/NAME/`` laid out as
``../shared/datasets`` is (MMLU: the ``test/`` folder of per-subject CSVs with ``dev/``
beside it; Geometry of Truth: the folder of its CSVs; any other benchmark: the one data
file in its folder). The data root is ``--data-root``, else ``$WHITEBOX_EVAL_DATA``, else
``../shared/datasets`` when that folder exists. A benchmark the plan needs and cannot
find, or cannot read to its end, ends the command before any work, in one line naming
the fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from whitebox_eval.errors import WhiteboxError

BENCHMARKS: dict[str, str] = {
    "mmlu": "MMLU (hendrycks CSV layout: a test/ folder of <subject>_test.csv, dev/ beside it)",
    "hellaswag": "HellaSwag validation (JSON lines)",
    "cosmosqa": "CosmosQA dev (CSV or JSON lines)",
    "halueval": "HaluEval dialogue (JSON lines)",
    "arc": "ARC-Challenge (JSON lines)",
    "triviaqa": "TriviaQA (JSON lines with answer aliases)",
    "gsm8k": "GSM8K test (JSON lines, answers ending '#### N')",
    "snli": "SNLI 1.0 (JSON lines)",
    "geometry_of_truth": "Geometry of Truth (a folder of its CSVs: cities.csv, sp_en_trans.csv, ...)",
    "humaneval": "HumanEval (OpenAI's JSON lines: task_id, prompt, canonical_solution, test, entry_point)",
    "bigbench": "BIG-Bench tasks (a folder of task.json files: <task>.task.json)",
    "wikitext2": "WikiText-2 (plain text, e.g. valid.txt): running text to train SAEs on",
}
HUB_IDS: dict[str, str] = {
    "mmlu": "cais/mmlu, test 14,042 items", "hellaswag": "Rowan/hellaswag, validation 10,042",
    "cosmosqa": "allenai/cosmos_qa, validation 2,985", "halueval": "pminervini/HaluEval, dialogue 10,000",
    "arc": "allenai/ai2_arc, ARC-Challenge test 1,172", "triviaqa": "mandarjoshi/trivia_qa",
    "gsm8k": "openai/gsm8k, test 1,319", "snli": "stanfordnlp/snli, test 10,000",
    "geometry_of_truth": "none: github.com/saprmarks/geometry-of-truth, datasets/",
    "humaneval": "openai/openai_humaneval, test 164", "bigbench": "none: github.com/google/BIG-bench, task.json files",
    "wikitext2": "Salesforce/wikitext, wikitext-2-raw-v1",
}
"""Where each benchmark is published on the Hugging Face hub (for the paper-scale plan), to be
saved in the layout above (the loaders read the files, never the hub)."""
FOLDER_BENCHMARKS = {"mmlu": "test", "geometry_of_truth": "", "bigbench": ""}
"""Benchmarks given as a folder: the sub-folder of DIR/NAME that is used."""
IGNORED = {"license", "readme", "readme.md", "license.txt", ".ds_store"}
LENIENT_TEXT = {"geometry_of_truth"}
"""Benchmarks whose loader reads a line that is not UTF-8 as a bad row (skipped), not a bad file."""
DATA_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json")
"""The files of a benchmark folder that are read (its README or LICENSE are not)."""
DEFAULT_ROOT = Path("..") / "shared" / "datasets"
ENV = "WHITEBOX_EVAL_DATA"


def parse_data_options(items: Sequence[str]) -> dict[str, str]:
    """``["mmlu=PATH", ...]`` -> ``{"mmlu": "PATH"}``; an unknown name or a missing ``=`` is one line."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        name = name.strip().lower()
        if not sep or not path.strip():
            raise WhiteboxError(f"--data takes NAME=PATH (got {item!r}); names: {', '.join(BENCHMARKS)}")
        if name not in BENCHMARKS:
            raise WhiteboxError(f"--data {name}: unknown benchmark; names: {', '.join(BENCHMARKS)}")
        out[name] = path.strip()
    return out


def data_root(root: str | None) -> Path | None:
    """The data root by the rule above (None when there is none)."""
    if root:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise WhiteboxError(f"--data-root {root}: no such folder")
        return path
    if os.environ.get(ENV):
        path = Path(os.environ[ENV]).expanduser()
        if not path.is_dir():
            raise WhiteboxError(f"${ENV}={os.environ[ENV]}: no such folder")
        return path
    return DEFAULT_ROOT if DEFAULT_ROOT.is_dir() else None


def _data_file(folder: Path, name: str) -> Path:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower() not in IGNORED
                   and not p.name.startswith("."))
    if len(files) != 1:
        found = ", ".join(p.name for p in files) or "no data file"
        raise WhiteboxError(f"{folder} holds {found}: give the file with --data {name}=PATH")
    return files[0]


def locate(needed: Sequence[str], given: Mapping[str, str], root: Path | None,
           needed_by: Mapping[str, str] | None = None) -> dict[str, str]:
    """Absolute paths of the ``needed`` benchmarks, from ``given`` (``--data``) or ``root``."""
    out: dict[str, str] = {}
    for name in needed:
        why = f" ({needed_by[name]} needs it)" if needed_by and name in needed_by else ""
        if name in given:
            path = Path(given[name]).expanduser()
            if not path.exists():
                raise WhiteboxError(f"--data {name}={given[name]}: no such file or folder")
            out[name] = str(path.resolve())
            continue
        if root is None:
            raise WhiteboxError(f"{BENCHMARKS[name]} not found{why}: give --data {name}=PATH "
                                f"(or --data-root DIR holding {name}/)")
        folder = root / name
        if not folder.is_dir():
            raise WhiteboxError(f"{BENCHMARKS[name]} not found under {root}{why}: give --data {name}=PATH")
        if name in FOLDER_BENCHMARKS:
            path = folder / FOLDER_BENCHMARKS[name] if FOLDER_BENCHMARKS[name] else folder
            if not path.is_dir():
                raise WhiteboxError(f"{path} is not a folder{why}: give --data {name}=PATH")
        else:
            path = _data_file(folder, name)
        out[name] = str(path.resolve())
    for name, path in out.items():
        readable(name, Path(path))
    return out


def readable(name: str, path: Path) -> None:
    """Read benchmark ``name``'s file (or each data file of its folder) to its end, so data that
    cannot be read (a failing disk, text that is not UTF-8) stops the command before any work,
    in one line, as a missing file does."""
    from whitebox_eval.datafiles import check_readable

    files = [path] if not path.is_dir() else sorted(
        f for f in path.iterdir() if f.is_file() and f.suffix.lower() in DATA_SUFFIXES and f.name.lower() not in IGNORED)
    try:
        for f in files:
            check_readable(f, text=name not in LENIENT_TEXT and f.suffix.lower() != ".parquet")
    except WhiteboxError as e:
        raise WhiteboxError(f"--data {name}: {e}") from None
