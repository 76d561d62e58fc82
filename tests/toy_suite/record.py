"""The toy suite's record: config and run function, work from its own config's defaults, a
rate, its explorer view (Python data and script) and a reproduction figure."""

from __future__ import annotations

from whitebox_eval.runs.record import Mode, Suite


def work(cfg, mode: str) -> tuple[int, float]:
    return cfg.limit, float(cfg.limit)


SUITE = Suite("toy", "A toy suite (tests).", None,
              {"study": Mode("toy_suite.study:ToyConfig", "toy_suite.study:run_toy")}, work,
              rate=0.01, views="toy_suite.views:views", script="toy_suite:data/views.js",
              figures="toy_suite.views:figures")
