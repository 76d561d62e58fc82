"""The ``mcqa`` suite's record (paper 000): what :mod:`whitebox_eval.suites` lists."""

from __future__ import annotations

from whitebox_eval.runs.record import Mode, Statistic, Suite, items


def work(cfg, mode: str) -> tuple[int, float]:
    """A pass per method family over the items; the explorer's rows pass; shots lengthen prompts."""
    n = items(cfg, 500)
    methods = set(cfg.methods)
    passes = 1.0 + ("pa" in methods) + 0.3 * ("pride" in methods) + 0.5 * ("cloze" in methods) * 4
    if "ablation" in methods:
        passes += 1 + cfg.ablation_draws
    if cfg.item_views and methods & {"qk", "attention"}:  # the explorer's rows pass (mcqa/explorer.py)
        passes += 1
    return n, n * passes * (1 + 0.15 * cfg.shots)


SUITE = Suite(
    "mcqa", "MCQA through select-and-copy heads (paper 000): baseline vs best QK / Attention head.",
    "whitebox_eval.mcqa.command:mcqa",
    {"study": Mode("whitebox_eval.mcqa.config:MCQAConfig", "whitebox_eval.mcqa.study:run_mcqa", shards=True)},
    work,
    rate=0.35,
    # a 0-shot prompt (MMLU 72 tokens, gpu_check.py; CosmosQA and HaluEval longer: 100; shots scale the units)
    tokens_per_unit=100,
    views="whitebox_eval.mcqa.views:views", script="whitebox_eval.mcqa:data/views.js",
    figures="whitebox_eval.mcqa.views:figures",
    commands={"universal": ("whitebox_eval.mcqa.command:universal",
                            "Heads that select-and-copy across MCQA runs (000).")},
    results=("acc,{method}", "pa,{method}", "selection_bias,{method}", "paired_tests/{method}_vs_baseline",
             "paired_tests/ablation_key_vs_{arm}", "ablation/{part}", "{section}/best_head"),
    statistics=(Statistic("ablation_items", "whitebox_eval.mcqa.read_back:ablation_items", needs=("paired",), arms=True,
                          paths=("paired",), passes=("ablate_top", "ablate_random")),
                Statistic("pa_stability", "whitebox_eval.mcqa.read_back:pa_stability", takes=("method",))),
)
