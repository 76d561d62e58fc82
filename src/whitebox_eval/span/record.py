"""The ``span`` suite's record (paper 003): what :mod:`whitebox_eval.suites` lists."""

from __future__ import annotations

from whitebox_eval.runs.record import Mode, Suite


def work(cfg, mode: str) -> tuple[int, float]:
    """Each split's examples, the fine-tuning (a training step ~ 3 forwards per example; a cached
    training costs none) and the reinforcement sweep; shots lengthen every prompt."""
    splits = 2 if cfg.split == "both" else 1
    units = cfg.n_per_split * splits
    if cfg.finetune_examples:
        units += cfg.n_per_split * splits + 3 * cfg.finetune_examples * cfg.finetune.epochs
    if cfg.reinforce:
        units += cfg.key_samples + cfg.select_limit * (len(cfg.heads) * len(cfg.values) + 1)
        units += cfg.n_per_split * (2 + cfg.random_draws)
    return cfg.n_per_split * splits, units * (1 + cfg.shots)


SUITE = Suite(
    "span", "AttentionSpan (paper 003): algorithmic tasks with reference attention masks.",
    "whitebox_eval.span.command:command",
    {"study": Mode("whitebox_eval.span.config:SpanConfig", "whitebox_eval.span.study:run_span")},
    work,
    rate=0.095,
    tokens_per_unit=100,  # one example's characters and the instruction (13-190 characters, ID to OOD)
    views="whitebox_eval.span.views:views", script="whitebox_eval.span:data/views.js",
    figures="whitebox_eval.span.views:figures",
    results=("{measure},{stage}", "paired_tests/{a} vs {b}", "reinforcement/evaluation/{arm}/accuracy"),
)
