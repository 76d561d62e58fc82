"""Plots of the GAR suite: accuracy by difficulty (fig. 2b), True vs False head activation
(fig. 5b), attribution heat map (sec. 4) and interventions (figs. 4b, 5a)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from whitebox_eval.controls import Head
from whitebox_eval.runs.png import save_pyplot


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_accuracy_by_difficulty(by_form: Mapping[str, Mapping[str, float]], path: str | Path,
                                title: str = "", kr: float | None = None) -> Path:
    """Bars of accuracy per difficulty (``"n_r=0"``, ..., ``"n_r=2,negate"``) per form (fig. 2b)."""
    plt = _plt()
    keys = ["n_r=0", "n_r=1", "n_r=2", "n_r=0,negate", "n_r=1,negate", "n_r=2,negate"]
    labels = (["KR"] if kr is not None else []) + keys
    forms = list(by_form)
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(forms))
    for m, form in enumerate(forms):
        vals = ([kr if m == 0 else math.nan] if kr is not None else []) + [by_form[form].get(k, math.nan) for k in keys]
        xs = [i + m * width for i in range(len(labels))]
        ax.bar(xs, [0 if not math.isfinite(v) else v for v in vals], width, label=form)
    ax.set_xticks([i + width * (len(forms) - 1) / 2 for i in range(len(labels))])
    ax.set_xticklabels(labels, rotation=20)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy (App. C rule)")
    ax.set_title(title or "GAR accuracy by difficulty")
    ax.legend()
    return save_pyplot(fig, path, dpi=100)


def plot_true_false_scatter(true_act: np.ndarray, false_act: np.ndarray, labels: Sequence[str],
                            path: str | Path, title: str = "") -> Path:
    """Fig. 5b: one dot per statement at (mean True-head activation, mean False-head activation)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 5))
    lab = np.asarray(labels)
    for name, color in (("Yes", "tab:green"), ("No", "tab:red")):
        sel = lab == name
        ax.scatter(true_act[sel], false_act[sel], s=14, alpha=0.7, c=color,
                   label=f"{'true' if name == 'Yes' else 'false'} statements ({int(sel.sum())})")
    ax.set_xlabel("True heads: mean activation")
    ax.set_ylabel("False heads: mean activation")
    ax.set_title(title or "True vs False head activation")
    ax.legend(fontsize=8)
    return save_pyplot(fig, path, dpi=100)


def plot_head_heatmap(values: np.ndarray, path: str | Path, title: str, marks: Mapping[str, Sequence[Head]] = ()) -> Path:
    """[L, H] heat map with optional marked heads (e.g. True/False heads)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4, values.shape[1] * 0.5 + 2), max(4, values.shape[0] * 0.22 + 1)))
    lim = float(np.nanmax(np.abs(values))) or 1.0
    im = ax.imshow(values, aspect="auto", cmap="coolwarm", vmin=-lim, vmax=lim)
    fig.colorbar(im, ax=ax)
    for (name, heads), marker in zip(dict(marks).items(), ("o", "x", "s", "^")):
        if heads:
            ax.scatter([h for _, h in heads], [l for l, _ in heads], marker=marker, c="k", label=name)
    if marks:
        ax.legend(fontsize=8, loc="upper right")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=10)
    return save_pyplot(fig, path, dpi=100)


def plot_task_heads(values: np.ndarray, tasks: Sequence[str], heads: Sequence[Head], path: str | Path,
                    title: str = "") -> Path:
    """Tasks x heads map of |attribution| [T, L, H] at ``heads``, each task scaled to its
    largest head: which heads each task's circuit uses, and which it shares (sec. 4)."""
    plt = _plt()
    cols = np.abs(np.stack([values[:, l, h] for l, h in heads], axis=1)) if heads else np.zeros((len(tasks), 0))
    scale = np.abs(values).reshape(len(tasks), -1).max(1, keepdims=True)
    cols = cols / np.where(scale > 0, scale, 1.0)
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(heads) + 4), max(3, 0.3 * len(tasks) + 1.5)))
    im = ax.imshow(cols, aspect="auto", cmap="viridis", vmin=0, vmax=1)
    fig.colorbar(im, ax=ax, label="|attribution| / task max")
    ax.set_xticks(range(len(heads)))
    ax.set_xticklabels([f"{l}.{h}" for l, h in heads], rotation=90, fontsize=7)
    ax.set_yticks(range(len(tasks)))
    ax.set_yticklabels(tasks, fontsize=7)
    ax.set_xlabel("head (layer.head)")
    ax.set_title(title or "attribution per task", fontsize=10)
    return save_pyplot(fig, path, dpi=100)


def plot_interventions(results: Mapping[str, Mapping[str, float]], path: str | Path, title: str = "") -> Path:
    """Accuracy before / after each intervention (figs. 4b, 5a)."""
    plt = _plt()
    names = list(results)
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(names) + 2), 4))
    xs = np.arange(len(names))
    ax.bar(xs - 0.2, [results[n]["accuracy_before"] for n in names], 0.4, label="before")
    ax.bar(xs + 0.2, [results[n]["accuracy_after"] for n in names], 0.4, label="after")
    ax.set_xticks(xs)
    ax.set_xticklabels(names, rotation=15, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy (App. C rule)")
    ax.set_title(title or "interventions")
    ax.legend()
    return save_pyplot(fig, path, dpi=100)
