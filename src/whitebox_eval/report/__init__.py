"""The HTML report a person opens, and run comparison.

* ``markup``: escaping by default (``esc``, ``render``, ``join``);
* ``rundata``: a run folder read for the report;
* ``metrics``: results as rows (headline first), value formatting, deltas (estimates and
  their intervals are read by :mod:`whitebox_eval.runs.estimates`);
* ``samples``: the sample viewer (``--static``);
* ``explorer_views``: each run's items (:mod:`whitebox_eval.runs.items`) and its suite's views (its record's ``views``);
* ``interactive``: the page's script (``data/explorer/*.js`` and each record's view script), style and JSON block;
* ``moves``: several runs side by side, the direction each moved (results.json ``moves``);
* ``lm_eval_results``: lm-eval results files read and mapped onto our tasks and metrics;
* ``side_by_side``: the ``compare`` table (run folders and lm-eval files as columns);
* ``page``: ``write_report`` (one self-contained ``report.html``);
* ``command``: the ``whitebox-eval report`` and ``whitebox-eval compare`` commands.
"""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.report.page": ["write_report"],
})
