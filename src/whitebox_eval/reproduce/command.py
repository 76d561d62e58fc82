"""``whitebox-eval reproduce PAPER``: the command (imported only when run; see ``cli.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from whitebox_eval.command_options import model_load_options
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.bundled import MODEL_SPEC_HELP
from whitebox_eval.reproduce.data import BENCHMARKS
from whitebox_eval.reproduce.launch import LAUNCHERS
from whitebox_eval.reproduce.spec import SCALES
from whitebox_eval.runs.run_ids import run_id_option

#: the exit status when the reproduction folder was written but some child runs failed (marked not run)
PARTLY_RUN = 3

SCALE_HELP = ("quick: minutes per paper per bundled model on a 2-core CPU (n chosen so each headline test "
              "can detect the paper's effect where the data allow; the report gives the smallest detectable "
              "effect); cpu: quick plus what a CPU can reach in about an hour per paper per model (the papers' "
              "own training experiments, more items where n limits); paper: the papers' sample sizes and shot counts (for a GPU); micro: a handful of "
              "items, to check the plumbing")


@click.command(name="reproduce", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("papers", nargs=-1)
@click.option("--model", "models", multiple=True, metavar="[PAPER=]MODEL",
              help="model to reproduce on (repeatable): MODEL for every paper, PAPER=MODEL (number or short "
                   "name) for one paper, which then ignores the plain ones; default: each paper's own models "
                   "(hub ids, named in its YAML) at --scale paper, both bundled models otherwise. "
                   + MODEL_SPEC_HELP)
@click.option("--models-root", default=None, metavar="DIR",
              help="local copies of hub models, for a machine without the hub: DIR/<org>--<name> (e.g. "
                   "DIR/meta-llama--Llama-2-7b-hf; DIR/<org>--<name>@<revision> for a checkpoint), or the "
                   "folder DIR/models.yaml maps the hub id to")
@click.option("--data", "data", multiple=True, metavar="NAME=PATH",
              help=f"a benchmark file or folder (repeatable): {', '.join(BENCHMARKS)}; the others are looked up "
                   "under --data-root")
@click.option("--data-root", default=None, metavar="DIR",
              help="folder laid out as ../shared/datasets (DIR/mmlu/test, DIR/hellaswag/<file>, ...); default "
                   "$WHITEBOX_EVAL_DATA, else ../shared/datasets when it exists")
@click.option("--scale", type=click.Choice(list(SCALES)), default="quick", show_default=True,
              help=SCALE_HELP)
@click.option("--output", default="runs", show_default=True, help="folder that receives the reproduction folder")
@click.option("--run-id", default=None, callback=run_id_option,
              help="name of the reproduction folder (default: reproduce-<papers>-<scale>)")
@click.option("--resume", is_flag=True, help="continue the reproduction folder --output/--run-id where it stopped")
@click.option("--plan-only", is_flag=True, help="print the plan (runs, items, estimated time) and stop")
@click.option("--allow-code-execution", is_flag=True,
              help="run the experiments scored by executing the model's code (001's HumanEval, cpu scale); without "
                   "it they are reported as not run")
@click.option("--reuse-only", is_flag=True,
              help="run nothing: write the report from the child runs already finished under --output (in any "
                   "reproduction folder there, e.g. per-paper or per-model calls run apart or on other machines); "
                   "the others are marked not run")
@click.option("--launcher", type=click.Choice(list(LAUNCHERS)), default="local", show_default=True,
              help="local: the children one after another in this process; slurm: each unfinished child a Slurm "
                   "job through submitit (pip install 'whitebox-eval[cluster]'), sized from its model, resumed "
                   "after preemption; see docs/cluster.md")
@click.option("--slurm-partition", default=None, metavar="NAME", help="the partition the jobs go to")
@click.option("--slurm-account", default=None, metavar="NAME", help="the account the jobs are charged to")
@click.option("--slurm-qos", default=None, metavar="NAME", help="the jobs' quality of service")
@click.option("--slurm-arg", "slurm_args", multiple=True, metavar="KEY=VALUE",
              help="any other parameter of submitit's SlurmExecutor (repeatable), e.g. constraint=h100")
@click.option("--slurm-max-jobs", type=int, default=None, metavar="N",
              help="at most N of this reproduction's jobs at once")
@click.option("--slurm-time-factor", type=float, default=3.0, show_default=True,
              help="each job's time limit: the plan's estimate x this, plus 15 minutes")
@click.option("--cache-root", default=None, metavar="DIR",
              help="with --launcher slurm: the cache the jobs share (trained weights, converted GGUFs), on the "
                   "shared file system; default OUTPUT/cache")
@click.option("--detach", is_flag=True,
              help="with --launcher slurm: return once the jobs are submitted; --resume --reuse-only assembles later")
@click.option("--status", "status_folder", default=None, metavar="FOLDER",
              help="print each child's Slurm job, state and time used of a reproduction folder, and stop")
@model_load_options(models_root=False)
def reproduce(papers, models, models_root, data, data_root, scale, output, run_id, resume, plan_only,
              allow_code_execution, reuse_only, launcher, slurm_partition, slurm_account, slurm_qos, slurm_args,
              slurm_max_jobs, slurm_time_factor, cache_root, detach, status_folder) -> None:
    """Reproduce the papers' tables and claims, published figures beside ours, a verdict per
    claim: PAPER is 000 wise-few, 001 mui, 002 gar, 003 attention-span, 004 first-token
    (number or name), all, or a paper file of your own (PATH.yaml, laid out as the bundled ones,
    its experiments on any registered suite).

    \b
    Prints the plan first (child runs, items, estimated time), runs each child as an
    ordinary resumable run folder (a child with the same settings is run once and reused,
    also across papers and across reproduction folders under --output), then writes
    reproduction.md, reproduction.html and claims.json: every table in the paper's layout
    with the published figure beside ours (value, 95% interval, n), and a verdict per claim
    and model (holds / not shown at this n / contradicted, with the test named).

    \b
    Before any work every data file is read to its end and each model's path and
    config.json are checked: data that cannot be read, or no model that can run, is one
    line (exit status 2); a model that cannot run beside others that can is a warning, its
    runs are marked not run and the others go on. Exit status 0: every child ran or was
    reused; 3: the folder was written but some children failed (marked not run, reasons
    in reproduction.md; --resume runs only those again).

    \b
      whitebox-eval reproduce 000
      whitebox-eval reproduce all --data-root ../shared/datasets
      whitebox-eval reproduce mui --model smollm2-135m --data gsm8k=gsm8k/test.jsonl --data mmlu=mmlu/test
      whitebox-eval --device cuda reproduce all --scale paper --data-root data/   # on a GPU
      whitebox-eval reproduce all --scale paper --plan-only     # models, data, GPU hours per paper
      whitebox-eval reproduce 003 --scale paper --models-root /models --model 002=lmsys/vicuna-7b-v1.3
      whitebox-eval reproduce all --scale paper --launcher slurm --slurm-partition gpu --detach
      whitebox-eval reproduce --status runs/reproduce-all-paper   # the Slurm jobs' states (docs/cluster.md)
    """
    import whitebox_eval.reproduce as rep
    from whitebox_eval.reproduce import prechecks

    if status_folder is not None:
        from whitebox_eval.reproduce.launch import status

        for line in status.lines(Path(status_folder), rep.PLAN_FILE):
            click.echo(line)
        return
    if not papers:
        raise click.UsageError("Missing argument 'PAPERS...'.")
    slurm = _slurm_options(launcher, slurm_partition, slurm_account, slurm_qos, slurm_args, slurm_max_jobs,
                           slurm_time_factor, cache_root, detach)
    if plan_only:
        plan = rep.prepare(papers, models, scale, data, data_root, models_root, allow_code_execution)
        for line in plan.lines():
            click.echo(line)
        if slurm is not None:
            from whitebox_eval.reproduce.launch.slurm import plan_lines

            for line in plan_lines(plan, slurm):
                click.echo(line)
        try:
            for line in prechecks.check(plan):
                click.echo(line, err=True)
        except WhiteboxError as exc:  # a plan is what was asked: what would stop the run is a note
            click.echo(f"note: the run would stop here: {exc}", err=True)
        return
    given = dict(models=models, scale=scale, data=data, data_root=data_root, output=output, run_id=run_id,
                 resume=resume, echo=lambda line: click.echo(line, err=True), models_root=models_root,
                 allow_code_execution=allow_code_execution)
    if slurm is not None and not reuse_only:  # each unfinished child a Slurm job
        from whitebox_eval.reproduce.launch.slurm import reproduce as on_slurm

        result = on_slurm(papers, slurm, **given)
    else:  # --reuse-only assembles here whichever launcher ran the children
        result = rep.run(papers, reuse_only=reuse_only, **given)
    if result is None:  # --detach: submitted
        return
    failed, done = _children(result)
    if failed and not done:
        first = " ".join(next(iter(failed.values())).split())  # a library's reason may hold line breaks
        raise WhiteboxError(f"no child run could run ({len(failed)} failed; the first: {first}); "
                            f"{result.folder / rep.MARKDOWN_FILE} lists them all: fix that and rerun with --resume")
    counts: dict[str, int] = {}
    for c in result.claims:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    click.echo(f"reproduction folder: {result.folder}")
    click.echo("verdicts: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())))
    click.echo(f"see {result.folder / rep.MARKDOWN_FILE} (and {rep.HTML_FILE}, {rep.CLAIMS_FILE})")
    if reuse_only:
        from whitebox_eval.reproduce.children import NOT_REUSED

        runs = _runs(result)
        missing = sum(r.get("reason") == NOT_REUSED for r in runs)
        if missing:
            click.echo(f"note: --reuse-only: {missing} of {len(runs)} child runs had no finished copy under "
                       f"{output} and are marked not run; run them without --reuse-only", err=True)
    if failed:
        click.echo(f"warning: {len(failed)} of {len(failed) + len(done)} child runs failed and are marked not run "
                   f"(reasons in {rep.MARKDOWN_FILE}); fix them and rerun with --resume to run only those", err=True)
        sys.exit(PARTLY_RUN)


def _slurm_options(launcher, partition, account, qos, args, max_jobs, time_factor, cache_root, detach):
    """The Slurm launcher's options (None with --launcher local, where the Slurm ones are refused)."""
    if launcher != "slurm":
        given = [name for name, value in (("--slurm-partition", partition), ("--slurm-account", account),
                                          ("--slurm-qos", qos), ("--slurm-arg", args), ("--slurm-max-jobs", max_jobs),
                                          ("--cache-root", cache_root), ("--detach", detach)) if value]
        if given or time_factor != 3.0:
            raise WhiteboxError(f"{', '.join(given or ['--slurm-time-factor'])}: only with --launcher slurm")
        return None
    from whitebox_eval.reproduce.launch.slurm import SlurmOptions, parse_args

    return SlurmOptions(partition, account, qos, parse_args(args), max_jobs, time_factor, cache_root, detach)


def _children(result) -> tuple[dict[str, str], set[str]]:
    """The child runs that failed (run id -> reason) and those done (run here or reused)."""
    runs = _runs(result)
    failed = {r["run"]: r.get("reason", "") for r in runs if r["status"] == "failed"}
    return failed, {r["run"] for r in runs if r["status"] == "done"}


def _runs(result) -> list[dict]:
    """Every paper's child runs as claims.json lists them (a child two papers share, twice)."""
    return [r for p in result.content["papers"] for r in p["runs"]]
