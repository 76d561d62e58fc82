"""PNG figures for paper 001: the MUI-performance curve (fig. 2-3) and masking curves (fig. 11, 22-26)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.utility_law import UtilityLawFit, fit_utility_law
from whitebox_eval.runs.png import save_pyplot


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_utility_law(
    performance: Sequence[float] | np.ndarray,
    mui: Sequence[float] | np.ndarray,
    path: str | Path,
    *,
    labels: Sequence[str] | None = None,
    fit: UtilityLawFit | None = None,
    title: str = "MUI vs performance",
    performance_label: str = "Performance (%)",
    mui_label: str = "MUI (%)",
) -> Path:
    """Scatter of (performance, MUI) per model with the fitted ``MUI = A ln(P) + B`` curve (sec. 3.2).

    ``fit`` defaults to :func:`fit_utility_law` on the given points; pass one fitted on
    other data to overlay it.
    """
    _check_png(path)
    p = np.asarray(performance, dtype=float)
    m = np.asarray(mui, dtype=float)
    if p.shape != m.shape or p.size == 0:
        raise WhiteboxError("performance and mui must be non-empty and of the same length")
    if labels is not None and len(labels) != p.size:
        raise WhiteboxError(f"got {len(labels)} labels for {p.size} points")
    if fit is None and p.size >= 2:
        fit = fit_utility_law(p, m)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
    ax.scatter(p, m, zorder=3)
    if labels is not None:
        for x, y, text in zip(p, m, labels):
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    if fit is not None:
        lo, hi = max(p.min() * 0.9, 1e-6), p.max() * 1.05
        xs = np.linspace(lo, hi, 200)
        ax.plot(xs, fit.predict(xs), "--", color="gray",
                label=f"MUI = {fit.a:.3f} ln(P) + {fit.b:.3f}  "
                + (f"(R² = {fit.r2:.3f})" if fit.r2 is not None else f"({fit.n_points} points: no R²)"))
        ax.legend(fontsize=8)
    ax.set_xlabel(performance_label)
    ax.set_ylabel(mui_label)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return save_pyplot(fig, path, format="png")


@dataclass
class MaskingCurve:
    """Performance on one task as more neurons are masked (sec. 3.8).

    ``random`` marks the control that masks as many random neurons (drawn dashed).
    """

    label: str
    n_masked: Sequence[float]
    performance: Sequence[float]
    random: bool = False


def plot_masking_curves(
    panels: Mapping[str, Sequence[MaskingCurve]],
    path: str | Path,
    *,
    selected_k: float | None = None,
    x_label: str = "k (key neurons masked per layer)",
    y_label: str = "Performance (%)",
) -> Path:
    """One panel per key-neuron source (e.g. "masked: ARC key neurons"), each with the
    performance curves of tasks X and Y under key-neuron masking (solid) and random
    masking (dashed), as in fig. 11. ``selected_k`` draws the chosen threshold.
    """
    _check_png(path)
    if not panels:
        raise WhiteboxError("plot_masking_curves needs at least one panel")
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), dpi=100, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (title, curves) in zip(axes[0], panels.items()):
        color_of: dict[str, str] = {}
        for curve in curves:
            if len(curve.n_masked) != len(curve.performance):
                raise WhiteboxError(f"curve {curve.label!r}: n_masked and performance differ in length")
            base = curve.label.removesuffix(" (random)")
            color = color_of.setdefault(base, colors[len(color_of) % len(colors)])
            ax.plot(curve.n_masked, curve.performance, "--" if curve.random else "-o", color=color,
                    label=curve.label, markersize=3)
        if selected_k is not None:
            ax.axvline(selected_k, color="green", alpha=0.5, linewidth=1)
        ax.set_title(title)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_pyplot(fig, path, format="png")


def plot_layer_utilization(layer_mui: Sequence[float] | np.ndarray, path: str | Path, *, title: str = "Utilization per layer") -> Path:
    """Bar chart of the share of each layer's units in the dataset's key-set union (a per-layer MUI breakdown)."""
    _check_png(path)
    v = 100 * np.asarray(layer_mui, dtype=float)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5), dpi=100)
    ax.bar(np.arange(v.size), v)
    ax.set_xlabel("layer")
    ax.set_ylabel("activated units (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    return save_pyplot(fig, path, format="png")


def plot_directions(
    moves: Mapping[str, tuple[tuple[float, float], tuple[float, float], str]], path: str | Path,
    *, title: str = "Before -> after, per task",
) -> Path:
    """Arrows from (P, MUI) before to after for each task, labelled with the direction (sec. 3.3, fig. 4-5, 8)."""
    _check_png(path)
    if not moves:
        raise WhiteboxError("plot_directions needs at least one task")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, (task, (before, after, direction)) in enumerate(moves.items()):
        c = colors[n % len(colors)]
        ax.scatter([before[0]], [before[1]], color=c, marker="o")
        ax.annotate("", xy=after, xytext=before, arrowprops={"arrowstyle": "->", "color": c})
        ax.scatter([after[0]], [after[1]], color=c, marker="s", label=f"{task}: {direction}")
    ax.set_xlabel("Performance (%)")
    ax.set_ylabel("MUI (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_pyplot(fig, path, format="png")


def _check_png(path: str | Path) -> None:
    if Path(path).suffix.lower() != ".png":
        raise WhiteboxError(f"plots are written as PNG; give a path ending in .png, got {Path(path).name!r}")
