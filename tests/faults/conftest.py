"""Fixtures of the fault tests: the files of :mod:`cases`, built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cases import build_fixtures  # noqa: E402


@pytest.fixture(scope="session")
def fixtures(tmp_path_factory) -> Path:
    return build_fixtures(tmp_path_factory.mktemp("faults"))


@pytest.fixture
def cli(capsys):
    """Run ``whitebox-eval ARGS`` in this process; returns (exit code, stdout, stderr)."""
    from whitebox_eval.cli import main

    def run(args: list[str]) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return run
