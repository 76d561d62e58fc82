"""The ``whitebox-eval mui`` command group (paper 001): study, compare, law, masking, train-sae, subset.

``command`` is a click group; invoked with no sub-command it runs a MUI study.
"""

from __future__ import annotations

import click

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP
from whitebox_eval.config_file import config_file_option, study_config
from whitebox_eval.command_options import (
    LIMIT, batch_size_option, dtype_option, edit_option, field_option, gen_kwargs_option, lm_eval_data_option,
    log_samples_option, model_load_options, resolved_batch_size, resolved_dtype, run_folder_options,
    save_activations_option, shots_option, task_option)
from whitebox_eval.runs.run_ids import run_id_option
from whitebox_eval.tasks.spec import GENERATION_TASKS, GENERATION_USAGE as TASK_USAGE

TASK_HELP = TASK_USAGE + " (mcq=PATH: your own multiple-choice file; gen=PATH: checked by --answer)"


def _study_options(f):
    """Options shared by the study and by `compare` (everything but model and task)."""
    opts = [
        click.option("--score", type=click.Choice(["contribution", "activation", "ig", "sae"]), default="contribution",
                     show_default=True, help="neuron score: eq. 2 contribution, eq. 13 activation, eq. 14 integrated "
                     "gradients, or SAE features (eq. 5; needs --sae)"),
        click.option("--activation", type=click.Choice(["mlp_act", "mlp_gate_act"]), default="mlp_act", show_default=True,
                     help="neuron activation: down-projection input act(gate)*up, or act(gate) alone (authors' code)"),
        click.option("--final-norm", type=click.Choice(["none", "weight", "full"]), default="none", show_default=True,
                     help="final-norm treatment in eq. 2: none (paper/authors), fold its weight, or weight and scale"),
        click.option("--response-level", is_flag=True, help="sum scores over the response before thresholding (eq. 15)"),
        click.option("--threshold", default="top-per-mille", show_default=True,
                     help="top-per-mille (paper: 1 per mille of d_ff per layer) | top-fraction | topk | global-topk | topscore"),
        click.option("--threshold-value", type=click.FloatRange(min=0.0, min_open=True), default=None,
                     help="fraction for top-fraction, k for topk/global-topk, ratio for topscore"),
        click.option("--unit", type=click.Choice(["pair", "neuron"]), default="pair", show_default=True,
                     help="pair (the paper's eq. 8/10): pool every (response token, neuron) pair of a layer and keep "
                     "the neurons of the top-k pairs; neuron (not the paper's): rank neurons by their best score and "
                     "keep exactly k per layer (gives a larger MUI)"),
        click.option("--score-token", type=click.Choice(["next", "at"]), default="next", show_default=True,
                     help="next (the paper's eq. 2): position p is scored against the token it predicts (p+1); "
                     "at (authors' code): the response positions are scored against their own token"),
        click.option("--reference-code-compat", is_flag=True,
                     help="reproduce the authors' get_neuron.py: --activation mlp_gate_act --score-token at "
                     "--unit pair --final-norm none (contribution/activation scores only)"),
        click.option("--ig-steps", type=click.IntRange(min=1), default=10, show_default=True, help="Riemann steps m for --score ig"),
        click.option("--ig-joint-layers", is_flag=True, help="--score ig: scale all layers on one path (m passes, not m x layers)"),
        click.option("--sae", "sae", multiple=True, help="SAE for --score sae (repeatable): [LAYER=|HOOK=]SOURCE, SOURCE a folder or file (SAELens, "
                          "Gemma Scope, Llama Scope layouts, or an SAE study's run folder), hf:ORG/REPO/PATH[@REV] or "
                          "saelens:RELEASE/SAE_ID; the hook and layer are read from the files or names (HOOK e.g. "
                          "blocks.5.hook_mlp_out)"),
        edit_option("the responses and every scoring pass run under the edits (the key/value cache kept; no @last)"),
        shots_option("auto", "auto: zero-shot for instruction-tuned (chat template) models, one-shot for base (App. A.6)",
                     type=click.Choice(["auto", "0", "1"])),
        click.option("--chat", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
                     help="wrap zero-shot prompts in the tokenizer's chat template"),
        click.option("--responses", default="model", show_default=True,
                     help="model (greedy generation) | gold (the data's reference answer) | PATH (jsonl with id, response)"),
        click.option("--max-new-tokens", type=click.IntRange(min=1), default=None,
                     help="generation budget (default: the paper's 1024, App. A.6; answers stop earlier at EOS or "
                     "the task's stop strings); responses that reach it are counted as truncated"),
        click.option("--stop", multiple=True, help="stop string (repeatable; default per task: line break / blank line; "
                     "lm-eval's tasks: their until strings)"),
        click.option("--answer", default=None, metavar="CHECK",
                     help="with --task gen=PATH: how a response is checked against the references: exact (after "
                     "normalisation; the default), numeric (the final number), contains, or regex:PATTERN (its first "
                     "group or match)"),
        field_option,
        lm_eval_data_option,
        click.option("--allow-code-execution", is_flag=True,
                     help="run the model's code to score it: humaneval=PATH (pass@1, each completion in a subprocess "
                     "with a time limit, no network, a temporary folder) and lm-eval tasks whose metric executes it "
                     "(HumanEval, MBPP); without it those tasks are refused"),
        click.option("--on-bad-row", type=click.Choice(["error", "skip"]), default="skip", show_default=True,
                     help="what to do with malformed rows of a local file (skipped rows are listed)"),
        click.option("--limit", type=LIMIT, default=100, show_default=True,
                     help="number of items, or a fraction F < 1 of the task's items (rounded up)"),
        batch_size_option(),
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True),
        dtype_option,
        click.option("--output", "--output_path", "output", default="runs", show_default=True,
                     help="folder that receives run folders (lm-eval: --output_path)"),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _config(model: str, task, kw: dict):
    """One task's MUI config from the command's options (:func:`study_config`); ``--field`` and
    ``--answer`` reach the gen=PATH tasks only (the command may run several tasks)."""
    from whitebox_eval.mui.record import MUI
    from whitebox_eval.tasks.spec import TaskSpec

    spec = TaskSpec.parse(task, GENERATION_TASKS, TASK_USAGE)
    own = {"fields": tuple(kw["fields"]), "answer": kw["answer"]} if spec.name == "gen" else {}
    return study_config(MUI, {k: v for k, v in kw.items() if k not in ("fields", "answer")}, model=model, task=spec,
                        **own, batch_size=resolved_batch_size(kw["batch_size"], model, kw["dtype"]),
                        dtype=resolved_dtype(kw["dtype"], model))


