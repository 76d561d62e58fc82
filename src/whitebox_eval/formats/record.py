"""The ``formats`` suite's record (paper 004): what :mod:`whitebox_eval.suites` lists."""

from __future__ import annotations

from whitebox_eval.runs.record import Mode, Statistic, Suite, items


def work(cfg, mode: str) -> tuple[int, float]:
    """One MCQ pass and ``n_samples`` sampled answers of ``max_new_tokens`` in two free formats per question."""
    n = items(cfg, 160)
    return n, n * (1 + 2 * cfg.n_samples * cfg.max_new_tokens / 16)


SUITE = Suite(
    "formats", "First-token probabilities vs free generation (paper 004).", "whitebox_eval.formats.command:formats",
    {"study": Mode("whitebox_eval.formats.config:FormatsConfig", "whitebox_eval.formats.study:run_formats",
                   shards=True)},
    work,
    rate=0.25,
    tokens_per_unit=16,  # a share of the 5-shot prompt and a burst of sampled tokens
    views="whitebox_eval.formats.views:views", script="whitebox_eval.formats:data/views.js",
    commands={"formats-compare": ("whitebox_eval.formats.command:formats_compare",
                                  "Alignment error vs MCQ performance across formats runs (004 Fig. 6).")},
    results=("{measure},{format}", "paired_tests/{a}_vs_{b}", "mcq_by_free/test", "mcq_by_free/partitions/{bin}/{x}/{y}",
             "mcq_by_free_answered/test", "mcq_by_free_answered/partitions/{bin}/{x}/{y}",
             "p_correct_by_subject/{subject}/{format}"),
    statistics=(Statistic("answered_vs_mcq", "whitebox_eval.formats.read_back:answered_vs_mcq", takes=("format",),
                          arms=True),),
    read_back="whitebox_eval.formats.answered:complete",
)
