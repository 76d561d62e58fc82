"""Paper 004's figures: the alignment chart of one run (Fig. 5) and alignment error against
MCQ performance across runs (Fig. 6)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.formats.metrics import DEFAULT_ALIGNMENT_BINS, expected_alignment_error
from whitebox_eval.runs.png import save_png


def plot_alignment(
    mcq_p_correct: np.ndarray | Sequence[float],
    free_p_correct: np.ndarray | Sequence[float],
    path: str | Path,
    n_bins: int = DEFAULT_ALIGNMENT_BINS,
    title: str = "MCQ vs free-generation alignment",
) -> Path:
    """Alignment chart of 004 Fig. 5: per-question points, equal-count bin means and the diagonal.

    The title carries the expected alignment error (004 eq. 1) over the same bins.
    """
    x = np.asarray(mcq_p_correct, dtype=np.float64)
    y = np.asarray(free_p_correct, dtype=np.float64)
    result = expected_alignment_error(x, y, n_bins)
    fig = Figure(figsize=(5, 5))
    ax = fig.add_subplot()
    ax.scatter(x, y, s=8, alpha=0.25, color="tab:blue", label="questions")
    ax.plot(result.bin_x, result.bin_y, marker="o", color="tab:orange", label=f"{n_bins} equal-count bins")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect alignment")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("first-token P(correct) (MCQ)")
    ax.set_ylabel("fraction of correct generations")
    ax.set_title(f"{title}\nexpected alignment error = {result.error:.3f}")
    ax.legend(fontsize="small", loc="upper left")
    return save_png(fig, path)


def plot_alignment_vs_mcq(rows: Sequence[Mapping], path: str | Path,
                          title: str = "Alignment error vs MCQ performance") -> Path:
    """004 Fig. 6: one point per run (model), MCQ P(correct) vs expected alignment error,
    each with its 95% interval; ``rows`` as :func:`whitebox_eval.formats.over_runs.compare_runs` gives them."""
    if not rows:
        raise WhiteboxError("need at least one run to plot")
    fig = Figure(figsize=(5, 4))
    ax = fig.add_subplot()
    for r in rows:
        x, y = r["p_correct,renorm"], r["alignment_error,mcq~free"]
        (xl, xh), (yl, yh) = r["p_correct_ci,renorm"], r["alignment_error_ci,mcq~free"]
        ax.errorbar([x], [y], xerr=[[x - xl], [xh - x]], yerr=[[y - yl], [yh - y]], fmt="o", capsize=3)
        ax.annotate(str(r["model"]), (x, y), textcoords="offset points", xytext=(4, 4), fontsize="small")
    ax.set_xlabel("average MCQ P(correct)")
    ax.set_ylabel("expected alignment error")
    ax.set_title(title)
    return save_png(fig, path)
