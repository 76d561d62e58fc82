"""The ``finetune`` suite's record: what :mod:`whitebox_eval.suites` lists."""

from __future__ import annotations

from whitebox_eval.runs.record import Mode, Suite

CHECK_TOKENS = 8  # generated tokens of a check answer, as units (a short free answer)
# Arithmetic text with SmolLM2-135M, in units of ``rate``, measured as one thread's CPU seconds
# (a loaded machine does not inflate those) and taken as the wall time on 2 cores, with no
# credit for the second thread (benchmarks/results/arithmetic_recipes.md):
ARITH_TRAIN_UNITS = 1.8  # one training line (~13 tokens): 1.38-1.40 s per step of 8
ARITH_LINE_TOKENS = 13  # a mixed line's extra pieces (arithmetic_text.extra_pieces) cost in proportion
ARITH_CHECK_UNITS = (6, 3)  # one 5-shot free-format test problem: 2 prompt reads + 3 per drawn answer (1.74 s at 4)
ARITH_VALIDATION_UNITS = 5.0  # one validation problem's teacher-forced 5-shot forward (~110 tokens at the
#                               training's measured cost per token; not timed alone)


def work(cfg, mode: str) -> tuple[int, float]:
    """The items, a training step per batch (~3 forwards per example; a short arithmetic line
    less), the check before and after (a forward per generated token; arithmetic text: its 5-shot
    prompt read twice and ``check_samples`` drawn answers; GAR: one forward per test item), a
    validation pass per evaluation."""
    from whitebox_eval.finetune.sources import GAR, parse_source

    n = cfg.limit or 200
    n_test, n_val = max(1, round(n * cfg.test)), max(1, round(n * cfg.validation))
    n_train = max(1, n - n_test - n_val - cfg.shots)
    if str(cfg.task) == "planted-facts":  # the limit counts entities, each fact in every template
        from whitebox_eval.finetune.planted_facts import sizes

        lines = sizes(n)
        n, n_train, n_test, n_val = sum(lines.values()), lines["train"], lines["test"], lines["validation"]
    source = parse_source(cfg.task) if str(cfg.task).lower().startswith("gar") else None
    gar = source is not None and source.kind == GAR
    if gar:  # training lines by cells, the test split by tasks
        from whitebox_eval.finetune import gar_tasks

        lines = gar_tasks.sizes(source.spec, n, cfg.test, cfg.validation)
        n, n_train, n_test, n_val = sum(lines.values()), lines["train"], lines["test"], lines["validation"]
    steps = cfg.steps(n_train)
    context = 1 + cfg.train_context  # --train-context K: each line read with K others
    evals = max(1, steps // (cfg.eval_every or cfg.save_every or steps))
    if gar:
        # units per line: a GAR line is ~95 tokens, a unit 60, x2 measured: the SmolLM2 pilot (gar:all, 480 lines,
        # 57 steps of 8, 768 test items checked twice) took 875 one-thread CPU seconds, 444 s estimated at x1
        return n, 2 * gar_tasks.TOKENS / 60 * (3 * steps * cfg.train_batch_size + 2 * n_test + evals * n_val)
    if str(cfg.task).startswith("arithmetic-text"):
        from whitebox_eval.finetune.arithmetic_text import extra_pieces

        read, draw = ARITH_CHECK_UNITS
        line = ARITH_TRAIN_UNITS * (1 + extra_pieces(cfg.line_style) / ARITH_LINE_TOKENS)
        return n, (line * context * steps * cfg.train_batch_size
                   + 2 * n_test * (read + draw * cfg.check_samples) + evals * n_val * ARITH_VALIDATION_UNITS)
    return n, 3 * context * steps * cfg.train_batch_size + 2 * n_test * CHECK_TOKENS + evals * n_val


SUITE = Suite(
    "finetune", "Fine-tune a model on a task into a run folder that loads as --model.",
    "whitebox_eval.finetune.command:command",
    {"study": Mode("whitebox_eval.finetune.config:FinetuneConfig", "whitebox_eval.finetune.study:run_finetune")},
    work,
    rate=0.095,  # span's: a fine-tuning step and a generated token cost as there (arithmetic text: its own units above)
    tokens_per_unit=60,
)
