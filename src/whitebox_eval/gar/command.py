"""The ``whitebox-eval gar`` command (paper 002): evaluate, find True/False heads, intervene, probe."""

from __future__ import annotations

import math

import click

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.config_file import config_file_option, study_config
from whitebox_eval.command_options import (
    LIMIT, batch_size_option, dtype_option, edit_option, gen_kwargs_option, model_load_options, resolved_batch_size,
    resolved_dtype, run_folder_options)

from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP
MODES = ("evaluate", "attribute", "truth-heads", "intervene", "probe")


def _pct(v) -> str:
    return "   n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:5.1f}%"


def split_edit_at(edits, edit_at: str | None) -> tuple[tuple[str, ...], str]:
    """``--edit at:WHERE`` (where gar's own interventions edit; ``--edit-at WHERE`` is its older
    spelling) apart from the edits every pass runs under; two different places are one line."""
    at = [e.strip()[3:] for e in edits if e.strip().startswith("at:")]
    rest = tuple(e for e in edits if not e.strip().startswith("at:"))
    places = {*at, *([edit_at] if edit_at else [])}
    bad = [a for a in at if a not in ("read", "pattern", "both")]
    if bad:
        raise WhiteboxError(f"--edit at:{bad[0]}: gar's interventions edit at:read, at:pattern or at:both")
    if len(places) > 1:
        raise WhiteboxError(f"--edit at: / --edit-at name two places ({', '.join(sorted(places))}): give one")
    return rest, places.pop() if places else "read"


@click.command(name="gar", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--mode", type=click.Choice(MODES), default="evaluate", show_default=True,
              help="what to run (see above)")
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@click.option("--tasks", default=None,
              help="all | generation | classification | kr | truth | ID[,ID...] (ids as in the paper, "
                   "e.g. 'GendersOfPersons/same,KindsOfThings/kindOf×3 [negate](swapKV)'; x for ×). "
                   "Default: all (evaluate), truth (attribute, truth-heads, intervene)")
@click.option("--limit", type=LIMIT, default=None, help="examples per task (default the paper's 8 / 16; a smaller N takes their first N, a larger one generates N; even when classification tasks are in: Yes/No pairs), or a fraction F < 1 of each task's default set (rounded up, to whole pairs)")
@click.option("--elements", type=click.Choice(["all", "train", "test"]), default="all", show_default=True,
              help="evaluate/truth-heads: every element (the paper's benchmark) or one half of the element split "
                   "(each category's names, cities, things halved by --seed; a model fine-tuned on GAR tasks is "
                   "asked about the test half)")
@click.option("--no-kr", "include_kr", flag_value=False, default=True, help="evaluate: leave out the knowledge-recall sub-problems")
@click.option("--rule", type=click.Choice(["chance", "mean"]), default="chance", show_default=True,
              help="App. C threshold: 1/#alternatives, or the alternatives' mean probability")
@click.option("--heads", default=None, help="intervene/probe: heads as LAYER.HEAD or LxHy, comma separated (e.g. 14.18,L14H46)")
@click.option("--true-heads", default=None, help="truth-heads: use these True heads instead of finding them")
@click.option("--false-heads", default=None, help="truth-heads: use these False heads instead of finding them")
@click.option("--pattern", default=None,
              help="attention pattern KEY->QUERY (QUERY attends to KEY), quoted: 'V->E', 'Q->E', 'A^->E', 'Q->A', ... "
                   "Default: Q->A (truth-heads), V->E (intervene)")
@click.option("--edit-at", type=click.Choice(["read", "pattern", "both"]), default=None,
              help="the older spelling of --edit at:read|pattern|both (still read)")
@edit_option("gar's own interventions (truth-heads, intervene) edit the row --edit at:read (default: the last "
             "prompt token, where the answer is read), at:pattern (the pattern's attending role as sec. 5 states "
             "it; Q->A: the stated answer A) or at:both", own=("at",))
@click.option("--select-fraction", type=click.FloatRange(min=0.0, max=1.0, min_open=True, max_open=True), default=0.5, show_default=True,
              help="truth-heads: share of Yes/No pairs used to select heads; the rest is reported")
@click.option("--random-draws", type=click.IntRange(min=1), default=5, show_default=True,
              help="truth-heads/probe: random head sets (same count and layer band) for the controls")
@click.option("--inverse-draws/--no-inverse-draws", default=True, show_default=True,
              help="truth-heads: run the inverse edit on each random head set too (the inverse edit's own control)")
