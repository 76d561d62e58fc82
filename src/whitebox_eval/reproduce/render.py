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
from pathlib import Path
from typing import Any

from whitebox_eval import stats
from whitebox_eval.reproduce import plots
from whitebox_eval.reproduce.spec import UNREADABLE


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


def signed(v: float | None, digits: str = ".3g") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    return format(v, "+" + digits)


def _k(c: dict[str, Any]) -> float:
    return 100.0 if c.get("effect_unit", "pp") == "pp" else 1.0


def _u(c: dict[str, Any]) -> str:
    return " pp" if c.get("effect_unit", "pp") == "pp" else ""


def effect(c: dict[str, Any], v: float) -> str:
    """An effect in the claim's unit: percentage points (1 decimal) or the statistic's own."""
    return signed(v * _k(c), ".1f" if _k(c) == 100.0 else ".3g")


def p_text(p: float | None) -> str:
    return "no p-value (interval rule)" if p is None else stats.fmt_p(p)


def statistic_text(c: dict[str, Any]) -> str:
    """``+14.0 pp [+1.0, +26.0] n=100`` (the effect against the claim's boundary)."""
    s = c.get("statistic")
    if not s:
        return ""
    than = c.get("than", 0.0)
    text = f"{effect(c, s['value'] - than)} [{effect(c, s['lo'] - than)}, {effect(c, s['hi'] - than)}]{_u(c)}"
    if s.get("n") is not None:
        text += f" n={s['n']}"
    return text


def off_format_text(c: dict[str, Any]) -> str:
    """``off-format 2/48 (4.2% [1.2, 14.0])``: the cell's off-format share (rule 6), a tested cell's
    ``statistic.off_format`` or a refused one's ``off_format``, its Wilson interval where it has one; "" if none."""
    off = (c.get("statistic") or {}).get("off_format") or c.get("off_format")
    if not off or not off.get("of"):
        return ""
    ci = f" [{100 * off['lo']:.1f}, {100 * off['hi']:.1f}]" if "lo" in off and "hi" in off else ""
    return f"off-format {off['n']}/{off['of']} ({100 * off.get('value', off['n'] / off['of']):.1f}%{ci})"


def test_text(c: dict[str, Any]) -> str:
    """The deciding test named with its own p-value: ``TOST (normal) p = 0.010; difference: mcnemar_exact
    p = 0.400`` for a claim of no difference, ``mcnemar_exact p < 0.001`` otherwise."""
    s = c.get("statistic") or {}
    diff = f"{s.get('test') or 'interval'} {p_text(s.get('p_value')) if s.get('p_value') is not None else '(interval rule)'}"
    if c.get("direction") == "none" and c.get("equivalence"):
        return f"TOST (two one-sided, normal) {p_text(c.get('p_value'))}; difference: {diff}"
    if s.get("p_value") is None:
        return f"{s.get('test') or ''} {p_text(c.get('p_value'))} (from its interval)".strip()
    return diff if c.get("p_value") == s.get("p_value") else f"{diff} (deciding p {p_text(c.get('p_value'))})"


def detectable_text(c: dict[str, Any]) -> str:
    """The smallest effect this n could show: for a difference, (z_0.975 + z_0.80) x SE; for a claim
    of no difference, the smallest margin TOST could show equivalence at (z_0.95 x SE, at a true 0)."""
    if c.get("direction") == "none" and c.get("equivalence"):
        from scipy.stats import norm

        m = float(norm.ppf(0.95)) * float(c["equivalence"]["se"])
        return f"; smallest margin this n could show: {m * _k(c):.3g}{_u(c)} (margin {c['margin'] * _k(c):g}{_u(c)})"
    if c.get("minimum_detectable_effect") is not None:
        return f"; detectable {abs(c['minimum_detectable_effect']) * _k(c):.3g}{_u(c)}"
    return ""


def published_text(c: dict[str, Any]) -> str:
    pub = c.get("published") or {}
    parts = []
    if isinstance(pub.get("effect"), int | float):
        parts.append(effect(c, float(pub["effect"])) + _u(c))
    if pub.get("text"):
        parts.append(str(pub["text"]))
    if pub.get("model"):
        parts.append(f"({pub['model']})")
    return " ".join(parts) or "not stated"


def _arm_text(a: dict[str, Any], level: dict[str, Any] | None = None) -> str:
    if "error" in a:
        return f"{a.get('label', '')}: n/a ({a['error']})"
    if "value" not in a:  # declared without values (a fit's points, a token measure): named only
        return f"{a.get('label', '')} ({a.get('source', 'no values')})"
    if "k" in a:
        text = f"{a.get('label', '')} {100 * a['value']:.1f}% ({a['k']}/{a['n']})"
    else:  # a continuous arm: its mean value, never a count
        text = f"{a.get('label', '')} {a['value']:.3g}" + (f" (mean over {a['n']} items)" if a.get("n") else "")
    if level and level.get("level") is not None:
        text += (f" [uninformed level {100 * level['level']:.1f}%, {level.get('test', '')} "
                 f"{p_text(level.get('p_value'))}{'' if level.get('above') else ': at chance'}]")
    return text


