"""Datasets, one module each: its source formats, splits, demonstration pool, prompt
styles and metric choices (as lm-eval keeps one place per task). The suites
(``mcqa``, ``formats``, ``mui``) import their data from here and never from each other.

Each dataset's facts (its files, kind, splits, lm-eval name and prompt styles, how it is
asked and checked in free generation) are one record in :mod:`.registry`; ``--task`` is
read once into a :class:`~.spec.TaskSpec` that carries it. ``whitebox-eval tasks`` lists them.

Shared pieces: :mod:`.items` (the MCQItem record), :mod:`.generation` (the GenItem record
and the free-answer tasks), :mod:`.answer_checks` (answer checks), :mod:`.rows` (readers and the
bad-row policy), :mod:`.prompts` (the papers' prompt formats), :mod:`.demos` (where
k-shot demonstrations come from, and their draws), :mod:`.hub` (hub datasets when online),
:mod:`.loading` (a task's MCQ items, ``load_mcq``; a dataset's by name: ``LOADERS``,
``load_mcq_dataset``, ``load_from_hub``).
"""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__, {"whitebox_eval.tasks.loading": ["LOADERS", "load_mcq_dataset", "load_from_hub"],
               "whitebox_eval.tasks.spec": ["lm_eval_name_hint"]})

