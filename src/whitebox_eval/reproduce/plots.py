"""The reproduction's figures as inline SVG (no script, no fetch: the report's CSP holds).

Each figure is an ``<svg data-plot="NAME">`` built from claims.json's content alone, with
every text escaped (:mod:`whitebox_eval.report.markup`):

- ``forest-<paper>``: per claim and model, our effect with its 95% interval beside the
  published effect, coloured by verdict (pp claims share one axis; a claim in its own units
  gets its own, marked);
- ``heatmap-000-<model>-<experiment>``: QK-score accuracy of every head (all items), the
  chosen head outlined;
- ``recall-000-<model>-<claim>``: the chosen head's and the baseline's recall per gold
  letter, beside each letter's share of the gold answers (the constant-letter control);
- ``utility-law``: 001's points, our fit and the paper's line (sec. 3.2, Fig. 3);
- ``interventions-002-<model>``: accuracy before, after the edit on the chosen heads, and
  after the same edit on each random head set.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from whitebox_eval.report.markup import Markup, join, render

COLOURS = {"holds": "#2a7d2a", "contradicted": "#b22222", "not shown at this n": "#888888",
           "uninformative": "#d08a00", "not run": "#cccccc", "not tested": "#cccccc"}
PUBLISHED = "#1f4e9c"


def slug(name: str) -> str:
    """A ``data-plot`` name: letters, digits, ``.`` and ``-`` only (a model given by path has slashes)."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def _svg(name: str, width: int, height: int, body: Markup, title: str) -> Markup:
    name = slug(name)
    return render('<figure><svg data-plot="{name}" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
                  'viewBox="0 0 {w} {h}" role="img"><title>{title}</title>{body}</svg>'
                  '<figcaption>{title}</figcaption></figure>\n', name=name, w=width, h=height, title=title, body=body)


def _text(x: float, y: float, s: Any, anchor: str = "start", size: int = 11, fill: str = "#222") -> Markup:
    return render('<text x="{x}" y="{y}" font-size="{size}" text-anchor="{a}" fill="{fill}">{s}</text>',
                  x=f"{x:.1f}", y=f"{y:.1f}", size=size, a=anchor, fill=fill, s=s)


def _line(x1: float, y1: float, x2: float, y2: float, stroke: str = "#222", width: float = 1, dash: str = "") -> Markup:
    return render('<line x1="{a}" y1="{b}" x2="{c}" y2="{d}" stroke="{s}" stroke-width="{w}" stroke-dasharray="{dash}"/>',
                  a=f"{x1:.1f}", b=f"{y1:.1f}", c=f"{x2:.1f}", d=f"{y2:.1f}", s=stroke, w=width, dash=dash)


def _rect(x: float, y: float, w: float, h: float, fill: str, stroke: str = "none", tip: str = "") -> Markup:
    return render('<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{f}" stroke="{s}"><title>{t}</title></rect>',
                  x=f"{x:.1f}", y=f"{y:.1f}", w=f"{max(w, 0):.1f}", h=f"{max(h, 0):.1f}", f=fill, s=stroke, t=tip)


def _circle(x: float, y: float, r: float, fill: str, tip: str = "", shape: str = "circle") -> Markup:
    if shape == "diamond":
        pts = f"{x:.1f},{y - r:.1f} {x + r:.1f},{y:.1f} {x:.1f},{y + r:.1f} {x - r:.1f},{y:.1f}"
        return render('<polygon points="{p}" fill="{f}"><title>{t}</title></polygon>', p=pts, f=fill, t=tip)
    return render('<circle cx="{x}" cy="{y}" r="{r}" fill="{f}"><title>{t}</title></circle>',
                  x=f"{x:.1f}", y=f"{y:.1f}", r=r, f=fill, t=tip)


# ------------------------------------------------------------------------ forest


def _scale(c: Mapping[str, Any]) -> float:
    return 100.0 if c.get("effect_unit", "pp") == "pp" else 1.0