def arms_text(c: dict[str, Any]) -> str:
    """Both sides on the same items, each with its uninformed level and test:
    ``QK head 30.0% (30/100) [uninformed level 25.0%, exact binomial p = 0.14: at chance] vs ...``."""
    arms = c.get("arms") or {}
    levels = ((c.get("rules") or {}).get("chance") or {}).get("arms") or {}
    if arms:
        return " vs ".join(_arm_text(arms[k], levels.get(k)) for k in sorted(arms))
    s = c.get("statistic") or {}
    if "side_a" in s and "side_b" in s:
        return f"{s['side_a']:.4g} vs {s['side_b']:.4g}"
    return ""


def checks_text(c: dict[str, Any]) -> str:
    pre = [f"{'ok' if x.get('passed') else 'FAILED'} {x['kind']}: {x['text']}" for x in c.get("preconditions", ())]
    ctl = [f"{_control_label(c, x)} {x['kind']}: {x['text']}" for x in c.get("controls", ())]
    rules = c.get("rules") or {}
    man = [f"{'ok' if x.get('passed') else 'FAILED'} manipulation {x['kind']}: {x['text']}"
           for x in rules.get("manipulation") or ()]
    sub = [f"{'ok' if x.get('state') == 'shown' else 'FAILED'} substance: {x['text']}" for x in rules.get("substance") or ()]
    sens = rules.get("sensitivity")
    pos = [f"{'ok' if sens.get('reaches') else 'FAILED'} positive control: {sens['text']}"] if sens else []
    return "; ".join(man + pre + sub + ctl + pos)


def _control_label(c: dict[str, Any], x: dict[str, Any]) -> str:
    """ok: the arm beats the control; EXPLAINS: it does not, and that turned a holding or a
    contradicting effect uninformative; not beaten: it does not, but there was no such effect;
    DESCRIPTIVE: too few random draws for a test (specificity untested); NOT RUN: the child ran no
    draws of its own stage (specificity untested)."""
    if "error" in x:
        return "ERROR"
    if x.get("not_run"):
        return "NOT RUN"
    if x.get("descriptive"):
        return "DESCRIPTIVE"
    if not x.get("explains"):
        return "ok"
    return "EXPLAINS" if c.get("statistical_verdict") in ("holds", "contradicted") else "not beaten"


def verdict_text(c: dict[str, Any], holm: bool = False) -> str:
    v = c["verdict_holm"] if holm else c["verdict"]
    if c.get("qualifier") and v == c["verdict"] and v == "uninformative":
        v += f" ({c['qualifier']})"
    if (v.startswith(("not run", "not tested", "uninformative")) or c.get("qualifier")) and not holm and c.get("reason"):
        return f"{v}: {c.get('reason', '')}"
    if v == "not shown at this n":
        v += detectable_text(c)
    return v


# ------------------------------------------------------------------------ blocks


def _claim_rows(claims: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for c in claims:
        direction = {"greater": "> ", "less": "< ", "none": "within ±"}[c["direction"]]
        bound = c.get("margin") if c["direction"] == "none" else c.get("than", 0.0)
        bound_text = f"{bound * _k(c):g}{_u(c)}" if c["direction"] == "none" else f"{bound:g}"
        s = c.get("statistic") or {}
        p = test_text(c) + (f"; Holm {stats.fmt_p(c['p_holm'])}" if "p_holm" in c else "")
        stat = "; ".join(filter(None, (statistic_text(c), off_format_text(c))))  # rule 6's share beside the effect
        rows.append([c["claim"] + f" ({c['cite']})", c["model"], c.get("unit", ""), f"{direction}{bound_text}",
                     arms_text(c), stat, p if s else "", checks_text(c),
                     published_text(c), verdict_text(c), verdict_text(c, holm=True)])
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
    """``holds (Holm: holds): +33.0 pp [+29.0, +38.0] n=100, mcnemar_exact p < 0.001`` (an overview cell)."""
    v = c["verdict"]
    holm = "" if c.get("verdict_holm", v) == v else f" (Holm: {c['verdict_holm']})"
    off = f"; {off_format_text(c)}" if off_format_text(c) else ""
    if v in ("not run", "not tested"):
        return f"{v} ({c.get('reason', '')}){off}"
    text = v + (f" ({c['qualifier']})" if c.get("qualifier") and v == "uninformative" else "") + holm
    if c.get("statistic"):
        text += f": {statistic_text(c)}, {test_text(c)}"
    text += off
    if c.get("qualifier") and c.get("reason"):
        text += f" -- {c.get('reason', '')}"
    elif v == "not shown at this n":
        text += detectable_text(c)
    for caveat in c.get("caveats") or ():
        text += f"; {caveat}"
    return text


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
                cells = [short_verdict(per["all"]) if "all" in per else short_verdict(per[m]) if m in per else ""
                         for m in models]
            else:  # each paper its own models (--scale paper): one cell, model by model
                cells = ["; ".join(f"{m.rsplit('/', 1)[-1]}: {short_verdict(c)}" for m, c in per.items())]
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
                         rows=_claim_rows(p["claims"])))
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
