"""The ``whitebox-eval gar`` command (paper 002): evaluate, find True/False heads, intervene, probe."""

from __future__ import annotations

import math

import click

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.options import run_folder_options

from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP
MODES = ("evaluate", "attribute", "truth-heads", "intervene", "probe")


def _pct(v) -> str:
    return "   n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:5.1f}%"


@click.command(name="gar", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--mode", type=click.Choice(MODES), default="evaluate", show_default=True,
              help="what to run (see above)")
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@click.option("--tasks", default=None,
              help="all | generation | classification | kr | truth | ID[,ID...] (ids as in the paper, "
                   "e.g. 'GendersOfPersons/same,KindsOfThings/kindOf×3 [negate](swapKV)'; x for ×). "
                   "Default: all (evaluate), truth (attribute, truth-heads, intervene)")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="examples per task (first N of the 8 / 16; even for g2c)")
@click.option("--no-kr", is_flag=True, help="evaluate: leave out the knowledge-recall sub-problems")
@click.option("--rule", type=click.Choice(["chance", "mean"]), default="chance", show_default=True,
              help="App. C threshold: 1/#alternatives, or the alternatives' mean probability")
@click.option("--heads", default=None, help="intervene/probe: heads as LAYER.HEAD[,LAYER.HEAD...] (e.g. 14.18,14.46)")
@click.option("--true-heads", default=None, help="truth-heads: use these True heads instead of finding them")
@click.option("--false-heads", default=None, help="truth-heads: use these False heads instead of finding them")
@click.option("--pattern", default=None,
              help="attention pattern KEY->QUERY (QUERY attends to KEY): V->E, Q->E, A^->E, Q->A, ... "
                   "Default: Q->A (truth-heads), V->E (intervene)")
@click.option("--steps", type=click.IntRange(min=1), default=5, show_default=True, help="attribute/truth-heads: integrated-gradients steps")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="attribute: heads kept per task")
@click.option("--candidates", type=click.IntRange(min=1), default=10, show_default=True, help="truth-heads: top-|attribution| heads to split")
@click.option("--n-true", type=click.IntRange(min=0), default=2, show_default=True, help="truth-heads: how many True heads to keep")
@click.option("--n-false", type=click.IntRange(min=0), default=2, show_default=True, help="truth-heads: how many False heads to keep")
@click.option("--probe-data", multiple=True,
              help="truth-heads/probe: SNLI .jsonl or Geometry of Truth .csv (repeatable)")
