"""Datasets, one module each: its source formats, splits, demonstration pool, prompt
styles and metric choices (as lm-eval keeps one place per task). The suites
(``mcqa``, ``formats``, ``mui``) import their data from here and never from each other.

=========  ===============================================================================
name       accepted files (module)
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
mcq        your own file (:mod:`.mcq`): JSON lines, CSV or Parquet with a question, 2-26
           choices (a list or one column per choice) and the answer (index, letter, text)
ssd        synthetic (:mod:`.ssd`, paper 000 sec. 5.1)
arithmetic synthetic (:mod:`.arithmetic`, paper 004 sec. 2.3)
=========  ===============================================================================

Shared pieces: :mod:`.items` (the MCQItem record), :mod:`.rows` (readers and the
bad-row policy), :mod:`.prompts` (the papers' prompt formats), :mod:`.demos` (where
k-shot demonstrations come from), :mod:`.hub` (hub datasets when online).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.arc import load_arc
from whitebox_eval.tasks.cosmosqa import load_cosmosqa
from whitebox_eval.tasks.halueval import load_halueval
from whitebox_eval.tasks.hellaswag import load_hellaswag
from whitebox_eval.tasks.mcq import load_mcq_file
from whitebox_eval.tasks.mmlu import load_mmlu
from whitebox_eval.tasks.rows import MCQDataset
from whitebox_eval.tasks.triviaqa import load_triviaqa

def dataset_name(task: str) -> str:
    """The dataset a task spec names: ``hellaswag=PATH`` -> ``hellaswag``,
    ``arithmetic:add1,mul2`` -> ``arithmetic``, ``ssd`` -> ``ssd``."""
    return (task.split("=", 1)[0] if "=" in task else task.split(":", 1)[0]).strip().lower()


LOADERS: dict[str, Callable[..., MCQDataset]] = {
    "mmlu": load_mmlu,
    "hellaswag": load_hellaswag,
    "cosmosqa": load_cosmosqa,
    "halueval": load_halueval,
    "arc": load_arc,
    "triviaqa": load_triviaqa,
    "mcq": load_mcq_file,
}


#: lm-eval task names -> (our dataset, the hub spec lm-eval reads when online)
LM_EVAL_NAMES: dict[str, tuple[str, str]] = {
    "mmlu": ("mmlu", "hf:cais/mmlu:all@test"),
    "hellaswag": ("hellaswag", "hf:Rowan/hellaswag@validation"),
    "arc_challenge": ("arc", "hf:allenai/ai2_arc:ARC-Challenge@test"),
    "arc_easy": ("arc", "hf:allenai/ai2_arc:ARC-Easy@test"),
    "cosmosqa": ("cosmosqa", "hf:allenai/cosmos_qa@validation"),
    "triviaqa": ("triviaqa", "hf:mandarjoshi/trivia_qa:rc.nocontext@validation"),
    "halueval": ("halueval", ""),
}


def lm_eval_name_hint(spec: str) -> str | None:
    """The one-line fix for a task given as lm-eval names it (``hellaswag``, ``mmlu_anatomy``,
    ``arc_challenge=PATH``, ``mmlu,hellaswag``), or None when ``spec`` is not such a name."""
    if "," in spec and not {"=", ":"} & set(spec.split(",", 1)[0]):  # arithmetic:add1,mul2 is one task
        return (f"--task {spec!r} lists several tasks: one run evaluates one task; run the command once per task, "
                "each with NAME=PATH")
    name, eq, path = spec.partition("=")
    key = name.strip().lower()
    subject = key[5:] if key.startswith("mmlu_") else None
    ours, hub = LM_EVAL_NAMES.get("mmlu" if subject else key, (None, None))
    if ours is None or (eq and key == ours):
        return None
    if subject:
        hub = f"hf:cais/mmlu:{subject}@test"
    if eq:
        return f"{key!r} is lm-eval's task name; write --task {ours}={path}"
    online = f", or {ours}={hub} when online" if hub else ""
    return f"--task {key} needs its data: write --task {ours}=PATH with the local file{online}"


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
        raise WhiteboxError(lm_eval_name_hint(f"{name}={path}") or f"unknown MCQ dataset {name!r}; known: {', '.join(LOADERS)}")
    if limit is not None and limit < 0:
        raise WhiteboxError(f"limit must be >= 0, got {limit}")
    if isinstance(path, str) and path.startswith("hf:"):
        from whitebox_eval.tasks.hub import load_from_hub

        return load_from_hub(key, path[3:], on_bad_row=on_bad_row, limit=limit, seed=seed)
    return LOADERS[key](path, on_bad_row=on_bad_row, limit=limit, seed=seed)
