"""PNG figures: attention heatmap with outlined reference cells, accuracy vs length."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.image import imread

from whitebox_eval.span.plots import plot_accuracy_vs_length, plot_attention_with_reference
from whitebox_eval.span.examples import string_reversal_example
from whitebox_eval.span.tokenization import tokenize_example
from whitebox_eval.errors import WhiteboxError


def _red_pixels(path) -> int:
    img = imread(path)[..., :3]
    return int(((img[..., 0] > 0.8) & (img[..., 1] < 0.3) & (img[..., 2] < 0.3)).sum())


def test_heatmap_png_outlines_reference_cells(tmp_path, char_tokenizer):
    tok = tokenize_example(string_reversal_example("abcd"), char_tokenizer, instruction="x y")
    att = np.tril(np.ones((tok.seq_len, tok.seq_len)))
    att /= att.sum(axis=1, keepdims=True)
    out = plot_attention_with_reference(att, tok, tmp_path / "heat.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the outlines are the only red in the figure: removing the references removes them
    tok.reference_mask[:] = False
    bare = plot_attention_with_reference(att, tok, tmp_path / "bare.png")
    assert _red_pixels(out) > 50 and _red_pixels(bare) == 0
    with pytest.raises(WhiteboxError, match="attention must be"):
        plot_attention_with_reference(att[:3, :3], tok, tmp_path / "bad.png")


def test_accuracy_vs_length_png(tmp_path):
    out = plot_accuracy_vs_length([10, 20, 30], {"no intervention": [0.9, 0.4, 0.1],
                                                 "reinforced": [0.95, 0.9, 0.85]},
                                  tmp_path / "sub" / "acc.png")
    assert out.exists() and out.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(WhiteboxError, match="points"):
        plot_accuracy_vs_length([10, 20], {"a": [0.1]}, tmp_path / "x.png")
