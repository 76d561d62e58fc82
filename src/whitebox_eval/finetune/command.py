"""``whitebox-eval finetune``: train a model on a task into a run folder that loads as ``--model``."""

from __future__ import annotations

import click

from whitebox_eval.command_options import (batch_size_option, dtype_option, model_load_options, resolved_batch_size,
                                           resolved_dtype, run_folder_options)
from whitebox_eval.config_file import config_file_option, study_config
from whitebox_eval.finetune.arithmetic_text import LINE_STYLES
from whitebox_eval.finetune.sources import ANSWER_ENDS
from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP


@click.command("finetune", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@click.option("--task", default="arithmetic-gen", show_default=True,
              help="arithmetic-text[:CATEGORY,...] (75 + 22 = 97, checked in 004's free format) | planted-facts (facts about "
                   "--limit made-up entities, split by paraphrase template) | gen=PATH | arithmetic-gen[:CATEGORY,...] | gsm8k=PATH | triviaqa=PATH | bigbench=PATH (free "
                   "answers) | gar or gar:TASKS (GAR's generator, tasks as gar --tasks) | span:TASK | text=PATH (loss on every token); "
                   "multiple-choice tasks are refused")
@click.option("--limit", type=click.IntRange(min=4), default=200, show_default=True,
              help="items drawn from the task before deduplication (planted-facts: entities)")
@click.option("--validation", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.1,
              show_default=True, help="share of the items held out for the validation loss (early stopping; "
                   "planted-facts: its validation template instead)")
@click.option("--test", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.2, show_default=True,
              help="share of the items held out for the check before and after (planted-facts: its held-out "
                   "templates instead)")
@click.option("--shots", type=click.IntRange(min=0), default=0, show_default=True,
              help="demonstrations before each check prompt, from a pool no split holds")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=5e-5, show_default=True)
@click.option("--weight-decay", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--train-batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="stop after this many optimizer steps")
@click.option("--grad-clip", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--save-every", type=click.IntRange(min=0), default=25, show_default=True,
              help="steps between saved training states (--resume continues from the last)")
@click.option("--eval-every", type=click.IntRange(min=1), default=None,
              help="steps between validation losses (default: --save-every)")
@click.option("--patience", type=click.IntRange(min=0), default=0, show_default=True,
              help="stop after this many validation losses without a new best (0: never early)")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=None,
              help="the check's generation budget (default: the longest test answer plus 2)")
@batch_size_option("check and validation items per forward; results do not depend on it")
@click.option("--check-samples", type=click.IntRange(min=0), default=5, show_default=True,
              help="arithmetic-text: answers drawn at T = 1 per test problem in 004's free format (free P(correct))")
@click.option("--answer-end", type=click.Choice(ANSWER_ENDS), default="eos", show_default=True,
              help="what closes each trained answer: the model's end token, a newline (as 004's few-shot prompts end "
                   "an answer) or nothing (the loss on the answer alone); not for span: or text= tasks")
@click.option("--train-context", type=click.IntRange(min=0), default=0, show_default=True,
              help="arithmetic-text and free-answer tasks: each training line after this many other training lines "
                   "(a seeded draw per line, the loss on its own answer), so what is learned holds after a few-shot "
                   "prompt's demonstrations; 0: each line alone from its first token")
@click.option("--line-style", type=click.Choice(LINE_STYLES), default="plain", show_default=True,
              help="arithmetic-text: every line as 75 + 22 = 97 (plain), or each in one of six neutral styles "
                   "('75 + 22 equals 97', 'Calculate 75 + 22: 97', ...; a seeded draw per problem, never a question "
                   "template's words), so that no one surface form is what is learned")
@click.option("--keep-checkpoints", type=click.IntRange(min=0), default=0, show_default=True,
              help="keep the model before training and at this many steps spaced evenly over the planned ones, "
                   "each as RUN/checkpoints/step-NNNNNN/ (loads as --model; mui trajectory reads them)")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@model_load_options
@dtype_option
@run_folder_options
@config_file_option("whitebox_eval.finetune.config:FinetuneConfig")
def command(**kw) -> None:
    """Fine-tune a model on a task into a run folder that loads as --model.

    \b
    The items are deduplicated and split into train, validation (the loss that stops early)
    and test (the check before and after); the training state is saved every --save-every
    steps, so a killed run continues with --resume to the same weights.
      whitebox-eval finetune --model smollm2-135m --task arithmetic-gen --output runs --run-id arith
      whitebox-eval formats --model runs/arith --task arithmetic
    """
    from whitebox_eval.finetune.record import SUITE
    from whitebox_eval.finetune.study import run_finetune
    from whitebox_eval.runs.estimates import describe

    cfg = study_config(SUITE, kw, renames={"lr": "learning_rate"},
                       batch_size=resolved_batch_size(kw["batch_size"], kw["model"], kw["dtype"]),
                       dtype=resolved_dtype(kw["dtype"], kw["model"]))
    cfg.check()  # a bad task is one line before any folder
    folder = run_finetune(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
    res = folder.load_results()
    click.echo(f"\nrun folder (use it as --model): {folder.path}")
    click.echo(f"splits: " + ", ".join(f"{k} {v['n']} ({v['sha256'][:12]})" for k, v in res["splits"].items()))
    click.echo(f"training: {res['training']['steps']} steps, loss {res['loss_first']:.4f} -> {res['loss_last']:.4f}"
               + (" (stopped early)" if res["training"]["stopped_early"] else ""))
    if res.get("checkpoints"):
        click.echo(f"checkpoints (each loads as --model): {folder.path / 'checkpoints'}/step-NNNNNN, steps "
                   + ", ".join(str(c["step"]) for c in res["checkpoints"]))
    click.echo(f"check ({res['check']}):")
    click.echo(f"  before  {describe(res['headline'], 'accuracy,before', '6.1%')}")
    click.echo(f"  after   {describe(res['headline'], 'accuracy,after', '6.1%')}")
    if "p_correct,after" in res["headline"]:
        click.echo("free P(correct), sampled:")
        click.echo(f"  before  {describe(res['headline'], 'p_correct,before', '6.1%')}")
        click.echo(f"  after   {describe(res['headline'], 'p_correct,after', '6.1%')}")
    if "question_recall" in res:  # planted facts: asked as the MCQs ask, no options (descriptive)
        q = res["question_recall"]
        click.echo(f"question-form recall ({q['note']}): before {q['before']}, after {q['after']}")
