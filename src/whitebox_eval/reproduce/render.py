"""``reproduction.md`` and ``reproduction.html`` from the assembled content (claims.json).

The content is first laid out as blocks (headings, paragraphs, tables, lists; each cell's text
from :mod:`.cell_text`), then written as Markdown or as a self-contained page with the report's
style and escaping (:mod:`whitebox_eval.report.markup`), so the two files say the same thing.
Neither holds a time: an interrupted and resumed reproduction writes the same files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whitebox_eval.reproduce import cell_text, plots


@dataclass
class Block:
    kind: str  # "h1" | "h2" | "h3" | "p" | "table" | "list" | "plot" (inline SVG) | "image" (a child's PNG)
    text: str = ""
    header: Sequence[str] = ()
    rows: Sequence[Sequence[str]] = ()
    items: Sequence[str] = ()
    svg: str = ""  # "plot": the figure's markup (made by :mod:`.plots`, escaped there)
    name: str = ""  # "plot" / "image": its data-plot name
    path: str = ""  # "image": relative to the reproduction folder


# ------------------------------------------------------------------------ blocks


def _table_blocks(t: dict[str, Any], models: list[str]) -> list[Block]:
    unit = t["unit"]
    unit_note = {"percent": "values in %", "text": "heads as layer.head"}.get(unit, "values as published")
    head = f"{t['cite']}: {t['title']}"
    out = [Block("h3", head),
           Block("p", f"Published: {t['published_model'] or 'as named in the row'}; ours: {', '.join(models)} "
                      f"(value [95% interval] n); {unit_note}." + (f" {t['ours_note']}" if t.get("ours_note") else ""))]
    labels = list(t.get("label_header") or ["row"])
    width = max([len(r["label"]) for r in t["rows"]] + [len(r["label"]) for r in t.get("our_rows", [])] + [1])
    labels = (labels + [""] * width)[:width]
    if t["ours_by"] == "rows":
        header = ["source"] + labels + list(t["columns"])
        rows = [["published"] + _label(r["label"], width)
                + [cell_text.published_cell(v, unit) for v in r["published"]] for r in t["rows"]]
        rows += [[f"ours: {r['model']}"] + _label(r["label"], width)
                 + [cell_text.ours_cell(c, unit) or "–" for c in r["ours"]] for r in t["our_rows"]]
        out.append(Block("table", header=header, rows=rows))
        return out
    if t["ours_by"] == "model":
        header = labels + [f"{c} (published)" for c in t["columns"]] + [f"ours: {m}" for m in models]
        rows = []
        for r in t["rows"]:
            rows.append(_label(r["label"], width) + [cell_text.published_cell(v, unit) for v in r["published"]]
                        + [cell_text.ours_cell(r["ours"].get(m), unit) for m in models])
        out.append(Block("table", header=header, rows=rows))
        return out
    if all(r["ours"].get(m) is None for r in t["rows"] for m in models):
        header = labels + list(t["columns"])
        out.append(Block("table", header=header, rows=[_label(r["label"], width)
                                                       + [cell_text.published_cell(v, unit) for v in r["published"]]
                                                       for r in t["rows"]]))
        return out
    for m in models:
        header = labels + [f"{c}: published / ours" for c in t["columns"]]
        rows = []
        for r in t["rows"]:
            cells = r["ours"].get(m)
            row = _label(r["label"], width)
            for j, pub in enumerate(r["published"] or [None] * len(t["columns"])):
                ours = cells[j] if cells else None
                row.append(f"{cell_text.published_cell(pub, unit)} / {cell_text.ours_cell(ours, unit) or '–'}")
            rows.append(row)
        out.append(Block("p", f"ours: {m}"))
        out.append(Block("table", header=header, rows=rows))
    return out


def _label(label: list[str], width: int) -> list[str]:
    return list(label) + [""] * (width - len(label))


def overview(content: dict[str, Any]) -> Block:
    """One row per claim, one column per model: the verdict (and Holm's, where it differs)."""
    models = content["models"]
    shared = all(p.get("models", models) == models for p in content["papers"])
    rows = []
    for p in content["papers"]:
        by_claim: dict[str, dict[str, dict[str, Any]]] = {}
        for c in p["claims"]:
            by_claim.setdefault(c["id"], {})[c["model"]] = c
        for cid, per in by_claim.items():
            first = next(iter(per.values()))
            if shared:
                cells = [cell_text.short_verdict(per["all"]) if "all" in per
                         else cell_text.short_verdict(per[m]) if m in per else "" for m in models]
            else:  # each paper its own models (--scale paper): one cell, model by model
                cells = ["; ".join(f"{m.rsplit('/', 1)[-1]}: {cell_text.short_verdict(c)}" for m, c in per.items())]
            rows.append([p["number"], f"{first['claim']} ({first['cite']})", *cells])
    return Block("table", header=["paper", "claim (cite)", *(models if shared else ["verdict per model"])], rows=rows)


def counts(content: dict[str, Any]) -> Block:
    """Verdicts counted per paper, raw and with Holm's adjustment within the paper."""
    from whitebox_eval.reproduce.verdicts import VERDICTS

    rows = []
    total = {(v, h): 0 for v in VERDICTS for h in (False, True)}
    for p in content["papers"]:
        for holm in (False, True):
            key = "verdict_holm" if holm else "verdict"
            n = {v: sum(1 for c in p["claims"] if c.get(key, c["verdict"]) == v) for v in VERDICTS}
            for v in VERDICTS:
                total[(v, holm)] += n[v]
            rows.append([p["number"], "Holm" if holm else "raw", *[str(n[v]) for v in VERDICTS]])
    for holm in (False, True):
        rows.append(["all", "Holm" if holm else "raw", *[str(total[(v, holm)]) for v in VERDICTS]])
    return Block("table", header=["paper", "p-values", *VERDICTS], rows=rows)


def blocks(content: dict[str, Any], command: str) -> list[Block]:
    models = content["models"]
    out = [Block("h1", "Reproducing the papers"),
           Block("p", f"`{command}`: scale {content['scale']}, models {', '.join(models)}."),
           Block("p", "Verdict rule: " + content["rule"]),
           Block("h2", "Verdicts"),
           Block("p", "Each claim's statistic is ours: the effect (difference, or value against the claimed "
                      "boundary; percentage points for accuracies) with its 95% interval and n, the test and "
                      "its p-value; a claim across models (the Utility Law) has one entry. Where Holm's "
                      "adjustment within the paper changes the verdict, both are given."),
           counts(content),
           overview(content)]
    for p in content["papers"]:
        out.append(Block("h2", f"{p['number']} {p['short']}: {p['title']}"))
        if p.get("summary"):
            out.append(Block("p", p["summary"]))
        out.append(Block("h3", "Claims"))
        out.append(Block("table", header=["claim (cite)", "model", "unit", "claimed", "arms on the same items",
                                          "ours: effect [95%] n", "test, p (raw; Holm)", "preconditions; controls",
                                          "published effect", "verdict", "verdict (Holm)"],
                         rows=cell_text.claim_rows(p["claims"])))
        out.extend(Block(**f) for f in plots.figures(p))
        for c in p["claims"]:
            points = (c.get("statistic") or {}).get("points")
            if points:
                out.append(Block("p", f"{c['claim']}: the points fitted (performance and MUI in %), "
                                      f"R^2 = {c['statistic'].get('r2', float('nan')):.3f}, B = {c['statistic'].get('b', float('nan')):.3f}"))
                out.append(Block("table", header=["run", "performance (%)", "MUI (%)"],
                                 rows=[[q["label"], f"{q['performance']:.1f}", f"{q['mui']:.3f}"] for q in points]))
            skipped = (c.get("statistic") or {}).get("skipped")
            if skipped:
                out.append(Block("p", "Left out of the fit: " + "; ".join(skipped)))
        for t in p["tables"]:
            out.extend(_table_blocks(t, p.get("models", models)))
        if p["scaled_down"]:
            out.append(Block("h3", "Scaled down at this scale"))
            out.append(Block("list", items=[f"{s['title']} ({s['experiment']}): {s['differs']}"
                                            for s in p["scaled_down"]]))
        if p["not_run"]:
            out.append(Block("h3", "Not run"))
            out.append(Block("list", items=[f"{n['what']} ({n['cite']}): {n['reason']}" for n in p["not_run"]]))
        out.append(Block("h3", "Child runs"))
        out.append(Block("table", header=["run folder (runs/)", "model", "experiments", "status"],
                         rows=[[r["run"], r["model"], ", ".join(r["experiments"]),
                                r["status"] + (f": {r['reason']}" if r.get("reason") else "")] for r in p["runs"]]))
    return out


# ------------------------------------------------------------------------ writers


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(bs: list[Block]) -> str:
    lines: list[str] = []
    for b in bs:
        if b.kind in ("h1", "h2", "h3"):
            lines += ["#" * int(b.kind[1]) + " " + b.text, ""]
        elif b.kind == "p":
            lines += [b.text, ""]
        elif b.kind == "list":
            lines += [f"- {i}" for i in b.items] + [""]
        elif b.kind in ("plot", "image"):
            lines += [f"_Figure `{b.name}` (in reproduction.html): {b.text}_", ""]
        elif b.kind == "table":
            lines.append("| " + " | ".join(_md_cell(h) for h in b.header) + " |")
            lines.append("|" + "---|" * len(b.header))
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def html(bs: list[Block], title: str, base: Path | None = None) -> str:
    """The page; ``base`` is the reproduction folder, where an ``image`` block's PNG is read
    (embedded as a data: URI, the only images the CSP allows)."""
    import base64

    from whitebox_eval.report.markup import Markup, join, render
    from whitebox_eval.report.style import CSP, STYLE

    parts = []
    for b in bs:
        if b.kind == "plot":
            parts.append(Markup(b.svg))
            continue
        if b.kind == "image":
            png = (base / b.path) if base is not None else None
            if png is not None and png.is_file():
                uri = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")
                parts.append(render('<figure data-plot="{name}"><img src="{src}" alt="{alt}" style="max-width:100%">'
                                    '<figcaption>{alt}</figcaption></figure>\n', name=b.name, src=uri, alt=b.text))
            continue
        if b.kind in ("h1", "h2", "h3"):
            parts.append(render("<{tag}>{text}</{tag}>\n", tag=Markup(b.kind), text=b.text))
        elif b.kind == "p":
            parts.append(render("<p>{text}</p>\n", text=b.text))
        elif b.kind == "list":
            parts.append(render("<ul>{items}</ul>\n", items=join(render("<li>{i}</li>", i=i) for i in b.items)))
        elif b.kind == "table":
            head = join(render("<th>{h}</th>", h=h) for h in b.header)
            body = join(render("<tr>{cells}</tr>\n", cells=join(render("<td>{c}</td>", c=c) for c in row))
                        for row in b.rows)
            parts.append(render("<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>\n",
                                head=head, body=body))
    return render("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                  "<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"
                  "<title>{title}</title><style>{style}</style></head>\n<body>\n{body}</body></html>\n",
                  csp=CSP, title=title, style=Markup(STYLE), body=join(parts))
