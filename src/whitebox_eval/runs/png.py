"""The suites' chart writers: a matplotlib ``Figure`` drawn on the Agg canvas (no pyplot state,
safe in threads, never a window), and a pyplot figure laid out, written and closed; parent
folders created."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from whitebox_eval.errors import WhiteboxError


def save_png(fig: Figure, path: str | Path, *, dpi: int = 110) -> Path:
    """Write ``fig`` to ``path`` (which must end in .png) at ``dpi``, cropped to its contents."""
    out = Path(path)
    if out.suffix.lower() != ".png":
        raise WhiteboxError(f"plot paths must end in .png; got {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(out, format="png", dpi=dpi, bbox_inches="tight")
    return out


def save_pyplot(fig, path: str | Path, *, dpi: float | None = None, format: str | None = None) -> Path:
    """Write a pyplot figure to ``path`` laid out tight (``dpi`` None: matplotlib's default) and close
    it (pyplot keeps every figure it made open until then)."""
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=dpi, format=format)
    plt.close(fig)
    return out
