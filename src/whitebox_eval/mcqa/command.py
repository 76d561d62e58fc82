"""The ``mcqa`` and ``universal`` commands (paper 000)."""

from __future__ import annotations

import click

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP
from whitebox_eval.config_file import config_file_option, study_config
from whitebox_eval.command_options import (
    LIMIT, batch_size_option, dtype_option, edit_option, field_option, gen_kwargs_option, lm_eval_data_option,
    model_load_options, resolved_batch_size, resolved_dtype, run_folder_options, save_activations_option, shots_option,
    task_option)
from whitebox_eval.tasks.spec import MCQ_FILES, MCQ_TASKS, MCQ_USAGE

@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@task_option("ssd", "ssd | arithmetic[:add1,mul2,...] | NAME=PATH with NAME in " + MCQ_FILES + ", "
             "or mcq for your own JSON lines / CSV / Parquet file (question, 2-26 choices, answer as 0-based "
             "index, letter or text; see --field) (PATH a local file, or hf:DATASET[:CONFIG][@SPLIT] when online)",
             tasks=MCQ_TASKS, usage=MCQ_USAGE)
@field_option
@lm_eval_data_option
@click.option("--view", type=click.Choice(["cloze", "letters"]), default=None,
              help="with --task lm-eval:TASK: cloze = lm-eval's own requests, unchanged (acc/acc_norm as lm-eval); "
                   "letters = the same documents with their choices listed as A. .. lines before 'Answer:' so the "
                   "head scores, lens, PriDe and PA apply [default: letters if --methods names a letter method, else cloze]")
@click.option("--n-options", type=click.IntRange(min=2), default=4, show_default=True, help="essential options per item (ssd, arithmetic)")
@click.option("--labels", default="letters", show_default=True, help="label set: letters, symbols, arbitrary, digits, lowercase")
@click.option("--uncertainty/--no-uncertainty", default=True, show_default=True, help="append 'I don't know' / 'None of the above' options")
@click.option("--language", default="en", show_default=True, help="ssd language: en, fr, it, ru")
@shots_option(0, "demonstrations before each question: MMLU takes the first K rows of the item's own subject from "
                 "the dev split (a dev/ folder beside test/, or --demos-from); other tasks a seeded draw of K from "
                 "--demos-from, else from the train (or dev) split found beside the file (ARC-Challenge-Train.jsonl "
                 "beside -Test.jsonl, hellaswag_train.jsonl beside hellaswag_val.jsonl, train.csv beside valid.csv, "
                 "a train/ folder beside test/), else from the task's first 15 items, which are then never evaluated; "
                 "config.yaml records the source, the file and the ids")
@click.option("--demos-from", default=None, metavar="PATH",
              help="file (MMLU: dev folder or file) in the task's own format to take the --shots demonstrations from; "
                   "items equal to a demonstration are not evaluated")
@click.option("--apply-chat-template", "--apply_chat_template", "apply_chat_template", is_flag=True,
              help="wrap each prompt (demonstrations + question, ending 'Answer:') as the one user message of the "
                   "tokenizer's chat template with add_generation_prompt=True, as lm-eval --apply_chat_template does "
                   "(few-shot collapsed into one turn); the answer follows the generation prompt without the ' ' "
                   "delimiter ('A', not ' A'; cloze options likewise); no special token is added twice")
@click.option("--limit", type=LIMIT, default=None,
              help="evaluate only the first N items, or a fraction F < 1 of them (0.1: a tenth, rounded up) [default: "
                   "every item of a file; 500 generated ssd/arithmetic items]; "
                   "the summary says 'evaluated N of M items (--limit)'")
@click.option("--prompt", type=click.Choice(["paper", "lm-eval"]), default="paper", show_default=True,
              help="prompt text: paper = paper 000's MCQ format; lm-eval = lm-evaluation-harness 0.4.13's task text "
                   "(mmlu: subject header, A.-D. lines, 'Answer:', letters scored as the next token; hellaswag, arc: "
                   "cloze over the option texts, acc and acc_norm as lm-eval computes them)")
@click.option("--representative", default="eol", show_default=True, help="option token(s) for head scores: label, label_sep, content_end, eol, content_mean (mean over the option text)")
@click.option("--methods", default=None,
              help="comma list of baseline, qk, attention, lens (logit lens), pride, pa (permutation accuracy), ablation, "
                   "cloze [default: baseline,qk,attention,lens,pride,pa; cloze for hellaswag/arc with --prompt lm-eval]")