@click.option("--steps", type=click.IntRange(min=1), default=5, show_default=True, help="attribute/truth-heads: integrated-gradients steps")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="attribute: heads kept per task")
@click.option("--candidates", "n_candidates", type=click.IntRange(min=1), default=10, show_default=True, help="truth-heads: top-|attribution| heads to split")
@click.option("--n-true", type=click.IntRange(min=0), default=2, show_default=True, help="truth-heads: how many True heads to keep")
@click.option("--n-false", type=click.IntRange(min=0), default=2, show_default=True, help="truth-heads: how many False heads to keep")
@click.option("--probe-data", multiple=True,
              help="truth-heads/probe: SNLI .jsonl or Geometry of Truth .csv (repeatable)")
@click.option("--probe-limit", type=click.IntRange(min=1), default=None, help="statements sampled from each probe file")
@click.option("--folds", "probe_folds", type=click.IntRange(min=2), default=5, show_default=True, help="probe: cross-validation folds")
@click.option("--on-bad-row", type=click.Choice(["error", "skip"]), default="skip", show_default=True, help="truth-heads/probe: what to do with malformed rows of a --probe-data file")
@batch_size_option()
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@model_load_options
@gen_kwargs_option({}, none="gar reads P(answer) from one forward pass per prompt; it generates nothing")
@dtype_option
@run_folder_options
@config_file_option(*(f"whitebox_eval.gar.config:{c}" for c in (
    "GARConfig", "GARAttributeConfig", "GARHeadsConfig", "GARInterveneConfig", "GARProbeConfig")))
