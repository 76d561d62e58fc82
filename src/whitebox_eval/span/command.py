"""``whitebox-eval span``: the AttentionSpan study (paper 003) from the command line."""

from __future__ import annotations

import click

from whitebox_eval.span.protocol import SHIFTED_VS_NONE, VS_NONE, VS_RANDOM, VS_SHIFTED
from whitebox_eval.span.tasks import SPLIT_CHOICES, TASKS, task_config
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.config_file import config_file_option, given, study_config
from whitebox_eval.command_options import (
    LIMIT, batch_size_option, dtype_option, edit_option, gen_kwargs_option, model_load_options, resolved_batch_size,
    resolved_dtype, run_folder_options, shots_option)

from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP


#: the fine-tuning options, fields of the config's nested ``finetune`` (App. E); --seed seeds both
FINETUNE_OPTIONS = {"lr": "finetune.learning_rate", "weight_decay": "finetune.weight_decay",
                    "train_batch_size": "finetune.batch_size", "epochs": "finetune.epochs",
                    "max_steps": "finetune.max_steps", "keep_checkpoints": "finetune.keep_checkpoints",
                    "seed": ("seed", "finetune.seed")}


def _parse_value(task: str, key: str, value: str, option: str):
    """One parameter value, typed by the task's default for ``key``: integers and
    ``LO-HI`` ranges for numeric parameters, true/false for flags, the text as given for
    everything else (so ``charset=123456789`` stays the string of digits)."""
    default = TASKS[task].defaults.get(key)
    if isinstance(default, bool):
        if value.lower() not in ("true", "false"):
            raise WhiteboxError(f"{option}: {key} takes true or false; got {value!r}")
        return value.lower() == "true"
    if isinstance(default, (int, tuple)):
        parts = [v.strip() for v in value.split("-", 1)] if "-" in value else [value]
        if not all(v.isdigit() for v in parts):
            raise WhiteboxError(f"{option}: {key} takes an integer or a range LO-HI (e.g. {key}=3 or "
                                f"{key}=3-8); got {value!r}")
        return (int(parts[0]), int(parts[1])) if len(parts) == 2 else int(parts[0])
    return value


