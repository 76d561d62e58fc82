"""The command-line options every study shares for its run folder."""

from __future__ import annotations

import click


def run_folder_options(f):
    """``--output``, ``--run-id`` and ``--resume`` (see :meth:`RunFolder.create`)."""
    for option in reversed([
        click.option("--output", default="runs", show_default=True, help="folder that receives the run folder"),
        click.option("--run-id", default=None, help="name of the run folder (default: time-suite-model-task)"),
        click.option("--resume", is_flag=True, help="continue the run folder --output/--run-id where it stopped"),
    ]):
        f = option(f)
    return f
