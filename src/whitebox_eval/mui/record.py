"""The records of paper 001's suites: ``mui``, ``masking`` (``mui masking``) and
``contamination`` (Python and reproduce): what :mod:`whitebox_eval.suites` lists."""

from __future__ import annotations

from pathlib import Path

from whitebox_eval.runs.record import Mode, Statistic, Suite

_R = "whitebox_eval.mui.read_back:"
ARRAYS = ("key_sets.safetensors", "correct.npy")  # what of a mui child's arrays/ its claims read back
TRAJECTORY_CHECKPOINTS = 7
"""A trajectory's MUI studies when its fine-tuning has not kept its checkpoints yet (before training and 6 more)."""
TOKENS_PER_UNIT = 3
"""A generated token and its scoring pass (mui); contamination counts in mui's units."""


def mui_work(cfg, mode: str) -> tuple[int, float]:
    """A MUI study's items and units; a trajectory's are one study per checkpoint it will read
    (``TRAJECTORY_CHECKPOINTS`` when the fine-tuning has not run yet to say)."""
    from whitebox_eval.runs.limits import taken

    n = taken(cfg.limit, 100) if cfg.limit else 100  # a fraction: of an estimated 100 items
    per = n * (4 + int(cfg.max_new_tokens or 64))  # None: the task's own budget
    if mode != "trajectory":
        return n, per
    from whitebox_eval.models.checkpoints import CHECKPOINTS

    kept = len(list((Path(cfg.model) / CHECKPOINTS).glob("step-*"))) if cfg.model and Path(cfg.model).is_dir() else 0
    points = kept or TRAJECTORY_CHECKPOINTS
    return n * points, per * points


def masking_work(cfg, mode: str) -> tuple[int, float]:
    n = int(cfg.limit or 32)
    gen = int(cfg.max_new_tokens or 64) if cfg.generate else 1
    return n, n * (gen + len(cfg.ks) * len(cfg.eval_tasks) * (1 + cfg.random_draws) * (1 + gen / 8))


def contamination_work(cfg, mode: str) -> tuple[int, float]:
    """Its MUI runs (every task at step 0 and each checkpoint), in mui's units, plus training
    (a step ~ 3 forwards of the batch; a cached training costs none). ``until_significant``
    is priced at its cap: ``max_epochs`` epochs, each followed by the stopping half's answers
    (one generation of ``limit // 2`` items), and the answers before training."""
    n = int(cfg.limit)
    points = 2 + len(cfg.checkpoints)
    gen = int(cfg.max_new_tokens or 64)
    per_run = n * (4 + gen)
    if cfg.until_significant:
        epochs = cfg.max_epochs
        checks = (epochs + 1) * (n // 2) * gen
    else:
        epochs, checks = cfg.epochs, 0
    return n * len(cfg.tasks), per_run * len(cfg.tasks) * points + 3 * n * epochs * 16 + checks


MUI = Suite(
    "mui", "Model Utilization Index (paper 001): how much of the model a task uses.", "whitebox_eval.mui.command:command",
    {"study": Mode("whitebox_eval.mui.config:MUIConfig", "whitebox_eval.mui.study:run_mui"),
     "trajectory": Mode("whitebox_eval.mui.trajectory_config:TrajectoryConfig", "whitebox_eval.mui.trajectory:run_trajectory")},
    mui_work,
    rate=0.02, tokens_per_unit=TOKENS_PER_UNIT,
    views="whitebox_eval.mui.views:views", script="whitebox_eval.mui:data/views.js",
    results=("mui", "accuracy", "pass@1", "mui,{group}", "correct_vs_incorrect", "off_format", "answer_classes",
             "n_items", "trend,{measure}", "{measure},{checkpoint}"),
    statistics=(Statistic("rarefied_relative", _R + "rarefied_relative", needs=("at",), paths=("at",), arrays=ARRAYS),
                Statistic("utility_law", _R + "utility_law", needs=("experiments",), reads="runs"),
                Statistic("mui_trend", "whitebox_eval.mui.trajectory:mui_trend_items")),
    read_back="whitebox_eval.mui.answer_classes:complete",
)
MASKING = Suite(
    "masking", "Paper 001's masking validation: key neurons masked vs random ones (mui masking).", None,
    {"study": Mode("whitebox_eval.mui.masking_config:MaskingConfig", "whitebox_eval.mui.masking:run_masking")}, masking_work,
    rate=0.17, tokens_per_unit=32,  # a masked scoring or generation step
    results=("paired_tests/key_vs_random,{metric},{task},k={k}", "key_minus_random,{metric},{task},k={k}",
             "curves/{task}/{mask}/{k}/{metric}"),
    statistics=(Statistic("masked_items", _R + "masked_items", needs=("task", "k"), takes=("metric",), arms=True),
                Statistic("masked_specificity", _R + "masked_specificity", needs=("task", "other", "k"), arms=True)),
)
CONTAMINATION = Suite(
    "contamination", "Paper 001 sec. 3.4: fine-tune on a task's test items, then (accuracy, MUI) per checkpoint "
    "in and out of domain (Python and reproduce; examples/mui_contamination.py).", None,
    {"study": Mode("whitebox_eval.mui.contamination_config:ContaminationConfig",
                   "whitebox_eval.mui.contamination:run_contamination")},
    contamination_work, rate=0.02, tokens_per_unit=TOKENS_PER_UNIT,
    results=("paired_tests/{measure},{task}", "paired_tests/{measure},{task},{checkpoint}",
             "{measure},{task},{checkpoint}", "accuracy_change,{task}"),
    statistics=(Statistic("contamination_items", _R + "contamination_items", needs=("paired",), paths=("paired",), arms=True),),
)