def _parse_params(task: str, text: str, option: str) -> dict:
    """``length=11-50,charset=abc`` -> {"length": (11, 50), "charset": "abc"}."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise WhiteboxError(f"{option}: {part!r} is not KEY=VALUE (e.g. length=11-50)")
        key, value = (x.strip() for x in part.split("=", 1))
        out[key] = value
    task_config(task, "id", **out)  # unknown keys raise here, naming the valid ones
    return {k: _parse_value(task, k, v, option) for k, v in out.items()}


def _ints(text, option: str) -> tuple[int, ...]:
    if isinstance(text, tuple):
        return text
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = (0,)
    if any(v < 1 for v in values):
        raise WhiteboxError(f"{option} takes a comma list of positive integers, e.g. 5,10,20; got {text!r}")
    return values


def _floats(text, option: str) -> tuple[float, ...]:
    if isinstance(text, tuple):
        return text
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise WhiteboxError(f"{option} takes a comma list of numbers, e.g. 0.3,1.0; got {text!r}") from None


@click.command("span", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@click.option("--task", type=click.Choice(sorted(TASKS)), default="string_reversal", show_default=True)
@click.option("--split", type=click.Choice(SPLIT_CHOICES), default="ood", show_default=True,
              help="evaluate in-distribution, out-of-distribution (App. F) or both")
@click.option("--limit", type=LIMIT, default=100, show_default=True,
              help="evaluated examples per split, or a fraction F < 1 of the default 100 per split (rounded up)")
@click.option("--id-params", default="", help="override ID generator parameters, e.g. 'length=1-6'")
@click.option("--ood-params", default="", help="override OOD generator parameters, e.g. 'length=7-12'")
@click.option("--instruction", default=None, help="instruction line before each example (default: a short one per task; '' for none)")
@shots_option(0, "ID demonstrations before each example (character-level, App. D)")
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
@click.option("--keep-checkpoints", type=click.IntRange(min=0), default=0, show_default=True,
              help="keep the model before fine-tuning and at this many steps spaced evenly over it, each as "
                   "checkpoints/step-NNNNNN/ of the training's folder (finetune.json's checkpoints; loads as --model)")
@click.option("--reinforce", is_flag=True, help="key heads from ID examples, then reinforce them on the OOD examples (App. G)")
@click.option("--key-samples", type=click.IntRange(min=1), default=30, show_default=True, help="ID examples used to rank heads")
@click.option("--select-limit", type=click.IntRange(min=1), default=50, show_default=True,
              help="OOD selection examples (disjoint from the --limit evaluated ones) on which N and C are chosen")
@click.option("--heads", default="5,10,20", show_default=True, callback=lambda c, p, v: _ints(v, "--heads"), help="N values: reinforce the top-N key heads")
@click.option("--values", default="0.3,1.0", show_default=True, callback=lambda c, p, v: _floats(v, "--values"), help="C values added to post-softmax attention")
@click.option("--mode", type=click.Choice(["standard", "conditional"]), default="standard", show_default=True,
              help="conditional: add C only where attention already exceeds --threshold")
@click.option("--threshold", type=click.FloatRange(min=0.0), default=0.05, show_default=True, help="conditional mode: reinforce only cells whose attention exceeds this")
@click.option("--random-draws", type=click.IntRange(min=2), default=5, show_default=True,
              help="draws of N random non-key heads from the key heads' layer band (control)")
@click.option("--shift", type=click.IntRange(min=1), default=1, show_default=True,
              help="shifted-reference control: reinforce the cell this many tokens beside the reference")
@click.option("--reinforce-generation/--no-reinforce-generation", default=False, show_default=True,
              help="also generate freely under the chosen reinforcement and the shifted control (slow: one pass per token)")
@edit_option("every evaluation pass (teacher-forced, generation, reinforcement) runs under the edits; fine-tuning "
             "trains the model as it is; no @last")
@batch_size_option()
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@model_load_options
@gen_kwargs_option({}, none="span decodes greedily (AttentionSpan's exact-match metric) and fixes each answer's length by its task")
@dtype_option
@run_folder_options
@config_file_option("whitebox_eval.span.config:SpanConfig")
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
    Reinforce the top-N key heads on OOD examples (App. G): N and C are chosen on
    --select-limit selection examples, then reported on the --limit evaluation examples
    beside no intervention, N random non-key heads (--random-draws) and the same heads on
    the shifted, wrong reference cell, with McNemar tests:
      whitebox-eval span --task string_reversal --split both --reinforce --heads 5,10 --values 0.3,1
    Evaluate the fine-tuned weights of an earlier run (cached under the cache root,
    $WHITEBOX_EVAL_CACHE; the run's finetune.json names the folder):
      whitebox-eval span --model <weights folder from finetune.json> --reinforce
    Keep 6 checkpoints along the fine-tuning (and the model before it), each loadable as --model:
      whitebox-eval span --task string_reversal --finetune 600 --lr 1e-4 --keep-checkpoints 6
    Shorter tasks for small models or CPUs:
      whitebox-eval span --id-params length=1-6 --ood-params length=7-12

    The run folder holds config.yaml, samples.jsonl (one line per example and stage),
    results.json, arrays/ (rollouts, key-head scores, losses), plots/ and finetune.json.
    """
    from whitebox_eval.span.record import SUITE
    from whitebox_eval.span.study import run_span

    params = {key: _parse_params(kw["task"], kw[key], f"--{key.replace('_', '-')}")
              for key in ("id_params", "ood_params") if given(key)}
    cfg = study_config(SUITE, kw, renames=FINETUNE_OPTIONS, **params,
                       batch_size=resolved_batch_size(kw["batch_size"], kw["model"], kw["dtype"]),
                       dtype=resolved_dtype(kw["dtype"], kw["model"]))
    folder = run_span(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
    print_summary(folder)


def _pct(value) -> str:
    return "   n/a" if value is None else f"{value:6.1%}"


def _num(value, fmt: str = ".4f") -> str:
    return "n/a" if value is None else format(value, fmt)


def _acc(block: dict, key: str = "accuracy", with_n: bool = True) -> str:
    """``45.0% [35.6%, 54.8%] n=100``: a proportion with its interval and n."""
    from whitebox_eval.runs.estimates import describe

    return describe(block, key, ".1%", n=with_n)


def print_summary(folder) -> None:
    """Table 1 / table 2 numbers with intervals, and the reinforcement report with its
    controls and paired-test verdicts."""
    from whitebox_eval import stats

    res = folder.load_results()
    click.echo(f"\nrun folder: {folder.path}")
    click.echo("  acc: exact match [95% Wilson interval], n examples; partial: mean share of right "
               "tokens [95% bootstrap interval]")
    for stage, s in res["stages"].items():
        if stage.split("/", 1)[0] in ("reinforce", "select", "generate"):
            continue
        line = f"  {stage:16s} acc {_acc(s)}  partial {_acc(s, 'partial_accuracy', with_n=False)}"
        if s.get("generation_accuracy") is not None:
            line += f"  generated {_acc(s, 'generation_accuracy')}"
        click.echo(line)
        cve = s.get("correct_vs_error")
        if cve:
            click.echo(f"    ref-attn correct {_num(cve['mean_correct'])} (n={cve['n_correct']} tokens) vs wrong "
                       f"{_num(cve['mean_error'])} (n={cve['n_error']}), pooled {cve['test']} "
                       f"p={_num(cve['p_value'], '.2g')}")
        clus = s.get("clustered")
        if clus and clus.get("test"):
            click.echo("    " + stats.verdict(clus["test"], "clustered by sequence, correct - wrong ref-attn"))
        elif clus is not None:
            click.echo(f"    clustered by sequence: no test ({clus.get('why', 'too few sequences')})")
        within = s.get("within_sample")
        if within and within.get("test"):
            click.echo("    " + stats.verdict(within["test"], "within samples, correct - wrong ref-attn"))
        elif within is not None:
            click.echo("    within samples: no sample has both right and wrong tokens (no test)")
        by_pos = s.get("by_position")
        if by_pos:
            tested = [r for r in by_pos if r["p_value"] is not None]
            sig = [r for r in tested if r["p_value"] < 0.05]
            higher = sum(r["mean_correct"] > r["mean_error"] for r in sig)
            click.echo(f"    per answer position: {len(tested)} of {len(by_pos)} positions testable (>= 2 right "
                       f"and 2 wrong tokens), {len(sig)} with p < 0.05 ({higher} of them: right > wrong)")
    if "finetune" in res:
        f = res["finetune"]
        click.echo(f"  fine-tuning: {f['steps']} steps, loss {f['loss_first']:.3f} -> {f['loss_last']:.3f}")
    rein = res.get("reinforcement")
    if rein:
        p, ev = rein["protocol"], rein["evaluation"]
        ch = rein["selection"]["chosen"]
        click.echo(f"  reinforcement ({rein['mode']}): N={ch['n_heads']}, C={ch['value']:g} chosen on "
                   f"{p['selection']['n']} OOD selection examples; reported on {p['evaluation']['n']} "
                   f"disjoint OOD evaluation examples (key heads from {p['key_heads']['n']} ID examples)")
        click.echo(f"    no intervention          {_acc(ev['no_intervention'])}")
        click.echo(f"    REINFORCED key heads     {_acc(ev['reinforced'])}")
        click.echo(f"    CONTROL shifted ref.     {_acc(ev['shifted_reference'])}   (same heads, wrong neighbouring cell)")
        rh = ev.get("random_heads")
        if rh:
            d = rh["accuracy"]
            draws = ", ".join(f"{x:.1%}" for x in d["draws"])
            click.echo(f"    CONTROL random heads     {d['mean']:.1%} +- {d['sd']:.1%} (sd over {d['n']} draws, "
                       f"layers {rh['band'][0]}-{rh['band'][1]}, no key head): {draws}")
        tests = res.get("paired_tests", {})
        click.echo("    paired tests on the evaluation items (teacher-forced accuracy):")
        for name in (VS_NONE, VS_RANDOM, VS_SHIFTED, SHIFTED_VS_NONE):
            if name in tests:
                click.echo("      " + stats.verdict(tests[name], name))
        gen = rein.get("generation")
        if gen:
            click.echo("    free generation under the same reinforcement (whole-string accuracy):")
            click.echo(f"      no intervention {_acc(gen['no_intervention'], 'generation_accuracy')}   "
                       f"REINFORCED {_acc(gen['reinforced'], 'generation_accuracy', with_n=False)}   "
                       f"CONTROL shifted {_acc(gen['shifted_reference'], 'generation_accuracy', with_n=False)}")
            for name in (VS_NONE, VS_SHIFTED):
                if f"generated: {name}" in tests:
                    click.echo("      " + stats.verdict(tests[f"generated: {name}"], f"generated: {name}"))
    click.echo(f"plots in {folder.path / 'plots'}")
