"""The ``formats`` and ``formats-compare`` commands (paper 004)."""

from __future__ import annotations

import click

from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP
from whitebox_eval.config_file import config_file_option, study_config
from whitebox_eval.command_options import (
    LIMIT, batch_size_option, dtype_option, edit_option, field_option, gen_kwargs_option, lm_eval_data_option,
    model_load_options, resolved_batch_size, resolved_dtype, run_folder_options, save_activations_option, shots_option,
    task_option)
from whitebox_eval.tasks.spec import FORMATS_USAGE, MCQ_TASKS


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@task_option("arithmetic", "arithmetic[:add1,mul2,...] (number answers), or any multiple-choice task whose choices are "
             "text: triviaqa=PATH (llm-foundry jsonl), mcq=PATH (your own file; see --field), mmlu=PATH, arc=PATH, "
             "..., lm-eval:TASK (a multiple-choice task of lm-eval, read with --lm-eval-data DIR offline)",
             tasks=MCQ_TASKS, usage=FORMATS_USAGE)
@field_option
@lm_eval_data_option
@click.option("--limit", type=LIMIT, default=None,
              help="questions, a seeded sample stratified by category x gold position [default: 160 arithmetic, 1000 "
                   "for text answers (004's TriviaQA)]; a fraction F < 1: that share of the default (rounded up)")
@shots_option(5, "demonstrations in every format (004: 5), from a pool removed from the evaluated questions")
@click.option("--n-samples", type=click.IntRange(min=1), default=20, show_default=True, help="free generations per question (004: 20)")
@click.option("--temperature", type=click.FloatRange(min=0.0), default=1.0, show_default=True, help="sampling temperature (004: 1.0)")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--top-p", type=click.FloatRange(0.0, 1.0, min_open=True), default=None,
              help="nucleus filtering of the sampled answers (004 samples without it)")