def forest(paper: Mapping[str, Any]) -> Markup | None:
    rows = [c for c in paper["claims"] if c.get("statistic")]
    if not rows:
        return None
    pp = [c for c in rows if c.get("effect_unit", "pp") == "pp"]
    shared = [0.0]
    for c in pp:
        s, pub = c["statistic"], (c.get("published") or {}).get("effect")
        shared += [100 * (s["lo"] - c["than"]), 100 * (s["hi"] - c["than"])]
        if isinstance(pub, int | float):
            shared.append(100 * pub)
    lo_all, hi_all = min(shared), max(shared)
    left, right, row_h = 360, 860, 22
    height = 40 + row_h * len(rows) + 30
    parts = [_text(left, 14, "effect (pp unless marked); dot = ours with 95% interval, diamond = published", size=11)]
    for i, c in enumerate(rows):
        y = 34 + i * row_h
        s, k = c["statistic"], _scale(c)
        pub = (c.get("published") or {}).get("effect")
        if k == 100.0:
            lo, hi = lo_all, hi_all
        else:
            vals = [0.0, s["lo"] - c["than"], s["hi"] - c["than"]] + ([pub] if isinstance(pub, int | float) else [])
            lo, hi = min(vals), max(vals)
        pad = (hi - lo) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad

        def x(v: float, lo=lo, hi=hi) -> float:
            return left + (v - lo) / (hi - lo) * (right - left)

        colour = COLOURS.get(c["verdict"], "#888")
        label = f"{c['id']} ({c['model']})" + ("" if k == 100.0 else " [own scale]")
        parts.append(_text(left - 8, y + 4, label[:60], anchor="end", size=10))
        parts.append(_line(x(0), y - 8, x(0), y + 8, "#bbb"))
        e, l_, h_ = (s["value"] - c["than"]) * k, (s["lo"] - c["than"]) * k, (s["hi"] - c["than"]) * k
        tip = f"{c['verdict']}: {e:+.3g} [{l_:+.3g}, {h_:+.3g}]"
        parts.append(_line(x(l_), y, x(h_), y, colour, 2))
        parts.append(_circle(x(e), y, 4, colour, tip))
        if isinstance(pub, int | float):
            parts.append(_circle(x(pub * k), y, 5, PUBLISHED, f"published {pub * k:+.3g}", "diamond"))
        parts.append(_text(right + 8, y + 4, c["verdict"], size=10, fill=colour))
    y = 34 + len(rows) * row_h
    parts.append(_text(left, y + 8, f"{lo_all:+.0f} pp", size=10))
    parts.append(_text(right, y + 8, f"{hi_all:+.0f} pp", anchor="end", size=10))
    return _svg(f"forest-{paper['number']}", 980, height, join(parts),
                f"{paper['number']} {paper['short']}: our effects beside the published ones, coloured by verdict")


# ------------------------------------------------------------------------ 000


