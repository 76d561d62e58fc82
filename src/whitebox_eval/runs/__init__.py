"""Run infrastructure: the run folder, resume, progress."""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.runs.config": ["config_dict"],
    "whitebox_eval.runs.folder": ["RunFolder", "RunSummary", "config_differences", "default_run_id", "list_runs"],
    "whitebox_eval.runs.plain_values": ["plain_value"],
    "whitebox_eval.runs.progress": ["progress"],
})
