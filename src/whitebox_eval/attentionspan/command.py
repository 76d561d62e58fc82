"""``whitebox-eval span``: the AttentionSpan study (paper 003) from the command line."""

from __future__ import annotations

import ast

import click

from whitebox_eval.attentionspan.tasks import SPLIT_CHOICES, TASKS, task_config
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.options import dtype_option, resolved_dtype, run_folder_options

from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP


def _parse_params(task: str, text: str, option: str) -> dict:
    """``length=11-50,charset=abc`` -> {"length": (11, 50), "charset": "abc"}."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise WhiteboxError(f"{option}: {part!r} is not KEY=VALUE (e.g. length=11-50)")
        key, value = (x.strip() for x in part.split("=", 1))
        if "-" in value and all(v.strip().isdigit() for v in value.split("-", 1)):
            lo, hi = value.split("-", 1)
            out[key] = (int(lo), int(hi))
        elif value.lower() in ("true", "false"):
            out[key] = value.lower() == "true"
        else:
            try:
                out[key] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                out[key] = value
    task_config(task, "id", **out)  # unknown keys raise here, naming the valid ones
    return out


def _ints(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = (0,)
    if any(v < 1 for v in values):
        raise WhiteboxError(f"{option} takes a comma list of positive integers, e.g. 5,10,20; got {text!r}")
    return values


def _floats(text: str, option: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise WhiteboxError(f"{option} takes a comma list of numbers, e.g. 0.3,1.0; got {text!r}") from None


@click.command("span", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@click.option("--task", type=click.Choice(sorted(TASKS)), default="string_reversal", show_default=True)
@click.option("--split", type=click.Choice(SPLIT_CHOICES), default="ood", show_default=True,
              help="evaluate in-distribution, out-of-distribution (App. F) or both")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True, help="evaluated examples per split")
@click.option("--id-params", default="", help="override ID generator parameters, e.g. 'length=1-6'")
@click.option("--ood-params", default="", help="override OOD generator parameters, e.g. 'length=7-12'")
@click.option("--instruction", default=None, help="instruction line before each example (default: a short one per task; '' for none)")
@click.option("--shots", type=click.IntRange(min=0), default=0, show_default=True, help="ID demonstrations before each example (character-level, App. D)")
@click.option("--generation/--no-generation", default=False, show_default=True, help="also score free greedy generation")
@click.option("--rollout/--no-rollout", default=True, show_default=True, help="attention rollout and reference attention scores (full attention matrices)")
@click.option("--test", type=click.Choice(["welch", "mannwhitney"]), default="welch", show_default=True,
              help="significance test of reference attention, correct vs wrong tokens (table 2)")
@click.option("--finetune", "finetune_examples", type=click.IntRange(min=0), default=0, show_default=True,
              help="fine-tune on this many fresh ID examples first (0: no), then evaluate again")
@click.option("--lr", type=click.FloatRange(min=0.0, min_open=True), default=5e-6, show_default=True, help="fine-tuning learning rate (App. E)")
@click.option("--weight-decay", type=click.FloatRange(min=0.0), default=0.2, show_default=True)
@click.option("--train-batch-size", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--max-steps", default=None, type=click.IntRange(min=1), help="stop fine-tuning after this many steps")
@click.option("--reinforce", is_flag=True, help="key heads from ID examples, then reinforce them on the OOD examples (App. G)")
@click.option("--key-samples", type=click.IntRange(min=1), default=30, show_default=True, help="ID examples used to rank heads")
@click.option("--heads", default="5,10,20", show_default=True, help="N values: reinforce the top-N key heads")
@click.option("--values", default="0.3,1.0", show_default=True, help="C values added to post-softmax attention")
@click.option("--mode", type=click.Choice(["standard", "conditional"]), default="standard", show_default=True,
              help="conditional: add C only where attention already exceeds --threshold")
@click.option("--threshold", type=click.FloatRange(min=0.0), default=0.05, show_default=True, help="conditional mode: reinforce only cells whose attention exceeds this")
@click.option("--random-draws", type=click.IntRange(min=1), default=3, show_default=True, help="draws of N random heads as control")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@dtype_option
@run_folder_options
def command(**kw) -> None:
    """AttentionSpan (paper 003): algorithmic tasks with reference attention masks.

    \b
    Every example carries a reference mask: for each target character, the input
    characters it needs. The study scores teacher-forced accuracy and partial accuracy,
    the attention rollout's share on reference tokens for correctly vs wrongly predicted
    tokens (Welch t-test), and optionally fine-tuning and attention reinforcement.

    \b
    Evaluate (ID and OOD, App. F configurations):
      whitebox-eval span --model smollm2-135m --task string_reversal --split both
    Fine-tune first on 1000 ID examples (App. E: AdamW, batch 4, 1 epoch), then evaluate:
      whitebox-eval span --task long_addition --split both --finetune 1000 --lr 5e-5
    Reinforce the top-N key heads on OOD examples, vs N random heads (App. G):
      whitebox-eval span --task string_reversal --split both --reinforce --heads 5,10 --values 0.3,1
    Evaluate a fine-tuned checkpoint written by an earlier run:
      whitebox-eval span --model runs/<run-id>/checkpoints/final --reinforce
    Shorter tasks for small models or CPUs:
      whitebox-eval span --id-params length=1-6 --ood-params length=7-12

    The run folder holds config.yaml, samples.jsonl (one line per example and stage),
    results.json, arrays/ (rollouts, key-head scores, losses), plots/ and checkpoints/.
    """
    task = kw["task"]
    from whitebox_eval.attentionspan.finetune import FinetuneConfig  # torch: imported only to run
    from whitebox_eval.attentionspan.study import SpanConfig, run_span

    cfg = SpanConfig(
        model=kw["model"], task=task, split=kw["split"], limit=kw["limit"],
        id_params=_parse_params(task, kw["id_params"], "--id-params"),
        ood_params=_parse_params(task, kw["ood_params"], "--ood-params"),
        instruction=kw["instruction"], shots=kw["shots"], generation=kw["generation"],
        rollout=kw["rollout"], test=kw["test"], finetune_examples=kw["finetune_examples"],
        finetune=FinetuneConfig(learning_rate=kw["lr"], weight_decay=kw["weight_decay"],
                                batch_size=kw["train_batch_size"], epochs=kw["epochs"],
                                max_steps=kw["max_steps"], seed=kw["seed"]),
        reinforce=kw["reinforce"], key_samples=kw["key_samples"],
        heads=_ints(kw["heads"], "--heads"), values=_floats(kw["values"], "--values"),
        mode=kw["mode"], threshold=kw["threshold"], random_draws=kw["random_draws"],
        seed=kw["seed"], batch_size=kw["batch_size"], dtype=resolved_dtype(kw["dtype"], kw["model"]))
    folder = run_span(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
    print_summary(folder)


def print_summary(folder) -> None:
    """The run's table 1 / table 2 numbers and the reinforcement table."""
    res = folder.load_results()
    click.echo(f"\nrun folder: {folder.path}")
    for stage, s in res["stages"].items():
        if stage.startswith("reinforce/"):
            continue
        line = f"  {stage:16s} acc {s['accuracy']:6.1%}  partial {s['partial_accuracy']:6.1%}"
        if s.get("generation_accuracy") is not None:
            line += f"  generated {s['generation_accuracy']:6.1%}"
        cve = s.get("correct_vs_error")
        if cve:
            line += (f"  ref-attn correct {cve['mean_correct']:.4f} (n={cve['n_correct']}) vs error "
                     f"{cve['mean_error']:.4f} (n={cve['n_error']}), p={cve['p_value']:.2g}")
        click.echo(line)
    if "finetune" in res:
        f = res["finetune"]
        click.echo(f"  fine-tuning: {f['steps']} steps, loss {f['loss_first']:.3f} -> {f['loss_last']:.3f}")
    if "reinforcement" in res:
        click.echo("  OOD reinforcement (accuracy / partial; random = mean over draws):")
        for row in res["reinforcement"]["table"]:
            rnd = row.get("random_accuracy_mean")
            extra = "" if rnd is None else f"   random heads {rnd:6.1%}"
            click.echo(f"    {row['setting']:28s} {row['accuracy']:6.1%} / {row['partial_accuracy']:6.1%}{extra}")
    click.echo(f"plots in {folder.path / 'plots'}")