@click.group(name="mui", invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@task_option(None, TASK_HELP + " (repeatable: one run per task, then the Utility Law across them)",
             tasks=GENERATION_TASKS, usage=TASK_USAGE, multiple=True)
@_study_options
@click.option("--run-id", default=None, callback=run_id_option,
              help="name of the run folder (default: time-suite-model-task)")
@click.option("--resume", is_flag=True, help="continue the run folder --output/--run-id where it stopped")
@model_load_options
@save_activations_option("last (the prompt's last token), generated (each generated token of the greedy response: "
                         "the row that produced it) or all (every prompt token, then the generated ones: every row "
                         "the decoder computed)")
@log_samples_option
@gen_kwargs_option({"max_gen_toks": "max_new_tokens", "until": "stop"},
                   fixed={"do_sample": (False, "MUI reads greedy responses (001 App. A.6)"),
                          "temperature": (0, "MUI reads greedy responses (001 App. A.6)")})
@config_file_option("whitebox_eval.mui.config:MUIConfig")
@click.pass_context
def command(ctx: click.Context, model: str, task: tuple, run_id: str | None, resume: bool, **kw) -> None:
    """Model Utilization Index (paper 001): how much of the model a task uses.

    \b
    For each item the model answers (greedy, up to the paper's 1024 new tokens;
    zero-shot + chat template for instruction-tuned models, one-shot for base models),
    the answer is checked, and one teacher-forced pass over prompt + response scores
    every MLP neuron at the positions that predict response tokens (position p scores
    the token at p+1, eq. 2). The paper's key set (eq. 8/10, the default --unit pair):
    per layer, pool all (response token, neuron) pairs of the sample and keep the
    neurons of the top floor(1 per mille x d_ff) pairs. MUI = |union of key sets| /
    (layers x d_ff). Written: accuracy and MUI with 95% intervals, the effective
    threshold fraction, truncated responses, PUR, MUI of correct vs incorrect answers at
    equal subset size (permutation test), MUI per category, per-sample key sets.
    --reference-code-compat reproduces the authors' code instead (options below).

    \b
    Examples:
      whitebox-eval mui --model smollm2-135m --task arithmetic-gen --limit 64
      whitebox-eval mui --model gemma3-270m --task mmlu=data/mmlu/test --limit 50
      whitebox-eval mui --task gsm8k=test.jsonl --responses gold       (score the reference solutions)
      whitebox-eval mui --task lm-eval:gsm8k --task gen=qa.jsonl --task arc=arc.jsonl --limit 50
                                     (one run per task, a table of accuracy and MUI, the law across them)
      whitebox-eval mui --task gen=qa.jsonl --answer contains       (your own file: prompt/question, answer(s))
      whitebox-eval mui --task ssd --score sae --sae runs/sae-l15      (feature MUI, eq. 9)
      whitebox-eval mui compare --before base/ --after tuned/ --task arithmetic-gen --task ssd
      whitebox-eval mui law runs/run-a runs/run-b runs/run-c --plot law.png
      whitebox-eval mui masking --source-task arithmetic-gen --eval-task ssd --ks 1,2,4,8
      whitebox-eval mui train-sae --layer 15 --text data/wikitext2/valid.txt --out runs/sae-l15
      whitebox-eval mui subset runs/<run> --group add1
    """
    if ctx.invoked_subcommand is not None:
        return
    if not task:
        click.echo(ctx.get_help())
        raise WhiteboxError("give --task (e.g. --task arithmetic-gen), or a sub-command")
    from whitebox_eval.sae.sources import check_sources

    check_sources(kw["sae"], model)  # a source that is nowhere: one line before torch and the study are imported
    from whitebox_eval.mui.study import run_mui

    forms = {"lm-eval": "lm-eval:TASK", "gen": "gen=PATH"}
    for option, flag, name in (("lm_eval_data", "--lm-eval-data", "lm-eval"), ("answer", "--answer", "gen"),
                               ("fields", "--field", "gen")):
        if kw[option] and not any(spec.name == name for spec in task):
            raise WhiteboxError(f"{flag} applies to --task {forms[name]} only")
    if kw["allow_code_execution"] and not any(spec.is_lm_eval or spec.record.runs_code for spec in task):
        raise WhiteboxError("--allow-code-execution applies to --task lm-eval:TASK and humaneval=PATH only")
    for spec in task:  # every file is there before the first run starts
        spec.check_file()
    if kw.get("save_activations"):  # a bad spec or layer: one line before any model work
        from whitebox_eval.mui.activations import check as check_saved

        check_saved(_config(model, task[0], kw), None)
    folders = []
    for spec in task:
        cfg = _config(model, spec, kw)
        child = f"{run_id}-{spec.slug}" if run_id and len(task) > 1 else run_id
        folders.append(run_mui(cfg, kw["output"], run_id=child, resume=resume))
        _print_study(folders[-1])
    if len(folders) > 1:
        _print_tasks(folders)


def _print_tasks(folders) -> None:
    """Accuracy and MUI per task with their intervals, then the Utility Law across the tasks."""
    from whitebox_eval.mui.over_runs import fit_runs
    from whitebox_eval.runs.estimates import describe

    click.echo("\nper task (95% intervals):")
    for f in folders:
        res = f.load_results()
        click.echo(f"  {str(f.config.get('task')):48s} n={res['n_items']:<4d} accuracy "
                   f"{describe(res, 'accuracy', '.1%', n=False)}  MUI {describe(res, 'mui', '.3%', n=False)}")
    click.echo("Utility Law across these tasks (MUI = A ln(P) + B, sec. 3.2): whitebox-eval mui law "
               + " ".join(str(f.path) for f in folders))
    try:
        res = fit_runs([f.path for f in folders])
    except WhiteboxError as e:
        click.echo(f"  not fitted: {e}")
        return
    _print_law(res)


def _print_study(folder) -> None:
    from whitebox_eval.runs.estimates import describe

    res = folder.load_results()
    click.echo(f"run folder: {folder.path}")
    click.echo(f"items {res['n_items']}  accuracy {describe(res, 'accuracy', '.1%', n=False)}  "
               f"MUI {describe(res, 'mui', '.3%', n=False)} "
               f"({res['n_activated']} of {res['total_units']} {res['kind']}s)  PUR {res.get('pur', float('nan')):.2f}")
    th = res.get("threshold") or {}
    if th.get("effective_fraction") is not None:
        k = th.get("k_per_layer", th.get("k_total"))
        click.echo(f"threshold {th['method']} ({th['unit']}{', the paper' + chr(39) + 's rule' if th.get('paper_rule') else ''}): "
                   f"k = {k}, effective fraction {100 * th['effective_fraction']:.4f}%")
    if "max_new_tokens" in res:
        click.echo(f"responses truncated by the {res['max_new_tokens']}-token budget: "
                   f"{res['n_truncated_responses']} of {res['n_items']}")
    for w in res.get("warnings") or []:
        click.echo(f"WARNING: {w}")
    if res.get("sae_fidelity"):
        from whitebox_eval.sae.fidelity import fidelity_lines

        for layer, fid in res["sae_fidelity"].items():
            click.echo(f"SAE layer {layer} fidelity on this task's prompt + response tokens (feature MUI "
                       f"{100 * res['mui']:.3f}% rests on it):")
            for line in fidelity_lines(fid):
                click.echo(line)
    for layer, q in (res.get("sae_quality") or {}).items():
        if q.get("n_tokens"):
            click.echo(f"SAE layer {layer} at the scored positions: pooled explained variance "
                       f"{q['explained_variance']:.3f}, {q['n_dead']} of {q['d_sae']} features never active on "
                       f"{q['n_tokens']} tokens")
    if "mui,correct" in res and "mui,incorrect" in res:
        click.echo(f"MUI correct {describe(res, 'mui,correct', '.3%')}  incorrect "
                   f"{describe(res, 'mui,incorrect', '.3%')}; unions grow with n")
    if "off_format" in res:
        n_off = (res.get("answer_classes") or {}).get("off_format", 0)
        click.echo(f"off-format responses (no answer read; left out of correct vs incorrect): {n_off}, "
                   f"{describe(res, 'off_format', '.1%')}")
    ci = res.get("correct_vs_incorrect") or {}
    if "refused" in ci:
        click.echo(f"correct vs incorrect: not tested, {ci['refused']}")
    elif ci:
        verdict = "significant at 0.05" if ci["significant"] else "NOT significant"
        click.echo(f"correct vs incorrect, both rarefied to r={ci['subset_size']} samples: MUI difference "
                   f"{describe(ci, 'diff', '+.4%')} (percentage points), "
                   f"permutation p = {ci['p_value']:.3g} -- {verdict}")
    for g, v in (res.get("by_group") or {}).items():
        click.echo(f"  {g:24s} n={v['n']:<4d} accuracy {describe(v, 'accuracy', '6.1%', n=False)}  "
                   f"MUI {describe(v, 'mui', '.3%', n=False)}")


@command.command()
@click.option("--before", required=True, help="checkpoint before training (" + MODEL_HELP + ")")
@click.option("--after", required=True, help="checkpoint after training")
@click.option("--task", "tasks", multiple=True, required=True, help=TASK_HELP + " (repeatable)")
@click.option("--tol-performance", type=click.FloatRange(min=0.0), default=0.0, show_default=True, help="accuracy change (points) below which the move is undetermined")
@click.option("--tol-mui", type=click.FloatRange(min=0.0), default=0.0, show_default=True, help="MUI change (points) below which the move is undetermined")
@_study_options
@model_load_options
def compare(before: str, after: str, tasks: tuple[str, ...], tol_performance: float, tol_mui: float, **kw) -> None:
    """Regression test (Corollary 1): direction of each task's (accuracy, MUI) move between two checkpoints.

    \b
    evolving      accuracy up,   MUI down  (genuinely stronger)
    accumulating  accuracy up,   MUI up    (ability emphasised, e.g. targeted tuning)
    coarsening    accuracy down, MUI up    (this ability weakened)
    collapsing    accuracy down, MUI down  (breakdown; seen off-task after contamination)
    Runs land in --output and are reused when the same comparison is repeated.
    """
    from whitebox_eval.mui.over_runs import compare_checkpoints, comparison_table, save_comparison

    base = _config(before, tasks[0], kw)
    rows = compare_checkpoints(before, after, tasks, base, kw["output"], tol_performance=tol_performance, tol_mui=tol_mui)
    click.echo(comparison_table(rows))
    for r in rows:
        for line in r.verdicts():
            click.echo("  " + line)
    folder = save_comparison(rows, kw["output"], before=before, after=after)
    click.echo(f"\nresults and plot: {folder.path}")


@command.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--plot", default=None, help="PNG path for the MUI-vs-performance plot with the fitted curve")
@click.option("--allow-mixed", is_flag=True,
              help="fit runs whose settings differ (threshold, unit, score, responses, budget, limit/n); "
              "refused by default because their MUIs are not comparable")
def law(runs: tuple[str, ...], plot: str | None, allow_mixed: bool) -> None:
    """Fit the Utility Law MUI = A ln(P) + B (percent units, sec. 3.2) over finished MUI run folders.

    The runs must share every MUI setting and n (a union grows with n); R^2 and the
    95% intervals of A and B need at least 3 runs.
    """
    from whitebox_eval.mui.over_runs import fit_runs

    res = fit_runs(list(runs), plot, allow_mixed=allow_mixed)
    for label, p, m in zip(res.labels, res.performance, res.mui):
        click.echo(f"  {label:50s} accuracy {p:5.1f}%  MUI {m:.3f}%")
    _print_law(res)
    if plot:
        click.echo(f"plot: {plot}")


def _print_law(res) -> None:
    """The fitted law with its 95% intervals (or why it has none)."""
    from whitebox_eval.runs.estimates import format_estimate

    for s in res.skipped:
        click.echo(f"  skipped: {s}")
    if res.mixed:
        click.echo("WARNING: mixed settings (--allow-mixed): " + "; ".join(res.mixed))
    f = res.fit
    if f.r2 is None:
        click.echo(f"MUI = {f.a:.4f} ln(P) + {f.b:.4f}   ({f.n_points} points: R^2 and intervals need >= 3 runs)")
    else:
        click.echo(f"MUI = {f.a:.4f} ln(P) + {f.b:.4f}   R^2 = {f.r2:.3f}  ({f.n_points} points)")
        a, b = ({"lo": lo, "hi": hi, "method": "t-interval"} for lo, hi in (f.a_ci, f.b_ci))
        click.echo(f"  A {format_estimate(f.a, a, '.4f')}  B {format_estimate(f.b, b, '.4f')} (95%)")


@command.command()
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@click.option("--source-task", default="arithmetic-gen", show_default=True, help="task X whose key neurons are masked; " + TASK_HELP)
@click.option("--eval-task", "eval_tasks", multiple=True, help="tasks measured under masking (repeatable; default X and ssd)")
@click.option("--ks", default="1,2,4,8,16", show_default=True, help="k of the per-sample key sets to mask (comma list)")
@click.option("--score", type=click.Choice(["contribution", "activation"]), default="contribution", show_default=True)
@click.option("--activation", type=click.Choice(["mlp_act", "mlp_gate_act"]), default="mlp_act", show_default=True)
@click.option("--unit", type=click.Choice(["pair", "neuron"]), default="pair", show_default=True,
              help="pair: neurons of the top-k pooled (token, neuron) pairs (the paper's eq. 8/10); neuron: k best neurons")
@click.option("--target", type=click.Choice(["own", "gold"]), default="own", show_default=True,
              help="answer scored by log-prob: the model's own unmasked greedy answer (its answer format, e.g. "
              "'The answer is 11.'), or the data's bare gold answer")
@click.option("--random-draws", type=click.IntRange(min=1), default=5, show_default=True, help="random-mask controls per k (mean, sd, every draw)")
@click.option("--generate/--no-generate", default=True, show_default=True,
              help="measure accuracy by greedy generation under masking (slow on CPU); the answer log-prob is "
              "always measured")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=64, show_default=True,
              help="generation budget per answer (source answers, own answers, generation under masks); source "
              "and own answers that reach it are counted")
