"""The one PNG writer of the suites' charts: a matplotlib ``Figure`` drawn on the Agg canvas (no
pyplot state, safe in threads, never a window), parent folders created."""

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
