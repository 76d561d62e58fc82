"""Fixtures for the GAR tests: the full dataset, generated once per session."""

from __future__ import annotations

import pytest

from whitebox_eval.gar.generator import generate_gar


@pytest.fixture(scope="session")
def gar_examples():
    return generate_gar(seed=0)