@shots_option("auto", "auto: zero-shot for instruction-tuned models, one-shot for base (App. A.6)", type=click.Choice(["auto", "0", "1"]))
@click.option("--limit", type=click.IntRange(min=1), default=32, show_default=True,
              help="items per split: key neurons are selected on one split, every task is evaluated on a disjoint one")
@batch_size_option()
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@model_load_options
@dtype_option
@run_folder_options
@config_file_option("whitebox_eval.mui.masking_config:MaskingConfig")
def masking(model, source_task, eval_tasks, ks, score, activation, unit, target, random_draws, generate, max_new_tokens,
            shots, limit, batch_size, seed, dtype, output, run_id, resume) -> None:
    """Masking validation (sec. 3.8): mask X's key neurons for growing k; X and Y vs random masks.

    \b
    Key neurons come from a selection split of X's items; every task is measured on a
    disjoint evaluation split (ids in splits.json). Per item: the log-prob of the
    model's own unmasked answer (or gold) and, with --generate, accuracy. Key vs
    random is a paired bootstrap over items (key minus the mean of the random draws).
    """
    from whitebox_eval import stats
    from whitebox_eval.mui.masking import run_masking
    from whitebox_eval.mui.record import MASKING

    cfg = study_config(MASKING, click.get_current_context().params, batch_size=resolved_batch_size(batch_size, model, dtype),
                       dtype=resolved_dtype(dtype, model))
    folder = run_masking(cfg, output, run_id=run_id, resume=resume)
    res = folder.load_results()
    click.echo(f"run folder: {folder.path}")
    click.echo(f"key neurons from {res['splits']['selection'][source_task]} selection items of {source_task}; "
               f"evaluation items disjoint: {res['splits_disjoint']}")
    src = res.get("source_answers") or {}
    if src.get("n_truncated"):
        click.echo(f"WARNING: {src['n_truncated']} source answers hit the {max_new_tokens}-token budget")
    metrics = cfg.metrics
    for t, c in res["curves"].items():
        click.echo(f"{t} (n={c['n_items']} evaluation items): baseline "
                   + "  ".join(f"{m} {c['baseline'][m]:.3f}" for m in metrics))
        tg = res.get("targets", {}).get(t, {})
        if tg.get("n_truncated"):
            click.echo(f"  WARNING: {tg['n_truncated']} own answers hit the {max_new_tokens}-token budget")
        for key, rnd in zip(c["key"], c["random"]):
            parts = []
            for m in metrics:
                d = rnd[f"{m},draws"]
                parts.append(f"{m}: key {key[m]:.3f} random {d['mean']:.3f} (sd {d['sd']:.3f}, {d['n']} draws)")
            click.echo(f"  k={key['k']:<3d} masked {key['n_masked']:6d}  " + "  ".join(parts))
            for m in metrics:
                click.echo("    " + stats.verdict(rnd[f"{m},key_minus_random"], f"{m} key minus random"))


