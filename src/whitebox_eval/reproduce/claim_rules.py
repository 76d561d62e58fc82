"""The inputs of the rules every claim gets by construction (:func:`.verdicts.verdict`), from its
statistic and arms: which arms must beat their uninformed level (:func:`chance`), room to move
(:func:`room`), the within-strata statistic in place of a pooled one that disagrees
(:func:`stratified`; the twins of :mod:`.strata`), and the direction a control is evaluated in (:func:`control_direction`).
Each applies to every claim, verdict and statistic kind alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whitebox_eval import stats
from whitebox_eval.reproduce import chance as levels, verdicts

MOVES = ("lowers", "raises")
"""An arm's ``unedited: lowers|raises``: it is the unedited measure of a claim that a manipulation
(an edit, a training, a mask) lowers (raises) it."""


def favoured(direction: str) -> list[str]:
    """The arm a directional claim about ``a - b`` favours: ``a`` for greater, ``b`` for less."""
    return ["a"] if direction == "greater" else ["b"] if direction == "less" else []


def chance(stat: Mapping[str, Any], arms: Mapping[str, Any], direction: str, effect: float) -> dict[str, Any]:
    """Each arm against its uninformed level (:mod:`.chance`; computed once per arm, the same text
    in every claim reading it), and which arms must be above it: for a difference ``a - b``, the arm
    the claim favours for holds and not shown (``needed``), the arm the observed difference favours
    for contradicted (``needed_if_contradicted``); both for a claim of no difference; every arm, and
    variance in each, for a relation or estimate. A reference arm the claim does not favour (the
    letter baseline of "head beats baseline") never demotes."""
    out_levels = {}
    for name, a in arms.items():
        if "error" in a or name == "unedited":
            continue
        out_levels[name] = {**levels.above(a), "label": a.get("label", name)}
        v = levels.variance(a)
        if v is not None:
            out_levels[name]["varies"] = v
    difference = any(k in stat for k in ("paired", "test_at", "derived"))
    observed = ["a" if effect > 0 else "b"] if effect != 0 else []
    both = {"a", "b"} <= set(out_levels)
    if difference and both and direction != "none":
        needed = favoured(direction)
    else:
        needed = sorted(out_levels)
    out = {"arms": out_levels, "needed": needed, "needed_variance": [] if difference else sorted(out_levels)}
    if difference and both:
        out["needed_if_contradicted"] = observed
    return out


def room(arms: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Room to move (:func:`.chance.room`) of every arm declared ``unedited: lowers|raises``."""
    out = []
    for name, a in arms.items():
        moves = a.get("unedited")
        if moves in MOVES and "error" not in a:
            out.append({"arm": name, **levels.room(a, moves)})
    return out


def stratified(stat: dict[str, Any], than: float = 0.0) -> dict[str, Any]:
    """The within-strata statistic in place of the pooled one when the two disagree in sign or in
    significance against the claim's boundary ``than`` (the pooled one kept beside it as ``pooled``),
    for every statistic kind that carries a ``stratified`` twin (group gaps and rates, clustered token
    statistics, correlations: :mod:`.strata`). A statistic with only an interval is significant when
    the interval excludes ``than`` (:func:`.verdicts.interval_p`)."""
    st = stat.get("stratified")
    if not isinstance(st, Mapping) or "value" not in st:
        return stat

    def p_of(s: Mapping[str, Any]) -> float:
        return float(s["p_value"]) if s.get("p_value") is not None else verdicts.interval_p(s, than)

    sig = lambda s: p_of(s) < stats.ALPHA  # noqa: E731
    if (st["value"] > than) == (stat["value"] > than) and sig(st) == sig(stat):
        return stat
    pooled = {k: stat[k] for k in ("value", "lo", "hi", "p_value", "n", "test", "source") if k in stat}
    return {**{k: v for k, v in stat.items() if k != "se"},
            **{k: st[k] for k in ("value", "lo", "hi", "se", "p_value", "n", "test") if k in st},
            "source": f"{stat.get('source', '')}, within {st.get('strata')}", "pooled": pooled}


def control_direction(stat: Mapping[str, Any], direction: str, than: float, margin: float | None) -> str:
    """The direction a control is evaluated in: that of the verdict it could demote -- the claim's
    for holds (and for a not-shown row's display), the observed one for contradicted and for a
    claim of no difference."""
    d = verdicts.decide(stat, direction, than, margin)
    effect = float(stat["value"]) - than
    observed = "greater" if effect > 0 else "less" if effect < 0 else direction
    if direction == "none" or d["verdict"] == verdicts.CONTRADICTED:
        return observed
    return direction
