"""The toy suite's record: config and run function, work from its own config's defaults, a
rate, its explorer view (Python data and script), a reproduction figure, the results places a
claim may name and a statistic of its own (``derived: toy_beyond``)."""

from __future__ import annotations

from whitebox_eval.runs.record import Mode, Statistic, Suite


def work(cfg, mode: str) -> tuple[int, float]:
    return cfg.limit, float(cfg.limit)


SUITE = Suite("toy", "A toy suite (tests).", None,
              {"study": Mode("toy_suite.study:ToyConfig", "toy_suite.study:run_toy")}, work,
              rate=0.01, views="toy_suite.views:views", script="toy_suite:data/views.js",
              figures="toy_suite.views:figures", results=("acc",),
              statistics=(Statistic("toy_beyond", "toy_suite.statistics:beyond", needs=("level",)),))
