"""PNG figures of AttentionSpan (paper 003): fig. 1 / fig. 3 heatmaps and fig. 2 curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from whitebox_eval.span.metrics import _numpy  # noqa: E402
from whitebox_eval.span.tokenization import TokenizedExample  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.runs.png import save_pyplot  # noqa: E402


def _printable(c: str) -> str:
    return {" ": "␣", "\n": "⏎"}.get(c, c)


def plot_attention_with_reference(attention, tokenized: TokenizedExample,
                                  path: str | Path, *, title: str = "",
                                  only_context: bool = True) -> Path:
    """Heatmap of an attention / rollout matrix with reference cells outlined (fig. 1, 3).

    Rows are the query rows that predict each target token, columns the key tokens
    (only the data point's own tokens when ``only_context``); each reference cell gets
    a red outline. ``attention`` is [seq, seq].
    """
    att = _numpy(attention).astype(np.float64)
    if att.shape != (tokenized.seq_len, tokenized.seq_len):
        raise WhiteboxError(f"attention must be [{tokenized.seq_len}, {tokenized.seq_len}];"
                            f" got {att.shape}")
    start = tokenized.context_start if only_context else 0
    rows = att[tokenized.prediction_positions, start:]
    mask = tokenized.reference_mask[:, start:]
    text = tokenized.example.text
    col_labels = [""] * rows.shape[1]
    for i, pos in enumerate(range(tokenized.context_start, tokenized.context_start + len(text))):
        if pos - start >= 0:
            col_labels[pos - start] = _printable(text[i])
    target = tokenized.example.target
    row_labels = [_printable(target[t]) if t < len(target) else "EOS"
                  for t in range(rows.shape[0])]

    fig, ax = plt.subplots(figsize=(max(4.0, 0.25 * rows.shape[1] + 2),
                                    max(3.0, 0.25 * rows.shape[0] + 1.5)))
    image = ax.imshow(rows, cmap="viridis", aspect="auto", interpolation="nearest")
    for t, j in zip(*np.nonzero(mask)):
        ax.add_patch(Rectangle((j - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="red",
                               linewidth=1.2))
    ax.set_xticks(range(len(col_labels)), col_labels, fontsize=7)
    ax.set_yticks(range(len(row_labels)), row_labels, fontsize=7)
    ax.set_xlabel("key token")
    ax.set_ylabel("predicted target token")
    ax.set_title(title or f"{tokenized.example.task}: attention vs reference mask")
    fig.colorbar(image, ax=ax, fraction=0.04)
    return save_pyplot(fig, path, dpi=120)


def plot_accuracy_vs_length(lengths: Sequence[float], accuracy: Mapping[str, Sequence[float]],
                            path: str | Path, *, title: str = "",
                            xlabel: str = "input length", ylabel: str = "accuracy") -> Path:
    """Accuracy against input length, one line per condition (fig. 2).

    ``accuracy`` maps a label (e.g. ``"no intervention"``, ``"reinforced"``) to one
    accuracy per length.
    """
    if not accuracy:
        raise WhiteboxError("give at least one accuracy curve")
    for label, values in accuracy.items():
        if len(values) != len(lengths):
            raise WhiteboxError(f"curve {label!r} has {len(values)} points for "
                                f"{len(lengths)} lengths")
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, values in accuracy.items():
        ax.plot(lengths, values, marker="o", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title or "accuracy vs input length")
    return save_pyplot(fig, path, dpi=120)
