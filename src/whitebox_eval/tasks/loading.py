"""Loading multiple-choice items: :func:`load_mcq` (a task's, generated or read), :data:`LOADERS`
(each file dataset's loader, from its record in :mod:`.registry`), :func:`load_mcq_dataset` (a
local file or a hub split by the dataset's name) and :func:`load_from_hub`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.lazy import resolve
from whitebox_eval.tasks import registry
from whitebox_eval.tasks.hub import HubPath, export_split
from whitebox_eval.tasks.rows import MCQDataset
from whitebox_eval.tasks.spec import TaskSpec, lm_eval_name_hint

#: the file datasets with multiple-choice items and their loaders (:mod:`.registry`)
LOADERS: dict[str, Callable[..., MCQDataset]] = {
    r.name: resolve(r.loader) for r in registry.RECORDS.values() if r.is_file and r.mcq}


def load_mcq(spec: TaskSpec, n: int, *, seed: int = 0, n_options: int = 4, language: str = "en",
             on_bad_row: str = "skip") -> list:
    """The task's MCQ items: every item of a dataset's file (``n`` unused: the study sets
    demonstrations apart before it applies ``--limit``), or a generator's first ``n`` (a stable
    prefix: the first ``n`` of a larger ``n`` are the same items; arithmetic-gen: the arithmetic
    items it asks)."""
    rec = spec.record
    if rec.loader is None:
        raise WhiteboxError(f"task {rec.name!r} has no multiple-choice items")
    if rec.is_file:
        if spec.path is None:
            raise WhiteboxError(f"task {spec.name!r} has no multiple-choice items here")
        options = {"fields": spec.fields} if spec.fields else {}
        return list(load_mcq_dataset(spec.name, spec.source, on_bad_row=on_bad_row, seed=seed, **options))
    return resolve(rec.loader)(spec, n, seed=seed, n_options=n_options, language=language)


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
