"""Fine-tuning as a study: a model trained on a task (free answers, GAR's generator, span's tasks,
or plain text) into a run folder that every command loads as ``--model``."""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.finetune.config": ["FinetuneConfig"],
    "whitebox_eval.finetune.study": ["run_finetune"],
    "whitebox_eval.finetune.splits": ["canonical", "make_splits"],
})
