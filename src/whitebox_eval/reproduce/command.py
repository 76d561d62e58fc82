"""``whitebox-eval reproduce PAPER``: the command (imported only when run; see ``cli.py``)."""

from __future__ import annotations

import click

from whitebox_eval.models.bundled import MODEL_SPEC_HELP
from whitebox_eval.reproduce.data import BENCHMARKS

SCALE_HELP = ("quick: minutes per paper per bundled model on a 2-core CPU (n chosen so each headline test "
              "can detect the paper's effect where the data allow; the report gives the smallest detectable "
              "effect); paper: the papers' sample sizes and shot counts (for a GPU); micro: a handful of "
              "items, to check the plumbing")


@click.command(name="reproduce", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("papers", nargs=-1, required=True)
@click.option("--model", "models", multiple=True,
              help="model to reproduce on (repeatable; default both bundled models): " + MODEL_SPEC_HELP)
@click.option("--data", "data", multiple=True, metavar="NAME=PATH",
              help=f"a benchmark file or folder (repeatable): {', '.join(BENCHMARKS)}; the others are looked up "
                   "under --data-root")
@click.option("--data-root", default=None, metavar="DIR",
              help="folder laid out as ../shared/datasets (DIR/mmlu/test, DIR/hellaswag/<file>, ...); default "
                   "$WHITEBOX_EVAL_DATA, else ../shared/datasets when it exists")
@click.option("--scale", type=click.Choice(["quick", "paper", "micro"]), default="quick", show_default=True,
              help=SCALE_HELP)
@click.option("--output", default="runs", show_default=True, help="folder that receives the reproduction folder")
@click.option("--run-id", default=None, help="name of the reproduction folder (default: reproduce-<papers>-<scale>)")
@click.option("--resume", is_flag=True, help="continue the reproduction folder --output/--run-id where it stopped")
@click.option("--plan-only", is_flag=True, help="print the plan (runs, items, estimated time) and stop")
def reproduce(papers, models, data, data_root, scale, output, run_id, resume, plan_only) -> None:
    """Reproduce the papers' tables and claims, published figures beside ours, a verdict per
    claim: PAPER is 000 wise-few, 001 mui, 002 gar, 003 attention-span, 004 first-token
    (number or name), or all.

    \b
    Prints the plan first (child runs, items, estimated time), runs each child as an
    ordinary resumable run folder (a child with the same settings is run once and reused,
    also across papers and across reproduction folders under --output), then writes
    reproduction.md, reproduction.html and claims.json: every table in the paper's layout
    with the published figure beside ours (value, 95% interval, n), and a verdict per claim
    and model (holds / not shown at this n / contradicted, with the test named).

    \b
      whitebox-eval reproduce 000
      whitebox-eval reproduce all --data-root ../shared/datasets
      whitebox-eval reproduce mui --model smollm2-135m --data gsm8k=gsm8k/test.jsonl --data mmlu=mmlu/test
      whitebox-eval --device cuda reproduce all --scale paper --data-root data/   # on a GPU
    """
    import whitebox_eval.reproduce as rep

    if plan_only:
        plan = rep.prepare(papers, models, scale, data, data_root)
        for line in plan.lines():
            click.echo(line)
        return
    result = rep.run(papers, models=models, scale=scale, data=data, data_root=data_root, output=output,
                     run_id=run_id, resume=resume, echo=lambda line: click.echo(line, err=True))
    counts: dict[str, int] = {}
    for c in result.claims:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    click.echo(f"reproduction folder: {result.folder}")
    click.echo("verdicts: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())))
    click.echo(f"see {result.folder / rep.MARKDOWN_FILE} (and {rep.HTML_FILE}, {rep.CLAIMS_FILE})")
