"""Run infrastructure: the run folder, resume, progress."""

from whitebox_eval.runs.config import config_dict
from whitebox_eval.runs.folder import (
    RunFolder,
    RunSummary,
    config_differences,
    default_run_id,
    list_runs,
)
from whitebox_eval.runs.plain_values import plain_value
from whitebox_eval.runs.progress import progress

__all__ = ["config_dict", "RunFolder", "RunSummary", "config_differences", "default_run_id", "list_runs",
           "plain_value", "progress"]
