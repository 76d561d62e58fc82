"""``reproduction.md`` and ``reproduction.html`` from the assembled content (claims.json).

The content is first laid out as blocks (headings, paragraphs, tables, lists), then
written as Markdown or as a self-contained page with the report's style and escaping
(:mod:`whitebox_eval.report.markup`), so the two files say the same thing. Neither holds
a time: an interrupted and resumed reproduction writes the same files.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from whitebox_eval import stats
from whitebox_eval.reproduce.spec import UNREADABLE


@dataclass
class Block:
    kind: str  # "h1" | "h2" | "h3" | "p" | "table" | "list"
    text: str = ""
    header: Sequence[str] = ()
    rows: Sequence[Sequence[str]] = ()
    items: Sequence[str] = ()


# ------------------------------------------------------------------------ numbers


def _num(v: float, unit: str) -> str:
    if unit == "percent":
        return f"{v:.1f}"
    if unit == "number":
        return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.4g}"
    if v != 0 and (abs(v) < 0.01 or abs(v) >= 1000):
        return f"{v:.3g}"
    return f"{v:.3f}"


def published_cell(v: Any, unit: str) -> str:
    if v is None:
        return "–"
    if v == UNREADABLE:
        return "unreadable"
    if unit == "text":
        return str(v)
    return _num(float(v), unit)


def ours_cell(cell: dict[str, Any] | None, unit: str) -> str:
    if cell is None or cell.get("none"):
        return ""
    if "not_run" in cell:
        return "not run"
    if "missing" in cell:
        return "n/a"
    if "text" in cell:
        return cell["text"]
    text = _num(cell["value"], unit)
    if "lo" in cell:
        text += f" [{_num(cell['lo'], unit)}, {_num(cell['hi'], unit)}]"
    if cell.get("n") is not None:
        text += f" n={cell['n']}"
    return text


def signed(v: float | None) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    return f"{v:+.3g}"


def p_text(p: float | None) -> str:
    return "no p-value (interval rule)" if p is None else stats.fmt_p(p)


def statistic_text(c: dict[str, Any]) -> str:
    s = c.get("statistic")
    if not s:
        return ""
    text = f"{signed(s['value'])} [{signed(s['lo'])}, {signed(s['hi'])}]"
    if s.get("n") is not None:
        text += f" n={s['n']}"
    return text


def published_text(c: dict[str, Any]) -> str:
    pub = c.get("published") or {}
    parts = []
    if isinstance(pub.get("effect"), int | float):
        parts.append(signed(float(pub["effect"])))
    if pub.get("text"):
        parts.append(str(pub["text"]))
    if pub.get("model"):
        parts.append(f"({pub['model']})")
    return " ".join(parts) or "not stated"


def verdict_text(c: dict[str, Any]) -> str:
    v = c["verdict"]
    if v == "not run":
        return f"not run: {c.get('reason', '')}"
    if v == "not tested":
        return f"not tested: {c.get('reason', '')}"
    if v == "not shown at this n":
        mde = c.get("minimum_detectable_effect")
        v += (f" (smallest detectable: {abs(mde):.3g})" if mde is not None
              else " (no item differs: the interval has no width, so this n says nothing)")
    return v


# ------------------------------------------------------------------------ blocks


def _claim_rows(claims: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for c in claims:
        direction = {"greater": "> ", "less": "< ", "none": "within ±"}[c["direction"]]
        bound = c.get("margin") if c["direction"] == "none" else c.get("than", 0.0)
        test = (c.get("statistic") or {}).get("test") or ""
        rows.append([c["claim"] + f" ({c['cite']})", c["model"], f"{direction}{bound:g}",
                     statistic_text(c), f"{test}, {p_text((c.get('statistic') or {}).get('p_value'))}"
                     if c.get("statistic") else "", published_text(c), verdict_text(c)])
    return rows


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
                + [published_cell(v, unit) for v in r["published"]] for r in t["rows"]]
        rows += [[f"ours: {r['model']}"] + _label(r["label"], width) + [ours_cell(c, unit) or "–" for c in r["ours"]]
                 for r in t["our_rows"]]
        out.append(Block("table", header=header, rows=rows))
        return out
    if t["ours_by"] == "model":
        header = labels + [f"{c} (published)" for c in t["columns"]] + [f"ours: {m}" for m in models]
        rows = []
        for r in t["rows"]:
            rows.append(_label(r["label"], width) + [published_cell(v, unit) for v in r["published"]]
                        + [ours_cell(r["ours"].get(m), unit) for m in models])
        out.append(Block("table", header=header, rows=rows))
        return out
    if all(r["ours"].get(m) is None for r in t["rows"] for m in models):
        header = labels + list(t["columns"])
        out.append(Block("table", header=header, rows=[_label(r["label"], width) + [published_cell(v, unit) for v in
                                                                                    r["published"]] for r in t["rows"]]))
        return out
    for m in models:
        header = labels + [f"{c}: published / ours" for c in t["columns"]]
        rows = []
        for r in t["rows"]:
            cells = r["ours"].get(m)
            row = _label(r["label"], width)
            for j, pub in enumerate(r["published"] or [None] * len(t["columns"])):
                ours = cells[j] if cells else None
                row.append(f"{published_cell(pub, unit)} / {ours_cell(ours, unit) or '–'}")
            rows.append(row)
        out.append(Block("p", f"ours: {m}"))
        out.append(Block("table", header=header, rows=rows))
    return out


def _label(label: list[str], width: int) -> list[str]:
    return list(label) + [""] * (width - len(label))


def short_verdict(c: dict[str, Any]) -> str:
    """``holds: +0.33 [+0.29, +0.38] n=100, mcnemar_exact p < 0.001`` (one cell of the overview)."""
    v = c["verdict"]
    if v in ("not run", "not tested"):
        return f"{v} ({c.get('reason', '')})"
    s = c["statistic"]
    text = f"{v}: {statistic_text(c)}, {s.get('test') or ''} {p_text(s.get('p_value'))}".replace("  ", " ")
    if v == "not shown at this n":
        mde = c.get("minimum_detectable_effect")
        text += f"; detectable {abs(mde):.3g}" if mde is not None else "; no item differs"
    return text


def overview(content: dict[str, Any]) -> Block:
    """One row per claim, one column per model: the verdict and its statistic."""
    models = content["models"]
    rows = []
    for p in content["papers"]:
        by_claim: dict[str, dict[str, dict[str, Any]]] = {}
        for c in p["claims"]:
            by_claim.setdefault(c["id"], {})[c["model"]] = c
        for cid, per in by_claim.items():
            first = next(iter(per.values()))
            cells = [short_verdict(per["all"]) if "all" in per else short_verdict(per[m]) if m in per else ""
                     for m in models]
            rows.append([p["number"], f"{first['claim']} ({first['cite']})", *cells])
    return Block("table", header=["paper", "claim (cite)", *models], rows=rows)


def blocks(content: dict[str, Any], command: str) -> list[Block]:
    models = content["models"]
    out = [Block("h1", "Reproducing the papers"),
           Block("p", f"`{command}`: scale {content['scale']}, models {', '.join(models)}."),
           Block("p", "Verdict rule: " + content["rule"]),
           Block("h2", "Verdicts"),
           Block("p", "Each claim's statistic is ours: the effect (difference, or value against the claimed "
                      "boundary) with its 95% interval and n, the test and its p-value; a claim across models "
                      "(the Utility Law) has the same entry under every model."),
           overview(content)]
    for p in content["papers"]:
        out.append(Block("h2", f"{p['number']} {p['short']}: {p['title']}"))
        if p.get("summary"):
            out.append(Block("p", p["summary"]))
        out.append(Block("h3", "Claims"))
        out.append(Block("table", header=["claim (cite)", "model", "claimed", "ours: effect [95%] n", "test",
                                          "published effect", "verdict"], rows=_claim_rows(p["claims"])))
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
            out.extend(_table_blocks(t, models))
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
        elif b.kind == "table":
            lines.append("| " + " | ".join(_md_cell(h) for h in b.header) + " |")
            lines.append("|" + "---|" * len(b.header))
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def html(bs: list[Block], title: str) -> str:
    from whitebox_eval.report.markup import Markup, join, render
    from whitebox_eval.report.style import CSP, STYLE

    parts = []
    for b in bs:
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
