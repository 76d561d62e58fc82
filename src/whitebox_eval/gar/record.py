"""The ``gar`` suite's record (paper 002): what :mod:`whitebox_eval.suites` lists."""

from __future__ import annotations

from whitebox_eval.runs.record import Mode, Statistic, Suite

_G = "whitebox_eval.gar."


def work(cfg, mode: str) -> tuple[int, float]:
    """Per mode, from its own config: evaluate, one unit per example; attribute, ``steps``
    attribution steps (forward and backward) and the scoring forwards per example; truth-heads,
    those and ``random_draws`` random-head edits (twice with ``inverse_draws``), plus its probe rows; intervene, the base and
    edited forwards per example; probe, its probe rows (300 per file when not limited)."""
    from whitebox_eval.gar.selection import select_tasks

    from whitebox_eval.runs.limits import is_fraction, taken

    def count(tasks, include_kr: bool = False) -> int:  # limit per task (a fraction: of its own), else its 8 / 16
        return sum(int(cfg.limit) if cfg.limit and not is_fraction(cfg.limit)
                   else taken(cfg.limit, 8 if t.is_kr else t.n_examples)
                   for t in select_tasks(tasks, include_kr=include_kr))

    if mode == "evaluate":
        n = count(cfg.tasks, cfg.include_kr)
        return n, n
    if mode == "probe":
        rows = int(cfg.probe_limit or 300) * len(cfg.probe_data)
        return rows, rows
    n = count(cfg.tasks)
    if mode == "attribute":
        return n, n * (2 * cfg.steps + 8)
    if mode == "intervene":
        return n, n * 8
    probe = int(cfg.probe_limit or 300) * len(cfg.probe_data)
    draws = cfg.random_draws * (2 if cfg.inverse_draws else 1)  # the forward edit's draws, and the inverse's
    return n + probe, n * (2 * cfg.steps + 8 + 5 * draws) + probe


SUITE = Suite(
    "gar", "GAR: compositional relational reasoning, its evaluation and its heads (paper 002).",
    "whitebox_eval.gar.command:command",
    {"evaluate": Mode(_G + "config:GARConfig", _G + "evaluate_study:run_gar", shards=True),
     "attribute": Mode(_G + "config:GARAttributeConfig", _G + "attribute_study:run_gar_attribute"),
     # 0.04 s per unit was measured while gar.selection capped every task at its first 16 examples, so
     # the quick plan's 40 per task ran 16: 0.04 x 40 / 16 = 0.1 s per unit actually run
     "truth-heads": Mode(_G + "config:GARHeadsConfig", _G + "truth_heads:run_gar_heads", rate=0.1),
     "intervene": Mode(_G + "config:GARInterveneConfig", _G + "intervene_study:run_gar_intervene"),
     "probe": Mode(_G + "config:GARProbeConfig", _G + "probe_study:run_gar_probe")},
    work,
    rate=0.17,
    tokens_per_unit=100,  # a one-shot GAR prompt (94 tokens over the 384 tasks, 109 for the truth tasks)
    views="whitebox_eval.gar.views:views", script="whitebox_eval.gar:data/views.js",
    results=("acc,{stage}", "acc_argmax,{stage}", "interventions/{edit}/paired_tests/{test}",
             "interventions/{edit}/{value}", "interventions/{edit}/after/{value}", "probes/{file}/paired_tests/{test}",
             "probes/{file}/{value}", "error_analysis/share,{class}", "appc/{by}/{group}", "appc/{by}/{group}/{x}"),
    statistics=(Statistic("error_shares", _G + "read_back:error_shares", needs=("class",), arms=True),),
)
