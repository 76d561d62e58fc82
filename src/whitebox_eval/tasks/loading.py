"""Loading a dataset's multiple-choice items by its name: :data:`LOADERS` (each file
dataset's loader, from its record in :mod:`.registry`), :func:`load_mcq_dataset` (a local
file or a hub split), :func:`load_from_hub`, and the one-line hint for a task given as
lm-eval names it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import registry
from whitebox_eval.tasks.hub import HubPath, export_split
from whitebox_eval.tasks.rows import MCQDataset

#: the file datasets with multiple-choice items and their loaders (:mod:`.registry`)
LOADERS: dict[str, Callable[..., MCQDataset]] = {
    r.name: r.load_mcq_function() for r in registry.RECORDS.values() if r.is_file and r.mcq}


def lm_eval_name_hint(spec: str) -> str | None:
    """The one-line fix for a task given as lm-eval names it (``hellaswag``, ``mmlu_anatomy``,
    ``arc_challenge=PATH``, ``mmlu,hellaswag``), or None when ``spec`` is not such a name."""
    if "," in spec and not {"=", ":"} & set(spec.split(",", 1)[0]):  # arithmetic:add1,mul2 is one task
        return (f"--task {spec!r} lists several tasks: one run evaluates one task; run the command once per task, "
                "each with NAME=PATH")
    name, eq, path = spec.partition("=")
    key = name.strip().lower()
    subject = key[5:] if key.startswith("mmlu_") else None
    wanted = "mmlu" if subject else key
    ours, hub = next(((r.name, h) for r in registry.RECORDS.values() for t, h in r.lm_eval_tasks if t == wanted),
                     (None, None))
    if ours is None and wanted in registry.RECORDS and registry.RECORDS[wanted].is_file:
        ours, hub = wanted, registry.RECORDS[wanted].hub  # a dataset name without its file
    if ours is None or (eq and key == ours):
        return None
    if subject:
        hub = f"hf:cais/mmlu:{subject}@test"
    if eq:
        return f"{key!r} is lm-eval's task name; write --task {ours}={path}"
    online = f", or {ours}={hub} when online" if hub else ""
    lm_eval_task = any(t == wanted for t, _ in registry.record(ours).lm_eval_tasks)
    also = f", or lm-eval:{key} (lm-eval's own task)" if lm_eval_task and not registry.record(ours).mcq else ""
    return f"--task {key} needs its data: write --task {ours}=PATH with the local file{online}{also}"


def load_mcq_dataset(name: str, path: str | Path | HubPath, *, on_bad_row: str = "error", limit: int | None = None,
                     seed: int = 0, **options) -> MCQDataset:
    """Load a local MCQA dataset by name (one of LOADERS) into MCQItems.

    Args:
        name: ``"mmlu"``, ``"hellaswag"``, ``"cosmosqa"``, ``"halueval"``, ``"arc"``, ``"triviaqa"``.
        path: the file (or for MMLU a folder of subject CSVs), or a hub split (a parsed
            :class:`~.hub.HubPath`: :func:`~.hub.location` reads ``hf:DATASET_ID[:CONFIG][@SPLIT]``)
            when online (see :func:`load_from_hub`); a task's parsed ``TaskSpec.source`` is either.
        on_bad_row: ``"error"`` raises at the first malformed row (``file:line: problem``);
            ``"skip"`` drops such rows, lists them in the result's ``bad_rows`` and warns.
        limit: return only the first ``limit`` items.
        seed: seeds the options built by HaluEval and TriviaQA.
        options: the loader's own (``fields`` of ``mcq``).
    """
    key = name.strip().lower()
    if key not in LOADERS:
        raise WhiteboxError(lm_eval_name_hint(f"{name}={path}") or f"unknown MCQ dataset {name!r}; known: {', '.join(LOADERS)}")
    if limit is not None and limit < 0:
        raise WhiteboxError(f"limit must be >= 0, got {limit}")
    if isinstance(path, HubPath):
        return load_from_hub(key, path, on_bad_row=on_bad_row, limit=limit, seed=seed, **options)
    return LOADERS[key](Path(path), on_bad_row=on_bad_row, limit=limit, seed=seed, **options)


def load_from_hub(name: str, spec: str | HubPath, *, on_bad_row: str = "error", limit: int | None = None, seed: int = 0,
                  load_dataset: Callable[..., Any] | None = None, **options: Any) -> MCQDataset:
    """Load ``name`` from the Hugging Face hub: ``spec`` is a :class:`~.hub.HubPath` or ``DATASET_ID[:CONFIG][@SPLIT]``.

    The split is exported once to :func:`hub_cache_dir` in the dataset's published local
    format and read by the same loader as a local file, so malformed rows are reported
    with a file and line you can open. Needs the ``datasets`` package and network
    access (``load_dataset`` can be injected for testing). ``options`` go to the loader
    (``fields`` of :mod:`.mcq`).
    """
    key = name.strip().lower()
    if key not in LOADERS:
        raise WhiteboxError(f"unknown MCQ dataset {name!r}; known: {', '.join(LOADERS)}")
    target = export_split(key, spec, load_dataset=load_dataset)
    return LOADERS[key](target, on_bad_row=on_bad_row, limit=limit, seed=seed, **options)
