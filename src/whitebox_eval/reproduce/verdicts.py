"""One rule for every claim's verdict (stated in the report as :data:`RULE`).

A claim has a statistic (a paired test, an estimate, a fit coefficient) with its 95%
interval, a direction (``greater`` or ``less`` than a boundary, 0 unless stated; or
``none``: no difference beyond a margin), the preconditions and controls its paper file
declares (:mod:`.claim_checks`) and, within its paper, a Holm-adjusted p-value beside the raw one.
Besides, every claim gets the same rules by construction (:func:`verdict` lists them in order):
its arms against their uninformed levels (:mod:`.chance`), its manipulation checks, its
substance conditions, the child's reliability warnings, controls that explain a holding or a
contradicting effect, a positive control for a claim of no difference.

- **uninformative**: a manipulation failed, no room to move, a precondition failed, a floor
  (the statistic undefined by the data), the favoured arm at chance (on every statistical
  verdict), a control explains the effect, or an equivalence is insensitive (``qualifier`` says
  which, ``reason`` names it);
- **holds**: significant in the claimed direction (p < 0.05); for a claim of no difference,
  the two one-sided tests (TOST) show the difference inside the margin (p < 0.05, i.e. the
  90% interval inside +-margin), on the statistic's own scale;
- **contradicted**: significant the other way; for a claim of no difference, the whole 95%
  interval outside the margin;
- **not shown at this n**: neither, with the smallest effect this n could detect,
  :func:`whitebox_eval.power.minimum_detectable_effect` of the standard error (two-sided
  alpha 0.05, 80% power): more items could settle it;
- **not run** (the child did not run) / **not tested** (it ran, but holds no such statistic).

Where a statistic has no p-value (an interval only), p is the two-sided normal p its
interval implies (:func:`interval_p`): p < 0.05 exactly when the interval excludes the boundary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from whitebox_eval import power, stats

HOLDS = "holds"
NOT_SHOWN = "not shown at this n"
CONTRADICTED = "contradicted"
UNINFORMATIVE = "uninformative"
NOT_RUN = "not run"  # its child run did not run (not at this scale, or failed: the reason is given)
NOT_TESTED = "not tested"  # the child ran but holds no such statistic
VERDICTS = (HOLDS, CONTRADICTED, NOT_SHOWN, UNINFORMATIVE, NOT_RUN, NOT_TESTED)

RULE = ("holds = significant in the claimed direction (p < 0.05; a statistic with only an interval gets the normal p "
        "it implies, below 0.05 exactly when the interval excludes the boundary); contradicted = significant the "
        "other way; not shown at this n = neither, with the smallest effect this n could detect, (z_0.975 + z_0.80) x "
        "SE (two-sided alpha 0.05, 80% power); not run = its child run did not run; not tested = the child ran but "
        "holds no such statistic. A claim of no difference is decided by two one-sided tests (TOST, normal) against its "
        "margin on the statistic's own scale: holds when the 90% interval lies inside +-margin, contradicted when the "
        "whole 95% interval lies outside it (its row names TOST, the difference test beside it, and the smallest "
        "margin this n could show, z_0.95 x SE). Then, for every claim, verdict and statistic kind alike: "
        "uninformative (manipulation failed) = the manipulation the claim is conditional on did not take "
        "(contamination did not raise the in-domain accuracy significantly, an edit moved the answer off the "
        "candidates, fine-tuning did not raise the ID accuracy); uninformative (no room to move) = a claim that an "
        "edit, a training or a mask lowers (raises) a measure whose unedited arm is not significantly away from the "
        "floor (ceiling) it moves toward -- the uninformed level for an accuracy, 0 and 1 for a probability or share, "
        "none for an unbounded measure; uninformative (precondition failed) = a declared precondition or a "
        "reliability warning of the child failed (named); uninformative (floor) = the statistic is undefined by the "
        "child's data: an arm that does not vary, an empty or too small group (named); a substance condition of the "
        "claim significantly false = contradicted, not shown = not shown at this n; uninformative (at chance) = on "
        "every statistical verdict, the arm the claim favours (for holds and not shown; for contradicted, the arm "
        "the observed difference favours; both arms for a claim of no difference or of a weak relation) is not "
        "above what an uninformed answerer scores on the same items -- the better of a constant answer and a "
        "uniform guess over the options, by an exact binomial test (0/1 arms) or a one-sample t-test of the mean "
        "(per-item values) -- or a correlation's arm does not vary; an arm's status is computed once and reads "
        "alike in every claim, and a reference arm the claim does not favour (the letter baseline) never demotes; "
        "every claim declares its arms (a fit or a token measure: answers none); uninformative (control explains) "
        "= a control explains the effect, evaluated in the direction of the verdict it could demote (the claim's "
        "for holds and for a not-shown row, the observed one for contradicted; named with its hypothesis: e.g. "
        "always answering the most frequent letter does as well, the opposite edit moves the same way, random heads "
        "do as well by their rank among >= 20 draws; fewer draws are descriptive, and a control whose own stage the "
        "child did not run -- draws of another edit -- is not run: the verdict says its specificity is untested); "
        "uninformative (insensitive) = a claim of no difference whose positive control (the same statistic between "
        "groups known to differ) does not reach the margin at this n. A pooled statistic over strata (tasks or "
        "categories for group gaps and rates, token position and length bin for clustered token statistics, "
        "categories for correlations) is decided within strata when the two disagree in sign or significance "
        "against the claim's boundary, the pooled one shown beside it: a difference by a permutation test within "
        "strata of the CMH-weighted difference, a correlation by Fisher z with inverse-variance weights n - 3; "
        "paired arms on the same items need no twin (the pooled paired difference is the n-weighted one within "
        "strata, McNemar on pooled pairs the Mantel-Haenszel test). An output that is no answer (off-format: a "
        "top token with no letter or digit, a special token, an article) is counted in a class of its own and "
        "reported, never folded into an error class. Within each paper, Holm's adjustment of the deciding p-values gives a second verdict "
        "beside the raw one (the overview counts both; at chance stays at chance); a control's own test is not "
        "adjusted. Effects of accuracies are in percentage points.")


def _se(stat: Mapping[str, Any]) -> float:
    if stat.get("se") is not None:
        return float(stat["se"])
    return power.standard_error_from_interval(float(stat["lo"]), float(stat["hi"]))


def _value(stat: Mapping[str, Any]) -> float:
    return float(stat["value"] if "value" in stat else stat["diff"])


def interval_p(stat: Mapping[str, Any], than: float = 0.0) -> float:
    """The two-sided normal p of a statistic that has only an interval: SE is the interval's
    half-width on the side of the boundary over z_0.975, so p < 0.05 exactly when the 95%
    interval excludes the boundary (an asymmetric interval keeps its shape)."""
    from scipy.stats import norm

    value, lo, hi = _value(stat), float(stat["lo"]), float(stat["hi"])
    effect = value - than
    half = (value - lo) if effect > 0 else (hi - value)
    if half <= 0:
        return 1.0 if effect == 0 else 0.0
    return float(min(1.0, 2 * norm.sf(abs(effect) / (half / power._z(0.5 + stats.LEVEL / 2)))))


def decide(stat: Mapping[str, Any], direction: str, than: float = 0.0, margin: float | None = None,
           p: float | None = None, alpha: float = stats.ALPHA) -> dict[str, Any]:
    """The statistical verdict alone (no preconditions or controls): holds, contradicted or
    not shown at this n, with the deciding p-value (``p`` overrides it: a Holm-adjusted p)."""

    value = _value(stat)
    effect = value - than
    se = _se(stat)
    mde = power.minimum_detectable_effect(se, alpha) if se > 0 else None
    out: dict[str, Any] = {"effect": effect, "minimum_detectable_effect": mde}
    if direction == "none":
        if margin is None:
            raise ValueError("a claim of no difference needs a margin")
        eq = stats.tost(effect, se, margin, alpha)
        out["equivalence"] = eq.as_dict()
        p_dec = eq.p if p is None else p
        outside = float(stat["lo"]) - than > margin or float(stat["hi"]) - than < -margin
        v = HOLDS if p_dec < alpha else CONTRADICTED if outside else NOT_SHOWN
        out.update(verdict=v, p_value=p_dec, basis="TOST (two one-sided tests, normal) against +-margin")
        return out
    raw = stat.get("p_value")
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        raw = interval_p(stat, than)
        basis = "p from the 95% interval (normal, its half-width on the boundary's side)"
    else:
        basis = "the test's p-value"
    p_dec = float(raw) if p is None else p
    sign = 1 if direction == "greater" else -1
    significant = p_dec < alpha
    v = HOLDS if significant and sign * effect > 0 else CONTRADICTED if significant and sign * effect < 0 else NOT_SHOWN
    out.update(verdict=v, p_value=p_dec, basis=basis, significant=bool(significant))
    return out


def _named(checks: Sequence[Mapping[str, Any]], what: str, verb: str) -> str:
    return "; ".join(f"{what} {c['kind']} {verb}: {c['text']}" for c in checks)


def _demote(out: dict[str, Any], verdict: str, qualifier: str, reason: str) -> dict[str, Any]:
    out.setdefault("statistical_verdict", out["verdict"])
    out["verdict"], out["qualifier"], out["reason"] = verdict, qualifier, reason
    return out


def verdict(stat: Mapping[str, Any], direction: str, than: float = 0.0, margin: float | None = None,
            preconditions: Sequence[Mapping[str, Any]] = (), controls: Sequence[Mapping[str, Any]] = (),
            p: float | None = None, alpha: float = stats.ALPHA, chance: Mapping[str, Any] | None = None,
            manipulation: Sequence[Mapping[str, Any]] = (), substance: Sequence[Mapping[str, Any]] = (),
            sensitivity: Mapping[str, Any] | None = None, room: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The verdict of one claim: :func:`decide`, then, in this order, whatever makes it
    uninformative or decides it otherwise (``reason`` names it, ``qualifier`` says which rule):

    1. a failed manipulation check (``manipulation``: the antecedent of a conditional claim) --
       *uninformative (manipulation failed)*;
    2. no room to move (``room``, :func:`.chance.room`): the unedited measure of a claim that a
       manipulation lowers (raises) it sits at the floor (ceiling) it would move toward --
       *uninformative (no room to move)*; then a failed precondition (declared, or a reliability
       warning the child recorded) --
       *uninformative (precondition failed)*;
    3. the claim's substance (``substance``): significantly on the wrong side -- *contradicted*;
       not shown -- a holding verdict becomes *not shown at this n*;
    4. the uninformed level (``chance``, :mod:`.chance`), on every statistical verdict: holds and
       not shown need the arm the claim favours above its level (``needed``), contradicted the arm
       the observed difference favours (``needed_if_contradicted``); a claim of no difference (or
       of a weak relation) both arms, a correlation variance in both -- else *uninformative (at
       chance)*, never *not shown at this n*;
    5. a control that explains the effect (evaluated in the direction of the verdict it could
       demote: the claim's for holds, the observed one for contradicted) demotes *holds* and
       *contradicted* alike -- *uninformative (control explains)*; a control with too few random
       draws is descriptive, and one whose own stage the child did not run is *not run*
       (both ``specificity untested`` in ``caveats``), never passed nor explaining;
    6. a claim of no difference that holds needs its positive control (``sensitivity``) to reach
       the margin at this n -- else *uninformative (insensitive)*.
    """
    out = decide(stat, direction, than, margin, p, alpha)
    out["caveats"] = []
    failed = [c for c in manipulation if not c.get("passed", False)]
    if failed:
        return _demote(out, UNINFORMATIVE, "manipulation failed", _named(failed, "manipulation check", "failed"))
    stuck = [c for c in room if c.get("room") is False]
    if stuck:
        return _demote(out, UNINFORMATIVE, "no room to move", "; ".join(c["text"] for c in stuck))
    failed = [c for c in preconditions if not c.get("passed", False)]
    if failed:
        return _demote(out, UNINFORMATIVE, "precondition failed", _named(failed, "precondition", "failed"))
    below = [c for c in substance if c.get("state") == "below"]
    unshown = [c for c in substance if c.get("state") not in ("below", "shown")]  # unshown, or not evaluated
    if below:
        return _demote(out, CONTRADICTED, "substance fails", _named(below, "substance", "fails significantly"))
    if unshown and out["verdict"] == HOLDS:
        return _demote(out, NOT_SHOWN, "substance not shown", _named(unshown, "substance", "is not shown"))
    if chance and out["verdict"] in (HOLDS, CONTRADICTED, NOT_SHOWN):
        needed = chance.get("needed", ())
        if out["verdict"] == CONTRADICTED and "needed_if_contradicted" in chance:
            needed = chance["needed_if_contradicted"]
        at = [a for a in needed if chance["arms"].get(a, {}).get("above") is False]
        flat = [a for a in chance.get("needed_variance", ()) if chance["arms"].get(a, {}).get("varies") is False]
        if at or flat:
            why = [chance["arms"][a]["text"] for a in at] + \
                  [f"{chance['arms'][a].get('label', a)}: no variance over its items" for a in flat]
            return _demote(out, UNINFORMATIVE, "at chance", "; ".join(why))
        unknown = [a for a in needed if chance["arms"].get(a, {}).get("above") is None
                   and chance["arms"].get(a, {}).get("applies", True)]  # a measure without answers has none
        if unknown:
            out["caveats"].append("uninformed level not computed: " + "; ".join(chance["arms"][a]["text"] for a in unknown))
    descriptive = [c for c in controls if c.get("descriptive") or c.get("not_run")]
    if descriptive:
        out["caveats"].append("specificity untested: " + "; ".join(
            ("control not run: " if c.get("not_run") else "") + c["text"] for c in descriptive))
    explaining = [c for c in controls if (c.get("explains") or "error" in c)
                  and not c.get("descriptive") and not c.get("not_run")]
    if out["verdict"] in (HOLDS, CONTRADICTED) and explaining:
        return _demote(out, UNINFORMATIVE, "control explains", _named(explaining, "control", "explains the effect"))
    if direction == "none" and out["verdict"] == HOLDS:
        if not sensitivity or not sensitivity.get("reaches"):
            why = sensitivity["text"] if sensitivity else "no positive control at this scale"
            return _demote(out, UNINFORMATIVE, "insensitive", f"positive control: {why}")
    return out


