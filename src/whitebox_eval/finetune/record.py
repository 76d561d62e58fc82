"""The ``finetune`` suite's record: what :mod:`whitebox_eval.suites` lists."""

from __future__ import annotations

from whitebox_eval.runs.record import Mode, Suite

CHECK_TOKENS = 8  # generated tokens of a check answer, as units (a short free answer)


def work(cfg, mode: str) -> tuple[int, float]:
    """The items, a training step per batch (~3 forwards per example), the check before and after
    (a forward per generated token; arithmetic text also draws ``check_samples`` answers and reads
    a 5-shot prompt, ~3 answers' worth), a validation pass per evaluation."""
    n = cfg.limit or 200
    n_test, n_val = max(1, round(n * cfg.test)), max(1, round(n * cfg.validation))
    steps = cfg.steps(max(1, n - n_test - n_val - cfg.shots))
    evals = max(1, steps // (cfg.eval_every or cfg.save_every or steps))
    per_check = CHECK_TOKENS * ((1 + cfg.check_samples + 3) if str(cfg.task).startswith("arithmetic-text") else 1)
    return n, 3 * steps * cfg.train_batch_size + 2 * n_test * per_check + evals * n_val


SUITE = Suite(
    "finetune", "Fine-tune a model on a task into a run folder that loads as --model.",
    "whitebox_eval.finetune.command:command",
    {"study": Mode("whitebox_eval.finetune.config:FinetuneConfig", "whitebox_eval.finetune.study:run_finetune")},
    work,
    rate=0.095,  # span's: a fine-tuning step and a generated token cost as there
    tokens_per_unit=60,
)