def heatmap(fig: Mapping[str, Any]) -> Markup:
    m = fig["matrix"]
    n_l, n_h = len(m), len(m[0]) if m else 0
    cell = max(6, min(22, 560 // max(n_h, 1)))
    top, left = 30, 50
    top_value = max([v for row in m for v in row if v is not None] + [1e-9])
    parts = [_text(left, 16, f"QK-score accuracy, all items (darkest {100 * top_value:.0f}%; chance "
                             f"{100 * fig['chance']:.0f}%; grey: degenerate; outlined: chosen)", size=10)]
    for layer, row in enumerate(m):
        parts.append(_text(left - 4, top + layer * cell + cell * 0.75, f"L{layer}", anchor="end", size=8))
        for h, v in enumerate(row):
            if v is None:
                fill = "#dddddd"
            else:
                t = max(0.0, min(1.0, v / top_value))
                fill = f"rgb({int(255 - 200 * t)},{int(255 - 120 * t)},{int(255 - 40 * t)})"
            tip = f"L{layer}H{h}: " + ("degenerate" if v is None else f"{100 * v:.1f}%")
            chosen = list(fig.get("chosen") or []) == [layer, h]
            parts.append(_rect(left + h * cell, top + layer * cell, cell - 1, cell - 1, fill,
                               "#b22222" if chosen else "none", tip))
    for h in range(n_h):
        parts.append(_text(left + h * cell + cell / 2, top + n_l * cell + 10, f"H{h}", anchor="middle", size=8))
    return _svg(f"heatmap-000-{fig['model']}-{fig['experiment']}", max(left + n_h * cell + 20, 620), top + n_l * cell + 24,
                join(parts), f"000 {fig['experiment']}, {fig['model']}: head accuracy (chosen L{fig['chosen'][0]}H{fig['chosen'][1]})"
                if fig.get("chosen") else f"000 {fig['experiment']}, {fig['model']}: head accuracy")


def recall(c: Mapping[str, Any], control: Mapping[str, Any]) -> Markup:
    letters = list(control["gold_counts"])
    total = sum(control["gold_counts"].values()) or 1
    series = [("gold share", {k: v / total for k, v in control["gold_counts"].items()}, "#bbbbbb"),
              (f"{c.get('unit', 'head')} recall", control["recall"], "#1f77b4")]
    if control.get("reference_recall"):
        series.append(("baseline recall", control["reference_recall"], "#d08a00"))
    w_group, bar, top, height = 90, 24, 24, 140
    parts = []
    for j, (name, _, colour) in enumerate(series):
        parts.append(_rect(40 + j * 130, 6, 10, 10, colour))
        parts.append(_text(54 + j * 130, 15, name, size=10))
    for i, letter in enumerate(letters):
        x0 = 40 + i * w_group
        for j, (name, vals, colour) in enumerate(series):
            v = vals.get(letter)
            if v is None:
                continue
            parts.append(_rect(x0 + j * bar, top + height * (1 - v), bar - 3, height * v, colour,
                               tip=f"{letter} {name}: {100 * v:.0f}%"))
        parts.append(_text(x0 + bar * len(series) / 2, top + height + 14, letter, anchor="middle"))
    parts.append(_line(36, top + height, 40 + len(letters) * w_group, top + height))
    return _svg(f"recall-000-{c['model']}-{c['id']}", 60 + len(letters) * w_group, top + height + 24, join(parts),
                f"{c['id']}, {c['model']}: recall per gold letter ({c.get('unit', '')}); always '{control['best_letter']}' "
                f"scores {100 * control['constant_accuracy']:.0f}%")


# ------------------------------------------------------------------------ 001


def utility_law(c: Mapping[str, Any]) -> Markup:
    s = c["statistic"]
    pts = [p for p in s.get("points", ()) if p["performance"] > 0]
    pub = c.get("published") or {}
    xs = [math.log(p["performance"]) for p in pts] + [0.0, math.log(100)]
    ys = [p["mui"] for p in pts]
    lines = [(s["value"], s.get("b"), "#2a7d2a", "ours"), (pub.get("effect"), pub.get("b"), PUBLISHED, "published")]
    for a, b, _, _ in lines:
        if isinstance(a, int | float) and isinstance(b, int | float):
            ys += [b, a * math.log(100) + b]
    x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), min(ys + [0.0]), max(ys + [1.0])
    left, right, top, bottom = 50, 520, 20, 260

    def X(v: float) -> float:
        return left + (v - x_lo) / ((x_hi - x_lo) or 1) * (right - left)

    def Y(v: float) -> float:
        return bottom - (v - y_lo) / ((y_hi - y_lo) or 1) * (bottom - top)

    parts = [_line(left, bottom, right, bottom), _line(left, top, left, bottom),
             _text((left + right) / 2, bottom + 28, "ln(performance, %)", anchor="middle"),
             _text(12, top - 6, "MUI (%)", size=10)]
    for a, b, colour, name in lines:
        if isinstance(a, int | float) and isinstance(b, int | float):
            parts.append(_line(X(x_lo), Y(a * x_lo + b), X(x_hi), Y(a * x_hi + b), colour, 1.5,
                               "" if name == "ours" else "5,3"))
            parts.append(_text(right + 4, Y(a * x_hi + b), f"{name}: A = {a:.3g}, B = {b:.3g}", size=10, fill=colour))
    for p in pts:
        parts.append(_circle(X(math.log(p["performance"])), Y(p["mui"]), 4, "#222",
                             f"{p['label']}: performance {p['performance']:.1f}%, MUI {p['mui']:.3f}%"))
    return _svg("utility-law", 720, 300, join(parts),
                "001 Utility Law: MUI = A ln(P) + B over our (model, task) points; ours solid, the paper's "
                "(sec. 3.2, Fig. 3) dashed")


# ------------------------------------------------------------------------ 002


def interventions(model: str, bars: Sequence[tuple[str, float, str]]) -> Markup:
    top, height, w = 20, 160, 70
    parts = []
    for i, (name, v, colour) in enumerate(bars):
        x0 = 40 + i * w
        parts.append(_rect(x0, top + height * (1 - v), w - 12, height * v, colour, tip=f"{name}: {100 * v:.1f}%"))
        parts.append(_text(x0 + (w - 12) / 2, top + height * (1 - v) - 3, f"{100 * v:.0f}%", anchor="middle", size=10))
        parts.append(_text(x0 + (w - 12) / 2, top + height + 14, name, anchor="middle", size=9))
    parts.append(_line(36, top + height, 40 + len(bars) * w, top + height))
    return _svg(f"interventions-002-{model}", 60 + len(bars) * w, top + height + 26, join(parts),
                f"002 {model}: accuracy before, after the True/False edits on the chosen heads, and after the "
                "forward edit on random head sets (report split)")


def figures(p: dict[str, Any]) -> list[dict[str, str]]:
    """A paper's figures (claims.json's ``papers[i]``), in the report's order, each as the fields of
    a :class:`.render.Block`: ``plot`` (inline SVG: its ``svg``) or ``image`` (a child's PNG: its ``path``)."""
    out = []
    fig = forest(p)
    if fig:
        out.append(dict(kind="plot", text=f"Forest plot of {p['number']}'s claims", svg=fig, name=f"forest-{p['number']}"))
    for f in p.get("figures", ()):
        if f["kind"] == "heatmap":
            out.append(dict(kind="plot", text=f"head accuracy, {f['model']} {f['experiment']}", svg=heatmap(f),
                             name=f"heatmap-{p['number']}-{f['model']}-{f['experiment']}"))
    bars: dict[str, list[tuple[str, float, str]]] = {}
    for c in p["claims"]:
        for ctl in c.get("controls", ()):
            if ctl["kind"] == "constant_letter" and "recall" in ctl and "mmlu" in c["id"]:
                out.append(dict(kind="plot", text=f"recall per letter, {c['model']} {c['id']}", svg=recall(c, ctl),
                                 name=f"recall-{p['number']}-{c['model']}-{c['id']}"))
            if ctl["kind"] == "random_heads" and "selected_accuracy" in ctl:
                b = bars.setdefault(c["model"], [])
                if not b and "b" in (c.get("arms") or {}) and "value" in c["arms"]["b"]:
                    b.append(("before", c["arms"]["b"]["value"], "#bbbbbb"))
                b.append((c["id"].split("-")[0] + " edit", ctl["selected_accuracy"], "#1f77b4"))
                if c["id"].startswith("true-false"):
                    b += [(f"random {i}", a, "#d08a00") for i, a in enumerate(ctl["random_accuracy"])]
        if c["id"] == "utility-law" and (c.get("statistic") or {}).get("points"):
            out.append(dict(kind="plot", text="Utility Law", svg=utility_law(c), name="utility-law"))
    for model, b in bars.items():
        out.append(dict(kind="plot", text=f"interventions, {model}", svg=interventions(model, b),
                         name=f"interventions-{p['number']}-{model}"))
    for f in p.get("figures", ()):
        if f["kind"] == "image":
            out.append(dict(kind="image", text=f"{f['experiment']}, {f['model']}: {f['path'].rsplit('/', 1)[-1]}",
                             path=f["path"], name=slug(f"attention-{p['number']}-{f['model']}-{f['experiment']}-"
                                                             f"{f['path'].rsplit('/', 1)[-1].removesuffix('.png')}")))
    return out
