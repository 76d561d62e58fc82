"""How a verdict row words its test and what this n could show (shared by the report's tables and
the overview): the deciding test named with its own p-value (TOST rows name TOST, the difference
test beside it), and the smallest effect -- or, for a claim of no difference, the smallest margin --
this n could show."""

from __future__ import annotations

from typing import Any

from whitebox_eval import stats


def _k(c: dict[str, Any]) -> float:
    return 100.0 if c.get("effect_unit", "pp") == "pp" else 1.0


def _u(c: dict[str, Any]) -> str:
    return " pp" if c.get("effect_unit", "pp") == "pp" else ""


def p_text(p: float | None) -> str:
    return "no p-value (interval rule)" if p is None else stats.fmt_p(p)


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