@click.option("--probe-limit", type=click.IntRange(min=1), default=None, help="statements sampled from each probe file")
@click.option("--folds", type=click.IntRange(min=2), default=5, show_default=True, help="probe: cross-validation folds")
@click.option("--on-bad-row", type=click.Choice(["error", "skip"]), default="skip", show_default=True, help="truth-heads/probe: what to do with malformed rows of a --probe-data file")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@run_folder_options
def command(**kw) -> None:
    """GAR: compositional relational reasoning, its evaluation and its heads (paper 002).

    \b
    --mode evaluate (default): score every example of --tasks from one forward pass
      per batch: the first-token probability of the target vs its alternatives at
      the last position (App. C: correct when above 1/3 for generation, 1/2 for Yes/No;
      argmax accuracy too). results.json: accuracy by form, by difficulty (n_r x
      negate), by syntactic variation, on knowledge-recall sub-problems, and the
      compositionality gap (sub-problem accuracy / n_r=2 accuracy).
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
    --mode truth-heads: on classification tasks (default: the three of sec. 5), rank
      heads by EAP-IG attribution (KL metric; the Yes/No partner is the corrupted
      input), split the top --candidates into True heads (more active at the stated
      answer A on true statements) and False heads, then score the True/False
      intervention (Yes: force Q->A on True heads and knock out False heads; No: the
      reverse), its inverse, and strong / weak / knock-out interventions on all of
      them; with --probe-data, the App. E truth probe on their activations.
        whitebox-eval gar --mode truth-heads --limit 8 \\
            --probe-data ../shared/datasets/geometry_of_truth/cities.csv
    \b
    --mode intervene: strong (force --pattern), weak (copy the best-matching other
      head's row) and knock-out interventions on --heads; accuracy before/after and
      the heads' matched attention weight on the pattern.
        whitebox-eval gar --mode intervene --tasks generation --limit 2 --heads 20.3 --pattern V->E
    \b
    --mode probe: App. E MLP probe (Linear-ReLU-Linear, Adam, 30 epochs, k-fold CV)
      on --heads' activations over the statement tokens, against chance.
        whitebox-eval gar --mode probe --heads 14.1,15.2 --probe-data cities.csv

    Patterns are KEY->QUERY: 'V->E' = END attends to V. Roles: Q K V A E NOT K' V'
    (distractors), ^ = in the demonstration (A^), + = the next token.
    """
    from whitebox_eval.gar import study
    from whitebox_eval.runs.distributed import launched_size

    mode = kw["mode"]
    if mode != "evaluate" and launched_size() > 1:
        raise WhiteboxError(f"gar --mode {mode} does not share its work among torchrun ranks (--mode evaluate "
                            "does): run it as one process")
    if mode == "attribute":
        cfg = study.GARAttributeConfig(model=kw["model"], tasks=kw["tasks"] or "truth", limit=kw["limit"],
                                       steps=kw["steps"], top=kw["top"], seed=kw["seed"], batch_size=kw["batch_size"])
        _print_attribution(study.run_gar_attribute(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"]))
    elif mode == "evaluate":
        cfg = study.GARConfig(model=kw["model"], tasks=kw["tasks"] or "all", limit=kw["limit"],
                              include_kr=not kw["no_kr"], rule=kw["rule"], seed=kw["seed"],
                              batch_size=kw["batch_size"])
        folder = study.run_gar(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
        if folder.shard in (None, 0):  # under torchrun, rank 0 reports the merged run
            _print_evaluation(folder)
    elif mode == "truth-heads":
        cfg = study.GARHeadsConfig(
            model=kw["model"], tasks=kw["tasks"] or "truth", limit=kw["limit"], seed=kw["seed"],
            steps=kw["steps"], n_candidates=kw["candidates"], n_true=kw["n_true"], n_false=kw["n_false"],
            true_heads=kw["true_heads"], false_heads=kw["false_heads"], pattern=kw["pattern"] or "Q->A",
            probe_data=tuple(kw["probe_data"]), probe_limit=kw["probe_limit"], probe_folds=kw["folds"],
            on_bad_row=kw["on_bad_row"], rule=kw["rule"], batch_size=kw["batch_size"])
        folder = study.run_gar_heads(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
        _print_heads(folder)
    elif mode == "intervene":
        if not kw["heads"]:
            raise WhiteboxError("--mode intervene needs --heads LAYER.HEAD[,...]")
        cfg = study.GARInterveneConfig(model=kw["model"], tasks=kw["tasks"] or "truth", limit=kw["limit"],
                                       heads=kw["heads"], pattern=kw["pattern"] or "V->E", rule=kw["rule"],
                                       seed=kw["seed"], batch_size=kw["batch_size"])
        folder = study.run_gar_intervene(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
        _print_heads(folder)
    else:
        if not kw["heads"] or not kw["probe_data"]:
            raise WhiteboxError("--mode probe needs --heads LAYER.HEAD[,...] and --probe-data FILE")
        cfg = study.GARProbeConfig(model=kw["model"], heads=kw["heads"], probe_data=tuple(kw["probe_data"]),
                                   probe_limit=kw["probe_limit"], probe_folds=kw["folds"], seed=kw["seed"], on_bad_row=kw["on_bad_row"],
                                   batch_size=kw["batch_size"])
        folder = study.run_gar_probe(cfg, kw["output"], run_id=kw["run_id"], resume=kw["resume"])
        _print_heads(folder)


def _print_evaluation(folder) -> None:
    res = folder.load_results()
    click.echo(f"\nrun folder: {folder.path}")
    click.echo(f"examples: {res['n_examples']} in {res['n_tasks']} tasks")
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
    click.echo(f"\nplots in {folder.path / 'plots'}")


def _print_attribution(folder) -> None:
    res = folder.load_results()
    click.echo(f"\nrun folder: {folder.path}")
    for task_id, t in res["tasks"].items():
        heads = ", ".join(f"{x['head'][0]}.{x['head'][1]}" for x in t["top_heads"][:5])
        click.echo(f"  {task_id:60s} ({t['baseline']}, n={t['n_examples']})  top: {heads}")
    shared = res["shared_heads"]
    click.echo("heads in the top lists of several tasks: "
               + (", ".join(f"{s['head'][0]}.{s['head'][1]} ({s['n_tasks']})" for s in shared[:10]) or "none"))
    click.echo(f"plots in {folder.path / 'plots'}")


def _print_heads(folder) -> None:
    res = folder.load_results()
    click.echo(f"\nrun folder: {folder.path}")
    if "true_heads" in res:
        fmt = lambda hs: ", ".join(f"{l}.{h}" for l, h in hs) or "none"  # noqa: E731
        click.echo(f"True heads: {fmt(res['true_heads'])}   False heads: {fmt(res['false_heads'])}")
    for k, v in res.get("interventions", {}).items():
        click.echo(f"  {k:24s} accuracy {_pct(v['accuracy_before'])} -> {_pct(v['accuracy_after'])}"
                   f"   argmax {_pct(v['argmax_before'])} -> {_pct(v['argmax_after'])}"
                   f"   P(target) {v['mean_target_prob_before']:.4f} -> {v['mean_target_prob_after']:.4f}"
                   f"   changed {v['predictions_changed']}/{v['n']}")
    for k, v in res.get("probes", {}).items():
        click.echo(f"  probe {k:18s} {_pct(v['accuracy_mean'])} ± {100 * v['accuracy_std']:.1f}"
                   f"   (chance {_pct(v['chance_majority'])}, n={v['n']})")
    click.echo(f"plots in {folder.path / 'plots'}")