@command.command()
@click.argument("run")
@click.option("--group", "groups", multiple=True, help="keep samples of this group/category (repeatable)")
@click.option("--correct/--incorrect", default=None,
              help="keep only correct (or incorrect: wrong) responses; off-format ones are neither")
def subset(run: str, groups: tuple[str, ...], correct: bool | None) -> None:
    """MUI of a subset of a finished run's samples, from the stored key sets (no model run; sec. 3.6-3.7).

    MUI is a union and grows with n: compare subsets of equal size only.
    """
    import numpy as np

    from whitebox_eval.mui.statistics import jackknife_mui
    from whitebox_eval.mui.finished import load_key_sets
    from whitebox_eval.runs import RunFolder
    from whitebox_eval.runs.estimates import format_estimate

    from whitebox_eval.mui.answer_classes import complete

    def keep(s: dict) -> bool:
        if correct is not None and "class" not in s:
            raise WhiteboxError(f"the run's responses are not classified right / wrong / off-format: "
                                f"{results.get('answer_classes', {}).get('not_classified', 'no class')}")
        return (not groups or s.get("group") in groups) and (correct is None or s["class"] == ("right" if correct
                                                                                              else "wrong"))

    folder = RunFolder.open(run)
    ks = load_key_sets(folder)
    results, rows = folder.load_results(), list(folder.read_samples())
    complete(results, rows, folder.config)  # an old run's classes read back from its texts
    samples = {str(s["id"]): s for s in rows}
    sel = np.array([keep(samples[sid]) for sid in ks.sample_ids])
    if not sel.any():
        raise WhiteboxError("no sample matches the subset")
    est = jackknife_mui(ks, sel)
    click.echo(f"{est.n} samples  MUI {format_estimate(est, spec='.3%', n=False, method=False)} "
               "(95% jackknife; a union grows with n)")


def _register_sae_commands() -> None:
    from whitebox_eval.sae.commands import sae_fidelity, train_sae

    command.add_command(train_sae)
    command.add_command(sae_fidelity)


_register_sae_commands()