@click.option("--ablation-k", type=click.IntRange(min=1), default=5, show_default=True, help="heads zeroed by the ablation method (vs as many random heads of the same layers, never the key heads)")
@click.option("--ablation-draws", default=5, show_default=True, type=click.IntRange(min=1),
              help="random-head draws the ablation compares the key heads with (mean, sd and every draw are reported)")
@click.option("--min-val-items", type=click.IntRange(min=1), default=50, show_default=True, help="smallest validation split for choosing the best head")
@click.option("--on-bad-row", type=click.Choice(["error", "skip"]), default="skip", show_default=True, help="what to do with malformed rows of a local file")
@edit_option()
@save_activations_option("last (the prompt's last token), options (each option's label token), all (every prompt token)")
@gen_kwargs_option({}, none="mcqa scores the options from the model's next-token logits and attention; it "
                            "generates nothing")
@click.option("--item-views/--no-item-views", default=True, show_default=True,
              help="keep, per item, 8 heads' attention rows over the prompt for the report's explorer (one more forward "
                   "pass per item, close to doubling a letter-only study; the accuracies do not change)")
@batch_size_option()
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@model_load_options
@dtype_option
@run_folder_options
@config_file_option("whitebox_eval.mcqa.config:MCQAConfig")
def mcqa(**kw) -> None:
    """MCQA through select-and-copy heads (paper 000): baseline vs best QK / Attention head.

    One forward pass per batch gives the letter logits, every head's QK-score (pre-RoPE
    query of the last token vs the key of each option's representative token) and its
    Attention-score. The best head is picked on a validation split and scored on the rest;
    methods that pick nothing (baseline, cloze, lens) are scored on every evaluated item.
    Every accuracy is printed with its 95% Wilson interval and n, and each method is
    compared with the baseline on the same items (exact McNemar test).

    \b
    lm-evaluation-harness's own prompts and metrics (compare with `whitebox-eval compare`):
      whitebox-eval mcqa --task hellaswag=hellaswag_val.jsonl --prompt lm-eval --limit 100
      whitebox-eval mcqa --task mmlu=data/test --prompt lm-eval --num_fewshot 5

    \b
    Any multiple-choice task of lm-eval (pip install 'whitebox-eval[lm-eval]'), its own
    prompts and sampler; offline with local files in the task's hub schema:
      whitebox-eval mcqa --task lm-eval:openbookqa --lm-eval-data data/openbookqa --shots 5
      whitebox-eval mcqa --task lm-eval:sciq --view letters     # head scores on the same documents

    \b
    Data parallel (each rank scores its blocks of batches; rank 0 merges one run folder,
    equal to a single-process run):
      torchrun --nproc-per-node 4 -m whitebox_eval --device cuda mcqa --limit 2500
    """
    from whitebox_eval.mcqa.record import SUITE
    from whitebox_eval.mcqa.study import run_mcqa

    lm_eval_task = kw["task"].is_lm_eval
    if kw["view"] and not lm_eval_task:
        raise click.UsageError("--view applies to --task lm-eval:TASK only")
    if kw["lm_eval_data"] and not lm_eval_task:
        raise click.UsageError("--lm-eval-data applies to --task lm-eval:TASK only")
    cfg = study_config(SUITE, kw, batch_size=resolved_batch_size(kw["batch_size"], kw["model"], kw["dtype"]),
                       dtype=resolved_dtype(kw["dtype"], kw["model"]))
    folder = run_mcqa(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
    if folder.shard in (None, 0):  # under torchrun, rank 0 reports the merged run
        _print_mcqa_summary(folder)


PAIRED_WORDS = {"qk_head_vs_baseline": "QK head vs baseline", "attention_head_vs_baseline": "Attention head vs baseline",
                "head_score_head_vs_baseline": "HeadScore head vs baseline", "pride_vs_baseline": "PriDe vs baseline",
                "ablation_key_vs_random": "ablation: key heads vs random heads (mean over draws)",
                "ablation_key_vs_unablated": "ablation: key heads zeroed vs nothing zeroed",
                "cloze_vs_baseline": "cloze vs baseline (all items)"}


def _print_mcqa_summary(folder) -> None:
    from whitebox_eval import stats
    from whitebox_eval.runs.estimates import headline_lines

    res = folder.load_results()
    n_ess = res.get("n_essential_options", res["n_options"])
    click.echo(f"\nrun folder: {folder.path}")
    n_total = res.get("n_total", res["n_items"])
    if res["n_items"] < n_total:
        click.echo(f"evaluated {res['n_items']} of {n_total} items (--limit)")
    else:
        click.echo(f"evaluated all {res['n_items']} items")
    if res.get("n_repeated_options"):
        click.echo(f"{res['n_repeated_options']} item(s) list an option twice; scored as lm-eval scores them "
                   "(ties go to the first copy)")
    view = folder.config.get("lm_eval_view")
    if view:  # --task lm-eval:TASK
        tasks = folder.config.get("lm_eval_tasks", [])
        click.echo(f"lm-eval task(s): {', '.join(t['name'] + ' (' + str(t['num_fewshot']) + '-shot)' for t in tasks)}; "
                   f"view: {view['view']}")
        click.echo(f"  {view['rule']}")
    elif res.get("prompt_style") == "lm-eval":
        click.echo("prompt: lm-eval (lm-evaluation-harness 0.4.13's task text; acc/acc_norm as it computes them)")
    if res["n_val"]:
        click.echo(f"split: validation {res['n_val']}, test {res['n_test']}: heads, PriDe's prior and degenerate-head marks "
                   "come from the validation items and those methods are reported on the test items; the baseline, cloze "
                   "and lens on all items (acc,baseline_test: the baseline on the test items, as in the paired tests)")
    unc = res["n_options"] - n_ess
    by_count = res.get("by_option_count")
    if by_count:  # a file whose rows have different numbers of options
        click.echo(f"options per item: {min(map(int, by_count))} to {max(map(int, by_count))} essential"
                   + (f" (+ {unc} uncertainty, never gold)" if unc else ""))
        click.echo(f"chance: {res['chance']:.1%} (mean of 1 / n essential options over the items; per count below)")
    else:
        click.echo(f"options per item: {res['n_options']}" + (f" ({n_ess} essential + {unc} uncertainty, never gold)" if unc else ""))
        click.echo(f"chance: {100 / n_ess:.1f}% (1 / {n_ess} essential options)")
    click.echo("accuracy [95% interval] n=<items> <interval method>:")
    for line in headline_lines(res, "6.1%"):
        click.echo(line)
    if by_count:
        click.echo("chance and accuracy per number of options (baseline, cloze: all items; selecting methods: test items):")
        for line in option_count_lines(by_count):
            click.echo(line)
    tests = res.get("paired_tests", {})
    if tests:
        click.echo("paired tests on the same items (difference of accuracies; selecting methods: the test items):")
    for name, words in PAIRED_WORDS.items():
        if name in tests:
            click.echo("  " + stats.verdict(tests[name], words))
    draws = [t for name, t in tests.items() if name.startswith("ablation_key_vs_random_draw")]
    if draws:
        sig = sum(t["p_value"] < t.get("alpha", stats.ALPHA) for t in draws)
        ps = ", ".join(f"{t['p_value']:.3g}" for t in draws)
        click.echo(f"  ablation: key heads vs each random draw (McNemar): {sig} of {len(draws)} draws significant at 0.05 (p = {ps})")
    for method in ("qk", "attention"):
        if method not in res:
            continue
        r = res[method]
        click.echo(f"  best {method} head: layer {r['best_head'][0]} head {r['best_head'][1]} "
                   f"(validation {r['val_accuracy']:.1%}, test {r['test_accuracy']:.1%}); "
                   f"{r.get('n_degenerate_heads', 0)} degenerate heads (scores tied across options on most validation "
                   "items: never ranked or selected)")
    if "qk" in res:
        table = folder.load_array("qk_head_accuracy")
        try:
            degenerate = folder.load_array("qk_degenerate_heads").astype(bool)
        except (FileNotFoundError, KeyError, WhiteboxError):
            degenerate = table != table  # older runs: none marked
        click.echo("\nQK-score accuracy per head on all items (%, rows = layers; -- = degenerate):")
        click.echo("      " + " ".join(f"h{h:<3d}" for h in range(table.shape[1])))
        for layer, row in enumerate(table):
            click.echo(f"  L{layer:<3d}" + " ".join("  --" if degenerate[layer, h] else f"{100 * v:4.0f}" for h, v in enumerate(row)))
        chance = (f"chance {100 * res['chance']:.0f}% = mean of 1 / n essential options" if by_count
                  else f"chance {100 / n_ess:.0f}% = 1 / {n_ess} essential options")
        click.echo(f"({chance}; heatmaps in {folder.path / 'plots'})")
    if "ablation" in res:
        a = res["ablation"]
        ra = a.get("random_accuracy")
        line = (f"zeroing the top {a['k']} validation QK heads: test accuracy {a['acc,unablated']:.1%} -> {a['acc,key_heads']:.1%}")
        if ra:
            line += (f"; {a['k']} random same-layer heads: -> {ra['mean']:.1%} ± {100 * ra['sd']:.1f} (sd over {ra['n']} draws: "
                     + ", ".join(f"{x:.1%}" for x in ra["draws"]) + ")")
        click.echo(line)


def option_count_lines(by_count: dict) -> list[str]:
    """The per-option-count table: items, chance 1 / n and each method's accuracy (n items)."""
    order = ("acc,baseline", "acc,cloze", "acc,qk_head", "acc,attention_head", "acc,head_score_head", "acc,pride")
    methods = sorted((k for k in next(iter(by_count.values())) if k.startswith("acc,") and not k.endswith("_n")),
                     key=lambda k: (order.index(k) if k in order else len(order), k))
    out = ["  options  items  chance  " + "  ".join(f"{m[4:]:>18s}" for m in methods)]
    for n, row in by_count.items():
        cells = [f"{'-' if row[m] is None else f'{row[m]:.1%}':>10s} (n={row[m + '_n']:>3d})" for m in methods]
        out.append(f"  {n:>7s}  {row['n_items']:5d}  {row['chance']:6.1%}  " + "  ".join(f"{c:>18s}" for c in cells))
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("run_dirs", nargs=-1, required=True)
@click.option("--method", type=click.Choice(["qk", "attention"]), default="qk", show_default=True)
@click.option("--fraction", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.05, show_default=True, help="top fraction of heads per run (000 uses 1%-5%)")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="heads to list by minimum percentile")
def universal(run_dirs, method: str, fraction: float, top: int) -> None:
    """Heads that select-and-copy across MCQA runs (000 sec. 6, App. D, E).

    Give run folders of one model on several datasets and/or shot counts. Prints the
    heads in the top --fraction of every run (intersection), the union within each shot
    count intersected across shot counts (App. D, Listing 9), and the heads with the
    highest minimum accuracy percentile over the runs (App. E).

    \b
      whitebox-eval universal runs/A runs/B runs/C --fraction 0.05
    """
    import numpy as np

    from whitebox_eval.errors import WhiteboxError
    from whitebox_eval.mcqa import head_scores as hs
    from whitebox_eval.runs import RunFolder

    tables, by_shots, models, n_degenerate = {}, {}, set(), {}
    for d in run_dirs:
        folder = RunFolder.open(d)
        try:
            table = folder.load_array(f"{method}_head_accuracy")
        except (FileNotFoundError, KeyError, WhiteboxError) as e:
            raise WhiteboxError(f"{d} has no {method} head accuracy table (was it an mcqa run with --methods {method}?)") from e
        try:  # heads tied across options on most validation items are never ranked (runs made before degenerate heads were marked lack the list)
            degenerate = folder.load_array(f"{method}_degenerate_heads").astype(bool)
        except (FileNotFoundError, KeyError, WhiteboxError):
            degenerate = np.zeros(table.shape, bool)
        if degenerate.shape == table.shape and degenerate.any():
            table = np.where(degenerate, -1.0, table)  # below every accuracy: never in a top fraction
            n_degenerate[d] = int(degenerate.sum())
        tables[d] = table
        models.add(folder.config.get("model"))
        by_shots.setdefault(folder.config.get("shots", 0), {})[d] = table
    if len({t.shape for t in tables.values()}) > 1 or len(models) > 1:
        raise WhiteboxError(f"the runs come from different models ({sorted(map(str, models))}); compare runs of one model")
    fmt = lambda heads: ", ".join(f"L{l}H{h}" for l, h in heads) or "(none)"
    click.echo(f"{len(tables)} runs of {models.pop()}, {method}-score, top {fraction:.0%} per run")
    if n_degenerate:
        click.echo("degenerate heads (ties on most validation items) ranked last: "
                   + ", ".join(f"{d}: {n}" for d, n in n_degenerate.items()))
    click.echo(f"in the top of every run:      {fmt(hs.intersect_top_heads(tables, fraction))}")
    click.echo(f"universal over shot counts:   {fmt(hs.universal_heads(by_shots, fraction))}")
    mp = hs.min_percentile(tables)
    order = np.argsort(-mp, axis=None, kind="stable")[:top]
    click.echo("highest minimum percentile:")
    for flat in order:
        l, h = np.unravel_index(flat, mp.shape)
        accs = " ".join(f"{t[l, h]:.0%}" for t in tables.values())
        click.echo(f"  L{l}H{h}  min percentile {mp[l, h]:.2f}  accuracies {accs}")