def command(**kw) -> None:
    """GAR: compositional relational reasoning, its evaluation and its heads (paper 002).

    \b
    --mode evaluate (default): score every example of --tasks from one forward pass
      per batch: the first-token probability of the target vs its alternatives at
      the last position (App. C: correct when above 1/3 for generation, 1/2 for Yes/No;
      argmax accuracy too). Beside the paper's rule, with 95% intervals: argmax
      accuracy among the choices, mean P(target) and the mass on the choices (a
      small model puts little mass there). results.json: accuracy by form, by
      difficulty (n_r x negate), by syntactic variation, on knowledge-recall
      sub-problems, the compositionality gap (sub-problem accuracy / n_r=2
      accuracy) and the App. C error analysis of the generation errors.
        whitebox-eval gar --model smollm2-135m --tasks all --limit 2
        whitebox-eval gar --tasks 'GendersOfPersons/isA,KindsOfThings/kindOf×3 [negate]'
        torchrun --nproc-per-node 4 -m whitebox_eval --device cuda gar --tasks all   # ranks share it
    \b
    --mode attribute: rank every head per task by EAP-IG attribution (KL metric;
      classification: the Yes/No partner is the corrupted input, generation: zero
      input embeddings), keep the --top of each task, and list the heads several
      tasks share (the reused core of the circuits, sec. 4); plots a tasks x heads map.
        whitebox-eval gar --mode attribute --tasks 'truth,GendersOfPersons/same,KindsOfThings/kindOf×3' --limit 8
    \b
    --mode truth-heads: on classification tasks (default: the three of sec. 5), split
      the Yes/No pairs into a selection and a report split (--select-fraction). On
      the selection split: rank heads by EAP-IG attribution (KL metric; the Yes/No
      partner is the corrupted input) and split the top --candidates into True heads
      (more active at the stated answer A on true statements) and False heads. On the
      report split: the True/False intervention (Yes: force Q->A on True heads and
      knock out False heads; No: the reverse), its inverse, strong / weak / knock-out
      on all of them, and the True/False intervention and its inverse on --random-draws
      random head sets of the same count and layer band (each edit's control); with --probe-data, the
      App. E truth probe on their activations. The summary says when attributions
      are too small to select anything.
        whitebox-eval gar --mode truth-heads --limit 8 \\
            --probe-data ../shared/datasets/geometry_of_truth/cities.csv
    \b
    --mode intervene: strong (force --pattern), weak (copy the best-matching other
      head's row) and knock-out interventions on --heads, edited at --edit-at;
      before/after: the paper's rule, argmax accuracy, mean P(target) and the mass on
      the choices with 95% intervals, the paired change (McNemar, paired bootstrap)
      and how many predictions flipped; the heads' matched attention on the pattern.
        whitebox-eval gar --mode intervene --tasks generation --limit 2 --heads 20.3 --pattern 'V->E'
    \b
    --mode probe: App. E MLP probe (Linear-ReLU-Linear, Adam, 30 epochs, k-fold CV;
      an SNLI file of >= 9,000 pairs gets App. E's 3,000/3,000/3,000 x 5 seeds) on
      --heads' activations over the statement tokens: accuracy with a 95% interval,
      against the majority baseline (paired test) and --random-draws random head sets.
        whitebox-eval gar --mode probe --heads 14.1,15.2 --probe-data cities.csv

    Patterns are KEY->QUERY: 'V->E' = END attends to V. Roles: Q K V A E NOT K' V'
    (distractors), ^ = in the demonstration (A^), + = the next token. Quote a pattern
    on the command line ('V->E'): unquoted, the shell reads > as a redirection.
    """
    from whitebox_eval.runs.distributed import launched_size

    mode = kw["mode"]
    if mode != "evaluate" and launched_size() > 1:
        raise WhiteboxError(f"gar --mode {mode} does not share its work among torchrun ranks (--mode evaluate "
                            "does): run it as one process")
    edits, edit_at = split_edit_at(kw["edits"], kw["edit_at"])
    if kw["elements"] != "all" and mode not in ("evaluate", "truth-heads"):
        raise WhiteboxError(f"--elements {kw['elements']} applies to --mode evaluate and truth-heads (the tasks' "
                            f"examples); --mode {mode} draws every element")
    if mode == "intervene" and not kw["heads"]:
        raise WhiteboxError("--mode intervene needs --heads LAYER.HEAD[,...]")
    if mode == "probe" and (not kw["heads"] or not kw["probe_data"]):
        raise WhiteboxError("--mode probe needs --heads LAYER.HEAD[,...] and --probe-data FILE")
    from whitebox_eval.gar.record import SUITE
    from whitebox_eval.lazy import resolve

    cfg = study_config(SUITE, kw, mode, edits=edits, edit_at=edit_at, dtype=resolved_dtype(kw["dtype"], kw["model"]),
                       batch_size=resolved_batch_size(kw["batch_size"], kw["model"], kw["dtype"]))
    folder = resolve(SUITE.mode(mode).run)(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
    if mode == "attribute":
        _print_attribution(folder)
    elif mode == "evaluate":
        if folder.shard in (None, 0):  # under torchrun, rank 0 reports the merged run
            _print_evaluation(folder)
    else:
        _print_heads(folder)


def _print_evaluation(folder) -> None:
    res = folder.load_results()
    click.echo(f"\nrun folder: {folder.path}")
    click.echo(f"examples: {res['n_examples']} in {res['n_tasks']} tasks")
    click.echo("the paper's rule (App. C: P(target) > 1/#choices) beside metrics that can move on small models:")
    for group, m in res.get("metrics", {}).items():
        _print_metrics(group, m)
    for rule in ("appc", "argmax"):
        r = res[rule]
        click.echo(f"\n[{rule}] overall {_pct(r['overall'])}   generation {_pct(r['by_form'].get('generation'))}"
                   f"   classification {_pct(r['by_form'].get('classification'))}   KR {_pct(r['kr'])}")
        for form, table in r["by_difficulty"].items():
            if table:
                click.echo(f"  {form:15s} " + "  ".join(f"{k} {_pct(v)}" for k, v in table.items()))
        click.echo("  syntactic       " + "  ".join(f"{k} {_pct(v)}" for k, v in r["by_syntactic_variation"].items()))
        gap = r["compositionality_gap"]
        click.echo(f"  compositionality gap {'n/a' if gap is None else f'{gap:.2f}'}")
    ea = res.get("error_analysis")
    if ea and ea.get("n_errors"):
        click.echo(f"\nApp. C error analysis, {ea.get('n_wrong', ea['n_errors'])} of {ea['n_generation']} generation "
                   f"examples whose top next token is not the target; off-format (no answer: whitespace, punctuation, "
                   f"a special token or an article) {ea.get('n_off_format', 0)}, in their own class; of the other "
                   f"{ea['n_errors']} errors: wrong candidate (class 2) "
                   f"{_ci(ea, 'share,class2_wrong_candidate')}, none of the candidates (class 1 or 3) "
                   f"{_ci(ea, 'share,class1or3_off_candidates')}; most frequent such tokens: "
                   + ", ".join(f"{t['token']!r} x{t['count']}" for t in ea.get("off_candidate_tokens", [])[:5]))
    click.echo(f"\nplots in {folder.path / 'plots'}")


def _print_attribution(folder) -> None:
    res = folder.load_results()
    click.echo(f"\nrun folder: {folder.path}")
    for task_id, t in res["tasks"].items():
        heads = ", ".join(f"{x['head'][0]}.{x['head'][1]}" for x in t["top_heads"][:5])
        dropped = len(t.get("skipped") or [])
        click.echo(f"  {task_id:60s} ({t['baseline']}, n={t['n_examples']}"
                   + (f", {dropped} examples left out: Yes/No partner of another token length" if dropped else "")
                   + f")  top: {heads}")
    shared = res["shared_heads"]
    click.echo("heads in the top lists of several tasks: "
               + (", ".join(f"{s['head'][0]}.{s['head'][1]} ({s['n_tasks']})" for s in shared[:10]) or "none"))
    click.echo(f"plots in {folder.path / 'plots'}")


def _ci(m: dict, key: str, pct: bool = True) -> str:
    """``value [lo, hi]`` of a stats key in ``m`` (percent for accuracies)."""
    from whitebox_eval.runs.estimates import describe

    return describe(m, key, ".1%" if pct else ".4f", n=False)


def _print_metrics(label: str, m: dict) -> None:
    click.echo(f"  {label:24s} paper's rule {_ci(m, 'acc,appc')}   argmax {_ci(m, 'acc,argmax')}   "
               f"P(target) {_ci(m, 'p_target', False)}   mass on choices {_ci(m, 'choice_mass', False)}"
               f"   (n={m.get('acc_n,appc', 0)})")


def _print_heads(folder) -> None:
    res = folder.load_results()
    click.echo(f"\nrun folder: {folder.path}")
    if "true_heads" in res:
        fmt = lambda hs: ", ".join(f"{l}.{h}" for l, h in hs) or "none"  # noqa: E731
        click.echo(f"True heads: {fmt(res['true_heads'])}   False heads: {fmt(res['false_heads'])}")
        split = res.get("split", {})
        if not res.get("heads_given"):
            sel = res.get("selection", {})
            click.echo(f"selected on {len(split.get('selection', []))} examples "
                       f"({sel.get('attribution_examples', 0)} in attribution, "
                       f"{sel.get('unequal_length_dropped', 0)} dropped: Yes/No partner of another token length); "
                       f"reported on {len(split.get('report', []))} other examples")
            for w in sel.get("warnings", []):
                click.echo(f"WARNING: {w}")
    if "edit_at" in res and res.get("interventions"):
        click.echo(f"edits at: {res['edit_positions']} (--edit-at {res['edit_at']})")
    inter = res.get("interventions", {})
    if inter:
        first = next(iter(inter.values()))
        _print_metrics("before", first["before"])
    first_keys = [k for k in ("true_false", "inverse_true_false") if k in inter]
    for k in first_keys + sorted(k for k in inter if k not in first_keys):
        v = inter[k]
        _print_metrics(k, v["after"])
        click.echo(f"  {'':24s} {v['effect']}")
    ctl = res.get("random_heads_control", {}).get("comparison")
    if ctl:
        d = ctl["delta_p_target"]
        r = d["random"]
        click.echo(f"  random heads (same count, layers {res['random_heads_control']['layer_band']}): "
                   f"change in P(target) {r['mean']:+.4f} ± {r['sd']:.4f} over {r['n']} draws "
                   f"(each: {', '.join(f'{x:+.4f}' for x in r['draws'])}) vs selected {d['selected']:+.4f}; "
                   f"flips {ctl['flips']['random']['mean']:.1f} vs {ctl['flips']['selected']}")
    for side, g in (res.get("matched_gap_fig4a") or {}).items():
        click.echo(f"  matched attention (fig. 4a, {'affirmative' if side == 'A' else 'negative'}): "
                   f"same,same {_ci(g, 'matched,easiest', False)}   other,other {_ci(g, 'matched,hardest', False)}"
                   + (f"   {g['verdict']}" if g.get("verdict") else ""))
    for k, v in res.get("probes", {}).items():
        click.echo(f"  probe {k:18s} {_ci(v, 'acc')}   majority baseline {_ci(v, 'acc,majority')}"
                   f"   (n={v['n']})")
        if v.get("verdict"):
            click.echo(f"  {'':24s} {v['verdict']}")
        rc = v.get("random_heads")
        if rc:
            click.echo(f"  {'':24s} random heads: {100 * rc['mean']:.1f}% ± {100 * rc['sd']:.1f} over {rc['n']} draws")
    click.echo(f"plots in {folder.path / 'plots'}")
