"""PNG charts for the MCQA suite (paper 000), drawn with matplotlib's Agg canvas.

Each function takes arrays and an output path, writes one PNG (creating parent
folders) and returns the path. No pyplot state is touched, so these are safe in
threads and never open a window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mcqa.head_scores import Head, best_head
from whitebox_eval.runs.png import save_png

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def plot_head_accuracy_heatmap(
    table: np.ndarray,
    path: str | Path,
    best: Head | None = None,
    title: str = "Per-head accuracy",
) -> Path:
    """Layer x head accuracy heatmap (000 Fig. 5a, 29, 30) with the best head framed.

    ``best`` defaults to the highest cell (ties: lower layer, then lower head).
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2 or t.size == 0:
        raise WhiteboxError(f"table must be a non-empty [layers, heads] array; got {t.shape}")
    layer, head = best if best is not None else best_head(t)
    fig = Figure(figsize=(max(4.0, 0.25 * t.shape[1] + 2), max(3.0, 0.2 * t.shape[0] + 1.5)))
    ax = fig.add_subplot()
    im = ax.imshow(t, aspect="auto", origin="lower", cmap="viridis", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="accuracy")
    ax.add_patch(
        Rectangle(
            (head - 0.5, layer - 0.5), 1.0, 1.0, fill=False, edgecolor="red", linewidth=2.0,
            label=f"best ({layer}, {head}): {t[layer, head]:.3f}",
        )
    )
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize="small", frameon=False)
    return save_png(fig, path)


def plot_accuracy_vs_options(
    n_options: Sequence[int],
    accuracies: Mapping[str, Sequence[float]],
    path: str | Path,
    show_chance: bool = True,
    title: str = "Accuracy vs number of options",
) -> Path:
    """Accuracy against the number of options, one line per method/head (000 Fig. 5b, 24)."""
    xs = np.asarray(n_options, dtype=np.float64)
    if xs.ndim != 1 or xs.size == 0 or not accuracies:
        raise WhiteboxError("need a non-empty list of option counts and at least one method")
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for name, acc in accuracies.items():
        ys = np.asarray(acc, dtype=np.float64)
        if ys.shape != xs.shape:
            raise WhiteboxError(f"method {name!r} has {ys.size} accuracies for {xs.size} option counts")
        ax.plot(xs, ys, marker="o", label=name)
    if show_chance:
        ax.plot(xs, 1.0 / xs, linestyle=":", color="grey", label="chance (1/n)")
    ax.set_xlabel("number of options")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize="small")
    return save_png(fig, path)


def plot_prediction_distribution(
    distributions: Mapping[str, Sequence[float]],
    path: str | Path,
    letters: Sequence[str] | None = None,
    title: str = "Prediction distribution over letters",
) -> Path:
    """Grouped bars: share of predictions per letter for each method (000 App. J, Fig. 28)."""
    if not distributions:
        raise WhiteboxError("need at least one method's prediction distribution")
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in distributions.items()}
    sizes = {a.shape for a in arrays.values()}
    if len(sizes) != 1 or len(next(iter(sizes))) != 1:
        raise WhiteboxError("all prediction distributions must be 1-D with one value per letter")
    n = next(iter(sizes))[0]
    labels = list(letters) if letters is not None else list(LETTERS[:n])
    if len(labels) != n:
        raise WhiteboxError(f"got {len(labels)} letters for {n} options")
    fig = Figure(figsize=(max(5.0, 0.6 * n * len(arrays) / 2 + 3), 4))
    ax = fig.add_subplot()
    width = 0.8 / len(arrays)
    base = np.arange(n)
    for i, (name, arr) in enumerate(arrays.items()):
        ax.bar(base + (i - (len(arrays) - 1) / 2) * width, arr, width=width, label=name)
    ax.axhline(1.0 / n, color="grey", linestyle=":", label="uniform")
    ax.set_xticks(base, labels)
    ax.set_ylabel("share of predictions")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return save_png(fig, path)


def plot_logit_lens_accuracy(
    accuracy_per_layer: Mapping[str, Sequence[float]] | Sequence[float],
    path: str | Path,
    baseline: float | None = None,
    title: str = "Logit-lens accuracy per layer",
) -> Path:
    """Accuracy per layer (000 App. F, Fig. 12); several named curves allowed.

    ``baseline`` draws the final-output accuracy as a horizontal line.
    """
    curves = (
        dict(accuracy_per_layer)
        if isinstance(accuracy_per_layer, Mapping)
        else {"logit lens": accuracy_per_layer}
    )
    if not curves:
        raise WhiteboxError("need at least one accuracy curve")
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for name, acc in curves.items():
        ys = np.asarray(acc, dtype=np.float64)
        if ys.ndim != 1 or ys.size == 0:
            raise WhiteboxError(f"curve {name!r} must be a non-empty 1-D array of per-layer accuracies")
        ax.plot(np.arange(ys.size), ys, marker=".", label=name)
    if baseline is not None:
        ax.axhline(baseline, color="grey", linestyle="--", label="model output")
    ax.set_xlabel("layer")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize="small")
    return save_png(fig, path)
