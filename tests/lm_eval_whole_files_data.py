"""The whole-file lm-eval settings as our ``--task`` specs (shared by the prompt and score tests).

``tests/fixtures/lm_eval_whole_files.json`` was written by lm-eval 0.4.13
(``benchmarks/lm_eval_fixtures.py --part whole``); for its k-shot settings the shared
samples' first rows play the training split and the rest are evaluated.
"""

from __future__ import annotations

from pathlib import Path

TRAIN = {"arc": 50, "hellaswag": 40}  # benchmarks/lm_eval_fixtures.py TRAIN_ROWS
SOURCES = {"arc": "arc/arc_challenge_sample.llmfoundry.jsonl", "hellaswag": "hellaswag/hellaswag_val_sample.jsonl"}


def split_file(shared: Path, name: str, out: Path) -> tuple[str, str]:
    """(evaluated file, training file): the sample's first TRAIN rows play the train split;
    the train file lies beside the evaluated one, where the demonstrations are looked for."""
    lines = (shared / SOURCES[name]).read_text(encoding="utf-8").splitlines(keepends=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}_train.jsonl").write_text("".join(lines[:TRAIN[name]]), encoding="utf-8")
    (out / f"{name}_test.jsonl").write_text("".join(lines[TRAIN[name]:]), encoding="utf-8")
    return str(out / f"{name}_test.jsonl"), str(out / f"{name}_train.jsonl")


def task_spec(name: str, shots: int, shared: Path, out: Path) -> str:
    """Our ``--task`` for one setting: MMLU's test folder (dev beside it), a whole sample file
    0-shot, or the evaluated part of a split sample k-shot."""
    if name == "mmlu":
        return f"mmlu={shared / 'mmlu' / 'test'}"
    if shots == 0:
        return f"{name}={shared / SOURCES[name]}"
    return f"{name}={split_file(shared, name, out)[0]}"
