"""The command group starts without torch: --help of the group and of every command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from whitebox_eval.cli import LAZY_COMMANDS, cli

COMMANDS = ["", *LAZY_COMMANDS, "runs", "models", "inspect"]


def _sub_commands() -> list[list[str]]:
    """Every sub-command of a command group (``mui masking``, ...)."""
    import click

    out = []
    for name in COMMANDS[1:]:
        group = cli.get_command(click.Context(cli), name)
        if isinstance(group, click.Group):
            out += [[name, sub] for sub in group.list_commands(click.Context(group))]
    return out

PROBE = """
import sys
from whitebox_eval.cli import main
try:
    main({argv!r})
except SystemExit as e:
    assert e.code in (0, None), e.code
heavy = sorted(m for m in ("torch", "transformers", "matplotlib") if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
"""


@pytest.mark.parametrize("command", COMMANDS)
def test_help_imports_no_torch(command):
    argv = [command, "--help"] if command else ["--help"]
    out = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True, check=True)
    assert "Usage:" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "HEAVY=", f"{argv}: {out.stdout.splitlines()[-1]}"


@pytest.mark.parametrize("command", _sub_commands(), ids=" ".join)
def test_a_sub_command_help_imports_no_torch(command):
    out = subprocess.run([sys.executable, "-c", PROBE.format(argv=[*command, "--help"])], capture_output=True,
                         text=True, check=True)
    assert "Usage:" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "HEAVY=", f"{command}: {out.stdout.splitlines()[-1]}"


@pytest.mark.parametrize("name", list(LAZY_COMMANDS))
def test_lazy_listing_matches_the_command_help(name):
    """The group lists a lazy command with stored words: they must start its own help."""
    import click

    cmd = cli.get_command(click.Context(cli), name)
    stored = LAZY_COMMANDS[name][1].rstrip(".").split()
    assert " ".join(cmd.help.split()).startswith(" ".join(stored[:4])), name


@pytest.mark.parametrize("package", ["models", "span", "internals", "mui", "gar", "report", "sae", "formats"])
def test_lazy_exports_do_not_shadow_submodules(package):
    """Importing a submodule sets the package attribute of its name, which would hide a lazy
    export of the same name (``runs.progress`` the function vs the module): none may clash."""
    import importlib
    import pkgutil

    pkg = importlib.import_module(f"whitebox_eval.{package}")
    submodules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    assert not submodules & set(pkg.__all__)
    for name in pkg.__all__:
        assert getattr(pkg, name) is not None