@click.option("--top-k", type=click.IntRange(min=1), default=None, help="top-k filtering of the sampled answers")
@gen_kwargs_option({"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "max_gen_toks": "max_new_tokens"},
                   fixed={"do_sample": (True, "formats samples its free answers (004: 20 draws at T; greedy "
                                              "answers are temperature=0)")})
@click.option("--extract", type=click.Choice(["paper", "last-number", "after-equals"]), default="paper", show_default=True,
              help="arithmetic answer: the first number (004 sec. 2.4.1), the last number, or the number after the last '='")
@click.option("--n-bins", type=click.IntRange(min=1), default=10, show_default=True, help="equal-size bins for the expected alignment error")
@save_activations_option("last (the MCQ prompt's last token), options (its option labels), all (every MCQ prompt token), "
                         "generated (each free answer's generated tokens, keyed <sample id>/<format>/<sample>)")
@edit_option("the MCQ pass and every free generation run under the edits (the key/value cache kept; no @last: "
             "a generation's last position moves every step)")
@batch_size_option("questions per step (samples.jsonl is written after each); results do not depend on it")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@model_load_options
@dtype_option
@run_folder_options
@config_file_option("whitebox_eval.formats.config:FormatsConfig")
def formats(**kw) -> None:
    """First-token probabilities vs free generation (paper 004).

    Each question is asked 5-shot as an MCQ (P(correct) from the first token, raw and
    renormalised over the letters), as free generation and as free generation with
    the options listed (share of 20 sampled answers at T = 1 that are correct). Prints
    mean P(correct) per format with 95% intervals, their per-question correlation, the
    expected alignment error and the MCQ P(correct) split by free-generation P(correct).
    Samples are seeded per (seed, question, format): any --batch-size, rank count or
    --resume gives the same texts. Compare models (004 Fig. 6) with `whitebox-eval
    formats-compare`.

    \b
    Data parallel (rank 0 merges one run folder, equal to a single-process run):
      torchrun --nproc-per-node 4 -m whitebox_eval --device cuda formats --limit 1000
    """
    from whitebox_eval.formats.activations import check as check_saved
    from whitebox_eval.formats.record import SUITE
    from whitebox_eval.formats.study import run_formats

    cfg = study_config(SUITE, kw, batch_size=resolved_batch_size(kw["batch_size"], kw["model"], kw["dtype"]),
                       dtype=resolved_dtype(kw["dtype"], kw["model"]))
    check_saved(cfg, None)  # layers against the model's config.json, before any model work
    folder = run_formats(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
    if folder.shard in (None, 0):  # under torchrun, rank 0 reports the merged run
        for line in formats_summary(folder.load_results(), folder.path):
            click.echo(line)


def formats_summary(res: dict, path) -> list[str]:
    """The lines ``formats`` prints: every headline with its 95% interval and n."""
    from whitebox_eval.runs.estimates import describe
    from whitebox_eval.stats import derived_key, verdict

    answers = (f"arithmetic answers read by --extract {res['extract']}" if "extraction" in res else
               "free answers checked by exact match with the gold text after 004's normalisation")
    out = [f"\nrun folder: {path}", f"questions: {res['n_items']} ({res.get('selection')}), {res['shots']}-shot, {answers}"]
    out.append(f"  MCQ P(correct), renormalised over letters  {describe(res, 'p_correct,renorm', '6.1%')}")
    out.append(f"  MCQ P(correct), raw next-token softmax     {describe(res, 'p_correct,raw', '6.1%')}")
    out.append(f"  MCQ mass on the option letters             {describe(res, 'letter_mass', '6.1%')}")
    out.append(f"  MCQ argmax accuracy (Wilson)               {describe(res, 'acc,mcq', '6.1%')}")
    for f in ("free", "free_options"):
        out.append(f"  free generation P(correct), {f:16s}{describe(res, f'p_correct,{f}', '6.1%')}"
                   f"  empty texts {res[f'empty_rate,{f}']:.0%}")
        if f"off_format,{f}" in res:  # no answer at all (formats/answers.py), its own class
            out.append(f"    off-format generations (Wilson)           {describe(res, f'off_format,{f}', '6.1%')}"
                       f"; P(correct) among the answers {describe(res, f'p_correct_answered,{f}', '6.1%')}"
                       f" ({res[f'n_unanswered,{f}']} questions without one)")
    for name, t in res.get("paired_tests", {}).items():
        out.append("  " + verdict(t, name.replace("_vs_", " - ")))
    for pair in ("mcq~free", "mcq~free_options", "free~free_options"):
        key = f"pearson,{pair}"
        if res.get(key) is None:
            out.append(f"  pearson {pair:20s} undefined ({res.get(derived_key(key, 'reason'), 'no variance')})")
        else:
            out.append(f"  pearson {pair:20s} {describe(res, key, '+.3f')}")
    for pair in ("mcq~free", "raw~free", "free_options~free"):
        out.append(f"  alignment error {pair:17s} {describe(res, f'alignment_error,{pair}', '.3f')}")
    for rule, row in (res.get("extraction") or {}).items():
        if rule != "paper":
            out.append(f"  extract {rule:12s}: P(correct) free {row['p_correct,free']:.1%}, free_options "
                       f"{row['p_correct,free_options']:.1%}; differs from the paper's rule on "
                       f"{row['disagree_with_paper,free']:.1%} / {row['disagree_with_paper,free_options']:.1%} of texts")
    by_cat = res.get("p_correct_by_subject") or {}
    if by_cat:
        out.append("  P(correct) by category (004 Table 4):    mcq   free  free_options   n")
        for cat, row in by_cat.items():
            out.append(f"    {cat:34s} {row['mcq']:6.1%} {row['free']:6.1%} {row['free_options']:8.1%} {row.get('n', ''):>7}")
    table = res.get("mcq_by_free")
    if table:
        out.append("  MCQ P(correct) by free-generation P(correct) (004 Tables 2-3): share per MCQ P(correct) bin")
        out.append("    " + " " * 14 + " ".join(f"{b:>9s}" for b in table["bins"]) + "      mean    n")
        for name, part in table["partitions"].items():
            shares = " ".join(f"{'-' if v is None else f'{v:.0%}':>9s}" for v in part["share"])
            mean = "-" if part["mean"] is None else f"{part['mean']:.3f}"
            out.append(f"    {name:14s}{shares}  {mean:>8s} {part['n']:4d}")
        if "test" in table:
            out.append("    " + verdict(table["test"], "mean MCQ P(correct), free>=0.5 minus free<0.5"))
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("run_dirs", nargs=-1, required=True)
@click.option("--out", default="alignment_vs_mcq.png", show_default=True, help="where to write the Fig. 6 plot")
def formats_compare(run_dirs, out: str) -> None:
    """Alignment error vs MCQ performance across formats runs of one task (004 Fig. 6).

    \b
      whitebox-eval formats-compare runs/A runs/B runs/C --out fig6.png
    """
    from whitebox_eval.formats.over_runs import compare_runs
    from whitebox_eval.formats.plots import plot_alignment_vs_mcq
    from whitebox_eval.runs.estimates import describe

    cmp = compare_runs(list(run_dirs))
    cols = (("p_correct,renorm", "MCQ P(correct)"), ("p_correct,free", "free P(correct)"),
            ("alignment_error,mcq~free", "alignment error"), ("off_format,free", "off-format free"),
            ("off_format,free_options", "off-format free_options"))
    click.echo(f"{'model':24s} {'n':>5s}  " + "  ".join(f"{name + ' [95% CI]':25s}" for _, name in cols))
    for r in cmp["runs"]:
        cells = [f"{describe(r, key, '.3f', n=False):25s}" for key, _ in cols]
        click.echo(f"{str(r['model']):24s} {r['n']:5d}  " + "  ".join(cells))
    r = cmp["pearson"]
    click.echo(f"pearson r across {cmp['n_runs']} runs: " + (f"{r:+.3f}" if r is not None else f"undefined ({cmp['pearson_reason']})"))
    click.echo(f"plot: {plot_alignment_vs_mcq(cmp['runs'], out)}")
