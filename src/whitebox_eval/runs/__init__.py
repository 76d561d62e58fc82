"""Run infrastructure: the run folder, the one resumable pass, resume, progress."""

from whitebox_eval.runs.config import config_dict
from whitebox_eval.runs.folder import RunFolder, RunSummary, default_run_id, list_runs
from whitebox_eval.runs.opening import open_run
from whitebox_eval.runs.plain_values import plain_value
from whitebox_eval.runs.progress import progress
from whitebox_eval.runs.provenance import config_differences

__all__ = ["config_dict", "RunFolder", "RunSummary", "config_differences", "default_run_id", "list_runs",
           "open_run", "plain_value", "progress"]