def failed_precondition(preconditions: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The uninformative verdict of a claim whose statistic is undefined because a
    precondition failed (e.g. a group with too few items), or None."""
    failed = [c for c in preconditions if not c.get("passed", False)]
    if not failed:
        return None
    return {"verdict": UNINFORMATIVE, "qualifier": "precondition failed",
            "reason": "; ".join(f"precondition {c['kind']} failed: {c['text']}" for c in failed)}


def floor(reason: str) -> dict[str, Any]:
    """The verdict of a claim whose statistic is undefined by the child's data -- an arm that does
    not vary, an empty group (a floor): *uninformative (floor)* with its reason, in every paper alike."""
    return {"verdict": UNINFORMATIVE, "qualifier": "floor", "reason": reason}


def holm(claims: list[dict[str, Any]]) -> None:
    """Holm's adjustment over one family's deciding p-values (a paper's claims on its base models,
    or on one trained column: :func:`.assemble.paper_content`), each claim's verdict recomputed with its adjusted p (``p_holm``,
    ``verdict_holm``); claims without a statistic, and claims at chance (an arm's uninformed level
    does not depend on p), keep their verdict."""
    tested = [c for c in claims if c.get("p_value") is not None and "statistic" in c]
    for c, adj in zip(tested, stats.holm([c["p_value"] for c in tested]) if tested else []):
        c["p_holm"] = adj
        if c.get("qualifier") == "at chance":  # an arm's uninformed level does not depend on p: Holm keeps it
            continue
        c["verdict_holm"] = verdict(c["statistic"], c["direction"], c["than"], c.get("margin"),
                                             c.get("preconditions", ()), c.get("controls", ()), p=adj,
                                             **(c.get("rules") or {}))["verdict"]
    for c in claims:
        c.setdefault("verdict_holm", c["verdict"])
