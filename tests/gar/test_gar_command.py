"""The ``gar`` click command: help text and user errors (no model is loaded)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.command import command


def test_help_teaches_every_mode():
    out = CliRunner().invoke(command, ["--help"]).output
    for text in ("--mode evaluate", "--mode truth-heads", "--mode intervene", "--mode probe",
                 "App. C", "compositionality gap", "--resume", "V->E"):
        assert text in out


@pytest.mark.parametrize("args, message", [
    (["--mode", "intervene"], "--heads"),
    (["--mode", "probe", "--heads", "1.2"], "--probe-data"),
    (["--tasks", "GendersOfPersons/same,KindsOfThings/kindOf"], "×N_KV"),
    (["--tasks", "classification", "--limit", "1"], "odd"),
])
def test_user_errors_say_what_to_fix(args, message, tmp_path):
    with pytest.raises(WhiteboxError, match=message):
        command.main(args + ["--output", str(tmp_path)], standalone_mode=False)
