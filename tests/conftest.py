"""Shared fixtures: locate the optional real-data samples (``../shared/datasets``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_datasets_dir() -> Path | None:
    """The folder of real-format benchmark samples, or None when this clone has none.

    ``WHITEBOX_SHARED_DATASETS`` overrides the default ``<repo>/../shared/datasets``.
    """
    env = os.environ.get("WHITEBOX_SHARED_DATASETS")
    candidate = Path(env) if env else REPO_ROOT.parent / "shared" / "datasets"
    return candidate if candidate.is_dir() else None


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """Path to the real-format samples; skips the test (with the reason) when absent."""
    path = shared_datasets_dir()
    if path is None:
        pytest.skip("real-format dataset samples not found: set WHITEBOX_SHARED_DATASETS "
                    "or place them at ../shared/datasets")
    return path
