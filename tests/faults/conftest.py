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
