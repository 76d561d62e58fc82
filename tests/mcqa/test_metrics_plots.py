"""PNG writers of the MCQA suite: each creates a valid, non-empty PNG file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.formats import plots as formats_plots
from whitebox_eval.mcqa import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _assert_png(path: Path) -> None:
    assert path.is_file()
    data = path.read_bytes()
    assert len(data) > 0
    assert data[:8] == PNG_MAGIC


def test_head_accuracy_heatmap(tmp_path):
    table = np.random.default_rng(0).uniform(size=(6, 8))
    out = plots.plot_head_accuracy_heatmap(table, tmp_path / "nested" / "heads.png")
    assert out == tmp_path / "nested" / "heads.png"
    _assert_png(out)


def test_accuracy_vs_options(tmp_path):
    out = plots.plot_accuracy_vs_options(
        [2, 4, 8], {"baseline": [0.6, 0.3, 0.1], "QK (14, 24)": [0.99, 0.97, 0.95]}, tmp_path / "opts.png"
    )
    _assert_png(out)
    with pytest.raises(WhiteboxError, match="accuracies for 3 option counts"):
        plots.plot_accuracy_vs_options([2, 4, 8], {"bad": [0.5]}, tmp_path / "bad.png")


def test_prediction_distribution(tmp_path):
    out = plots.plot_prediction_distribution(
        {"baseline": [0.7, 0.1, 0.1, 0.1], "QK": [0.25, 0.25, 0.3, 0.2]}, tmp_path / "dist.png"
    )
    _assert_png(out)


def test_alignment_chart(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.uniform(size=50)
    y = np.clip(x + rng.normal(scale=0.1, size=50), 0, 1)
    _assert_png(formats_plots.plot_alignment(x, y, tmp_path / "align.png", n_bins=5))


def test_logit_lens_accuracy(tmp_path):
    _assert_png(plots.plot_logit_lens_accuracy([0.2, 0.3, 0.6, 0.5], tmp_path / "lens.png", baseline=0.4))
    _assert_png(
        plots.plot_logit_lens_accuracy({"0-shot": [0.1, 0.2], "5-shot": [0.3, 0.6]}, tmp_path / "lens2.png")
    )


def test_non_png_path_is_rejected(tmp_path):
    with pytest.raises(WhiteboxError, match=r"\.png"):
        plots.plot_head_accuracy_heatmap(np.ones((2, 2)), tmp_path / "heads.jpg")
