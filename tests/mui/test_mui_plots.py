"""PNG figures for paper 001 (fig. 2-3 and fig. 11)."""

import numpy as np
import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.plots import MaskingCurve, plot_masking_curves, plot_utility_law

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_utility_law_png(tmp_path):
    p = np.array([11.9, 25.8, 58.7, 86.5, 84.5])
    path = plot_utility_law(p, -4.632 * np.log(p) + 28.305, tmp_path / "law.png",
                            labels=["vicuna", "llama2", "qwen1.5", "llama3.1", "qwen2.5"])
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000


def test_masking_curves_png(tmp_path):
    k = [0, 5, 10, 20]
    panels = {
        "masked: ARC key neurons": [
            MaskingCurve("ARC", k, [80, 60, 40, 20]), MaskingCurve("ARC (random)", k, [80, 79, 79, 78], random=True),
            MaskingCurve("GSM8K", k, [70, 50, 30, 10]),
        ],
        "masked: GSM8K key neurons": [MaskingCurve("GSM8K", k, [70, 40, 20, 5])],
    }
    path = plot_masking_curves(panels, tmp_path / "sub" / "mask.png", selected_k=14)
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_plot_errors(tmp_path):
    with pytest.raises(WhiteboxError, match="png"):
        plot_utility_law([1.0, 2.0], [3.0, 4.0], tmp_path / "law.svg")
    with pytest.raises(WhiteboxError, match="length"):
        plot_masking_curves({"x": [MaskingCurve("a", [1, 2], [1])]}, tmp_path / "m.png")
