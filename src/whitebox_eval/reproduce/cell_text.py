"""The text of every cell the reproduction's report shows: a published table's values and ours
(:func:`published_cell`, :func:`ours_cell`), and a claim's statistic, off-format share, test,
arms, checks, published effect and verdict (:func:`claim_rows`, :func:`short_verdict`).
:mod:`.render` lays them out as blocks and writes them.
"""

from __future__ import annotations

import math
from typing import Any

from whitebox_eval import stats
from whitebox_eval.reproduce.spec import UNREADABLE


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
    """``off-format 2/48 (4.2% [1.2, 14.0])``: the cell's off-format share, a tested cell's
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


def claim_rows(claims: list[dict[str, Any]]) -> list[list[str]]:
    """A paper's claims table: one row of cells per claim."""
    rows = []
    for c in claims:
        direction = {"greater": "> ", "less": "< ", "none": "within ±"}[c["direction"]]
        bound = c.get("margin") if c["direction"] == "none" else c.get("than", 0.0)
        bound_text = f"{bound * _k(c):g}{_u(c)}" if c["direction"] == "none" else f"{bound:g}"
        s = c.get("statistic") or {}
        p = test_text(c) + (f"; Holm {stats.fmt_p(c['p_holm'])}" if "p_holm" in c else "")
        stat = "; ".join(filter(None, (statistic_text(c), off_format_text(c))))  # the off-format share beside the effect
        rows.append([c["claim"] + f" ({c['cite']})", c["model"], c.get("unit", ""), f"{direction}{bound_text}",
                     arms_text(c), stat, p if s else "", checks_text(c),
                     published_text(c), verdict_text(c), verdict_text(c, holm=True)])
    return rows


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
