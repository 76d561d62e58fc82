"""From finished child runs to the reproduction's content: tables in the papers' layout
(published figure beside ours), a verdict per claim and model, and what did not run.

The result is plain data (written as ``claims.json``); :mod:`.render` words it. Every
number of ours carries its source: the child run and its place in that run's
results.json (or, for a derived test, its samples).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whitebox_eval import power, stats, suites
from whitebox_eval.lazy import resolve
from whitebox_eval.reproduce import claim_checks as checks, claim_rules, strata, trained, values, verdicts, vocabulary
from whitebox_eval.reproduce.plan import Child, Plan, fill, not_tested_at
from whitebox_eval.reproduce.spec import UNREADABLE, Claim, Paper, Table

SCHEMA = 3  # 3: the rules by construction (rules, qualifier, caveats) and evidence.json.gz beside claims.json


class NoChild(Exception):
    """None of the child runs a claim across models needs ran (the reason is the message)."""


@dataclass
class Outcome:
    """A child run after the plan ran: finished (its folder), or not run and why."""

    child: Child
    status: str  # "done" | "failed" | "skipped"
    reason: str | None = None
    folder: str | None = None
    _study: Any = None

    def study(self):
        """The finished run read back, completed by its suite (:func:`whitebox_eval.suites.read`), read once."""
        if self._study is None:
            from whitebox_eval.suites import read

            self._study = read(self.folder)
        return self._study


def _child_env(results: Mapping[str, Any]) -> dict[str, str]:
    """What a child's own results fill in: ``{phase}``, the stages its headline reads (a span run
    fine-tuned first reports ``finetuned/...``, else ``base/...``; results.json ``phase``), and
    ``{setting}``, the reinforcement setting its selection chose, without the head set's name
    (``top10-C1-standard``: stages ``reinforce/key-{setting}``, ``reinforce/shifted-{setting}``)."""
    chosen = str((((results.get("reinforcement") or {}).get("selection") or {}).get("chosen") or {}).get("setting", ""))
    return {"phase": str(results.get("phase", "base")), "setting": chosen.removeprefix("key-")}


def _filled(spec: Any, env: Mapping[str, str], results: Mapping[str, Any] | None = None) -> Any:
    """``spec`` filled from the plan's values (``env``: :attr:`.instances.PaperInstances.env`) and, on
    one child, what its ``results`` fill in (:func:`_child_env`)."""
    return fill(spec, {**env, **({} if results is None else _child_env(results))})


def _cell_from(outcome: Outcome | None, spec: Mapping[str, Any], scale: float, env: Mapping[str, str]) -> dict[str, Any]:
    if outcome is None:
        return {"not_run": "not run at this scale"}
    if outcome.status != "done":
        return {"not_run": outcome.reason or outcome.status, "run": outcome.child.run_id}
    try:
        spec = _filled(spec, env, outcome.study().results)
        if "flips" in spec:  # a count of answers before / after an edit, from the child's samples
            f = checks.flips(spec["flips"], {}, outcome.study().results, outcome.study().samples, "greater")
            when, answer = spec["count"]
            return {"run": outcome.child.run_id, "source": f"samples.jsonl prediction, stages "
                    f"{spec['flips']['before']} / {spec['flips']['after']}", "value": float(f[when].get(answer, 0)),
                    "n": f["n"], "scale": 1.0}
        if spec.get("text"):
            return {"run": outcome.child.run_id, "source": "/".join(map(str, spec["at"])),
                    "text": values.text(outcome.study().results, spec)}
        est = values.estimate(outcome.study().results, spec)
    except values.Missing as e:
        return {"missing": str(e), "run": outcome.child.run_id}
    cell = {"run": outcome.child.run_id, "source": est["source"], "value": est["value"] * scale}
    if "lo" in est:
        cell.update(lo=est["lo"] * scale, hi=est["hi"] * scale, n=est["n"], method=est["method"])
    cell["scale"] = scale
    return cell


def _scale(table: Table, spec: Mapping[str, Any]) -> float:
    if "scale" in spec:
        return float(spec["scale"])
    return 100.0 if table.unit == "percent" else 1.0


def table(paper: Paper, t: Table, plan: Plan, outcomes: Mapping[str, Outcome], models: list[str]) -> dict[str, Any]:
    """One table: its published cells and ours per model of ``models`` (and per column when ours
    follow the published columns)."""
    filled = plan.filled[paper.number].tables[t.id]
    rows = []
    for r, spec in zip(t.rows, filled.rows):
        published = [c if c is None or c == UNREADABLE or t.unit == "text" else float(c) for c in r.published]
        ours: dict[str, list[dict[str, Any]] | dict[str, Any] | None] = {}
        for model in models:
            if r.ours is None or t.ours_by == "model":
                cell = None if r.ours is None else _cell(paper, t, plan, outcomes, spec, model)
            else:  # a cell per column: the row's own per column, or one spec with each column's vars
                cell = [_cell(paper, t, plan, outcomes, s, model) for s in spec]
            ours[_label(plan, model)] = cell
        rows.append({"label": list(r.label), "published": published, "ours": ours,
                     **({"note": r.note} if r.note else {})})
    our_rows = [{"model": model, "label": list(r.label), "ours": [_cell(paper, t, plan, outcomes, s, model) for s in specs],
                 **({"note": r.note} if r.note else {})} for model in models for r, specs in zip(t.ours_rows, filled.our_rows)]
    return {"id": t.id, "cite": t.cite, "title": t.title, "published_model": t.published_model,
            "unit": t.unit, "ours_by": t.ours_by, "columns": [c["name"] for c in t.columns],
            "label_header": list(t.label_header), "rows": rows, "our_rows": our_rows,
            **({"ours_note": t.ours_note} if t.ours_note else {})}


def _cell(paper: Paper, t: Table, plan: Plan, outcomes: Mapping[str, Outcome], spec: Any, model: str) -> dict[str, Any]:
    """One of our cells of table ``t``: ``spec`` (an ``ours`` entry as the plan filled it, None for an
    empty cell), read from its experiment's child on ``model``."""
    if spec is None:
        return {"none": True}
    o = _outcome(plan, outcomes, paper, spec["experiment"], model)
    return _cell_from(o, {k: v for k, v in spec.items() if k != "experiment"}, _scale(t, spec), plan.filled[paper.number].env)


def _child(plan: Plan, paper: Paper, expid: str, model: str) -> Child | None:
    """``paper``'s child for experiment ``expid`` on ``model`` (None: the plan has none)."""
    return next((c for c in plan.children if c.model == model and (paper.number, expid) in c.uses), None)


def _outcome(plan: Plan, outcomes: Mapping[str, Outcome], paper: Paper, expid: str, model: str) -> Outcome | None:
    """What became of ``paper``'s child for experiment ``expid`` on ``model`` (None: the plan has none)."""
    child = _child(plan, paper, expid, model)
    return None if child is None else outcomes.get(child.run_id)


def _claim_models(paper: Paper, c: Claim, plan: Plan, models: list[str]) -> list[str]:
    """The models a claim is asked of: the base models, and a trained column only where the claim's
    experiment ran on it (a column trained for one experiment answers no other's claims)."""
    return [m for m in models if m in plan.models or _child(plan, paper, c.experiment, m) is not None]


def _label(plan: Plan, model: str) -> str:
    """How ``model`` is shown: a trained model's column (``<base> + <label>``), else its name."""
    return next((c.label for c in plan.children if c.model == model and c.label), model)


def _statistic(claim: Claim, outcome: Outcome, suite: str) -> dict[str, Any]:
    stat = claim.stat
    results = outcome.study().results
    kind = vocabulary.kind(stat, f"claim {claim.id}", suite).kind
    if kind == "derived":
        t = vocabulary.compute(stat, outcome.study(), suite)
        if "values" in stat:  # the two sides as the child reports them (shown beside, where it has them)
            for side in ("a", "b"):
                if side in stat["values"]:
                    try:
                        t[f"side_{side}"] = values.estimate(results, stat["values"][side])["value"]
                    except values.Missing:
                        pass
        return t
    if kind in ("paired", "test_at"):
        return dict(values.test(results, {"paired": stat["paired"]} if kind == "paired" else {"at": stat["test_at"]}))
    est = values.estimate(results, stat)
    if "lo" not in est:
        raise values.Missing(f"{est['source']} has no interval in the child run")
    return {**est, "p_value": None, "test": f"95% {est.get('method') or ''} interval".replace("  ", " ")}


def _arms(c: Claim, stat: Mapping[str, Any], results: Mapping[str, Any], samples: list) -> dict[str, dict[str, Any]]:
    """The claim's two sides on the same items: declared ``arms``, else those the statistic carries; a
    declared arm holding only roles (``unedited``, ``measure``, ``label``) marks the statistic's own."""
    arms: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (stat.get("arms") or {}).items()}
    for name, spec in c.arms.items():
        if set(spec) <= {"unedited", "measure", "label"} and name in arms:
            arms[name].update(spec)
            continue
        try:
            arms[name] = checks.arm(results, samples, spec)
        except values.Missing as e:
            arms[name] = {"label": spec.get("label", name), "error": str(e)}
    if stat.get("test") in checks.PAIRED_TESTS:
        checks.on_shared_items(arms)
    return arms


def _checks(c: Claim, stat: Mapping[str, Any], arms: Mapping[str, Any], results: Mapping[str, Any],
            samples: list, direction: str | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Preconditions, and controls in ``direction``, that of the verdict they could demote
    (:func:`.claim_rules.control_direction`), each naming the hypothesis it tested."""
    pre = [checks.evaluate(vocabulary.checks("preconditions"), spec, arms, results, stat) for spec in c.preconditions]
    d = direction or c.direction
    ctl = []
    for spec in c.controls:
        r = checks.evaluate(vocabulary.checks("controls"), spec, arms, results, samples, d)
        if "error" not in r and not r.get("not_run") and r["kind"] != "flips":
            r["hypothesis"] = (f"the claim's arm {'above' if d != 'less' else 'below'} the control "
                               f"({'the claimed' if d == c.direction else 'the observed'} direction)")
            r["text"] = f"{r['text']} [tested: {r['hypothesis']}]"
        ctl.append(r)
    return pre, ctl



def manipulation(paper: Paper, c: Claim, plan: Plan, outcomes: Mapping[str, Outcome], results: Mapping[str, Any],
                 samples: list, child: Child | None) -> list[dict[str, Any]]:
    """The manipulation checks claim ``c`` rests on, evaluated: those it is conditional on
    (:func:`.plan.manipulations`, decided by the plan) on its child's results, and, for a child on a trained model
    (:mod:`.trained`), its producer's declared checks (its finetune experiments' ``manipulation``)
    on the producer's results; a producer that did not finish fails the check."""
    run = vocabulary.checks("manipulation")
    mine = plan.filled[paper.number]
    specs = _filled(mine.claims[c.id].manipulations, mine.env, None if child is None else results)
    return ([checks.evaluate(run, spec, results, samples) for spec in specs]
            + training_checks(paper, plan, outcomes, child))



def training_checks(paper: Paper, plan: Plan, outcomes: Mapping[str, Outcome], child: Child | None) -> list[dict[str, Any]]:
    """For a child on a trained model (:mod:`.trained`), its producer's declared checks (its finetune experiments'
    ``manipulation``) on the producer's results, a producer that did not finish failing the check, then the
    column's own (:func:`.trained.own_checks`) on its own results; none for a child on a base model."""
    pid = child.producer if child is not None else None
    if pid is None:
        return []
    o = outcomes.get(pid)
    if o is None or o.status != "done":
        return [{"kind": "trained", "passed": False,
                 "text": f"its training {pid} did not finish" + (f" ({o.reason})" if o is not None and o.reason else "")}]
    producer = next(ch for ch in plan.children if ch.run_id == pid)
    specs = [s for p, e in producer.uses if p == paper.number for s in paper.experiment(e).manipulation]
    run, study, mine = vocabulary.checks("manipulation"), o.study(), outcomes.get(child.run_id)
    own = trained.own_checks(paper, plan, child) if mine is not None and mine.status == "done" else []
    return ([checks.evaluate(run, s, study.results, study.samples) for s in specs]
            + [checks.evaluate(run, s, mine.study().results, mine.study().samples) for s in own])


def failed_training(paper: Paper, plan: Plan, outcomes: Mapping[str, Outcome], child: Child | None) -> dict[str, Any] | None:
    """The verdict of a claim whose statistic is undefined (a floor) on a trained column whose training
    missed its check: *uninformative (manipulation failed)*, as with a statistic (that the model did not
    learn comes before what it then measured); None otherwise."""
    failed = [m for m in training_checks(paper, plan, outcomes, child) if not m.get("passed")]
    if not failed:
        return None
    return {"rules": {"manipulation": failed}, "verdict": verdicts.UNINFORMATIVE, "qualifier": "manipulation failed",
            "reason": "; ".join(f"manipulation check {m['kind']} failed: {m['text']}" for m in failed)}


def trained_missed(paper: Paper, plan: Plan, outcomes: Mapping[str, Outcome], child: Child | None) -> dict[str, Any] | None:
    """The verdict of a claim on a trained column whose own child did not run, where the training finished
    and missed its check: *uninformative (manipulation failed)*, as it would read had the child run (its
    statistic cannot decide it); None where the training passed or did not finish (then: not run)."""
    pid = child.producer if child is not None else None
    o = outcomes.get(pid) if pid is not None else None
    if o is None or o.status != "done":
        return None
    return failed_training(paper, plan, outcomes, child)


def _sensitivity(paper: Paper, c: Claim, plan: Plan, outcomes: Mapping[str, Outcome], model: str) -> dict[str, Any] | None:
    """A claim of no difference: its positive control (the same statistic between groups known to
    differ, ``positive_control``) reaches the margin at this n when |value| >= margin and p < 0.05."""
    pc = c.positive_control
    if c.direction != "none" or not pc:
        return None
    if "none" in pc:
        return {"reaches": False, "text": f"none at this scale ({pc['none']})"}
    expid = pc.get("experiment", c.experiment)
    o = _outcome(plan, outcomes, paper, expid, model)
    if o is None or o.status != "done":
        return {"reaches": False, "text": f"its child run {expid} did not run"}
    try:
        spec = _filled({k: v for k, v in pc.items() if k != "experiment"}, plan.filled[paper.number].env, o.study().results)
        probe = dataclasses.replace(c, stat={k: v for k, v in spec.items() if k != "label"})
        t = _statistic(probe, o, paper.experiment(expid).suite)
    except values.Missing as e:
        return {"reaches": False, "text": f"not computed ({e})"}
    p = t.get("p_value")
    p = verdicts.interval_p(t) if p is None else float(p)
    reaches = abs(float(t["value"])) >= float(c.margin) and p < stats.ALPHA
    return {"reaches": reaches, "value": float(t["value"]), "lo": t.get("lo"), "hi": t.get("hi"), "p_value": p,
            "test": t.get("test"), "n": t.get("n"),
            "text": f"{spec.get('label', 'positive control')}: {float(t['value']):+.3g} [{t.get('lo', float('nan')):+.3g}, "
                    f"{t.get('hi', float('nan')):+.3g}], {t.get('test')} {stats.fmt_p(p)}; margin {c.margin:g}"
                    + ("" if reaches else " -- it does not reach the margin at this n: the measure cannot show a difference of that size")}


def _claim_filled(c: Claim, env: Mapping[str, str], results: Mapping[str, Any] | None = None) -> Claim:
    """``c`` with its templates filled (:func:`_filled`; its positive control from its own child's, :func:`_sensitivity`)."""
    return dataclasses.replace(c, **{k: _filled(getattr(c, k), env, results) for k in ("stat", "arms")},
                               **{k: tuple(_filled(list(getattr(c, k)), env, results)) for k in
                                  ("preconditions", "controls", "substance", "manipulation")})


def claim(paper: Paper, c: Claim, plan: Plan, outcomes: Mapping[str, Outcome], model: str) -> dict[str, Any]:
    """The verdict of claim ``c`` for ``model`` (or across models), with its arms, unit,
    preconditions and controls, as the plan decided it (:mod:`.instances`); its placeholders filled
    once, from the plan's values and (on one child) what its child's results fill in (:func:`_filled`)."""
    out: dict[str, Any] = {"id": c.id, "claim": c.claim, "cite": c.cite, "model": model,
                           "direction": c.direction, "published": c.published, "headline": c.headline,
                           "effect_unit": c.effect_unit,
                           "declared": {"preconditions": [x["kind"] for x in c.preconditions],
                                        "controls": [x["kind"] for x in c.controls]}}
    if c.margin is not None:
        out["margin"] = c.margin
    if c.differs:
        out["differs"] = c.differs
    than = float(c.stat.get("than", 0.0))
    out["than"] = than
    filled = plan.filled[paper.number].claims[c.id]
    if (why := filled.not_tested) is not None:
        o = None if c.across_models else _outcome(plan, outcomes, paper, c.experiment, model)
        ran = o is not None and o.status == "done"  # not run = its child did not run; not tested = it ran without it
        return {**out, **({"run": o.child.run_id} if ran else {}),
                "verdict": verdicts.NOT_TESTED if ran else verdicts.NOT_RUN,
                "reason": why if ran else not_tested_at(paper, c, plan.scale, verdicts.NOT_RUN)}
    results: Mapping[str, Any] = {}
    samples: list = []
    trained_on = None if c.across_models else _child(plan, paper, c.experiment, model)  # its training decides a floor
    try:
        if c.across_models:
            c = _claim_filled(c, plan.filled[paper.number].env)
            stat = _across_models(paper, c, plan, outcomes)
        else:
            o = _outcome(plan, outcomes, paper, c.experiment, model)
            if o is None:
                return {**out, "verdict": verdicts.NOT_RUN, "reason": "its experiment does not run at this scale"}
            out.update(run=o.child.run_id, model=o.child.label or model)
            if o.status != "done":  # its training finished and missed its check: that decides, run or not
                return {**out, **(trained_missed(paper, plan, outcomes, trained_on)
                                  or {"verdict": verdicts.NOT_RUN, "reason": o.reason or o.status})}
            results, samples = o.study().results, o.study().samples
            c = _claim_filled(c, plan.filled[paper.number].env, results)
            stat = _statistic(c, o, paper.experiment(c.experiment).suite)
    except NoChild as e:
        return {**out, "verdict": verdicts.NOT_RUN, "reason": str(e)}
    except values.TooFew as e:  # a refusal keeps what its statistic reports beside it (e.beside)
        if failed := failed_training(paper, plan, outcomes, trained_on):
            return {**out, **e.beside, **failed}
        pre, _ = _checks(c, {"groups": e.groups}, {}, results, samples)
        failed = verdicts.failed_precondition(pre)
        return {**out, **e.beside, "preconditions": pre, **verdicts.floor(failed["reason"] if failed else str(e))}
    except values.Floor as e:
        return {**out, **e.beside, **(failed_training(paper, plan, outcomes, trained_on) or verdicts.floor(str(e)))}
    except values.Missing as e:
        return {**out, **e.beside, "verdict": verdicts.NOT_TESTED, "reason": str(e)}
    arms = _arms(c, stat, results, samples)
    stat = claim_rules.stratified(strata.stratify(stat, c.stat.get("strata"), arms, samples), than)
    if c.unit:
        try:
            out["unit"] = checks.unit(results, c.unit)
        except values.Missing as e:
            out["unit"] = f"n/a ({e})"
    effect = float(stat["value"]) - than
    pre, ctl = _checks(c, stat, arms, results, samples, claim_rules.control_direction(stat, c.direction, than, c.margin))
    if not c.across_models:
        pre += checks.reliability(results)
    rules = {"chance": claim_rules.chance(c.stat, arms, c.direction, effect), "room": claim_rules.room(arms),
             "manipulation": manipulation(paper, c, plan, outcomes, results, samples,
                                          None if c.across_models else o.child),
             "substance": [checks.evaluate(vocabulary.checks("substance"), {"kind": "substance", **x}, results) for x in c.substance],
             "sensitivity": _sensitivity(paper, c, plan, outcomes, model)}
    v = verdicts.verdict(stat, c.direction, than, c.margin, pre, ctl, **rules)
    out["rules"] = rules
    out["statistic"] = {k: stat[k] for k in ("value", "lo", "hi", "p_value", "n", "test", "source", "se", "ci_method",
                                             "b", "c") if k in stat}
    for extra in ("side_a", "side_b", "r2", "points", "skipped", "groups", "subset_size", "tokens", "observations", "runs", "scheme",
                  "pooled", "stratified", "strata_note", "off_format"):
        if extra in stat:
            out["statistic"][extra] = stat[extra]
    out.update(arms=arms, preconditions=pre, controls=ctl, **v)
    effect = c.published.get("effect")
    if isinstance(effect, int | float) and v["minimum_detectable_effect"] is not None:
        out["published_effect_detectable"] = bool(abs(effect) >= v["minimum_detectable_effect"])
    return out


def _across_models(paper: Paper, c: Claim, plan: Plan, outcomes: Mapping[str, Outcome]) -> dict[str, Any]:
    studies, labels, missing = [], [], []
    for model in (m for m in plan.filled[paper.number].models if m in plan.models):  # the law is over base models
        for expid in c.stat["experiments"]:
            o = _outcome(plan, outcomes, paper, expid, model)
            if o is None or o.status != "done":
                missing.append(f"{model} {expid}: {'not run' if o is None else o.reason}")
                continue
            studies.append(o.study())
            labels.append(f"{model} / {expid}")
    if not studies:
        raise NoChild(f"none of its {len(missing)} child runs ran: {missing[0]}")
    t = vocabulary.across(c.stat, studies, labels, paper.experiment(c.stat["experiments"][0]).suite)
    t["runs"] = [Path(s.folder).name for s in studies]
    if missing:
        t.setdefault("skipped", []).extend(missing)
    return t


def figures(paper: Paper, plan: Plan, outcomes: Mapping[str, Outcome]) -> list[dict[str, Any]]:
    """What the child runs hold for the report's figures besides the claims: each finished
    child's own, from its suite's record (``figures``: mcqa's head heatmaps, span's
    reference-attention maps), paths relative to the reproduction folder."""
    out: list[dict[str, Any]] = []
    for ch in plan.children:
        uses = [e for p, e in ch.uses if p == paper.number]
        o = outcomes.get(ch.run_id)
        if not uses or o is None or o.status != "done" or not o.folder:
            continue
        record = suites.SUITES.get(ch.suite)
        if record is None or record.figures is None:
            continue
        for f in resolve(record.figures)(Path(o.folder), f"runs/{ch.run_id}"):
            out.append({"kind": f["kind"], "model": ch.model, "experiment": uses[0], "run": ch.run_id,
                        **{k: v for k, v in f.items() if k != "kind"}})
    return out


def paper_content(paper: Paper, plan: Plan, outcomes: Mapping[str, Outcome]) -> dict[str, Any]:
    """Everything about one paper: its runs, tables, claims, scaled-down parts, what did not run."""
    runs = []
    for ch in plan.children:
        uses = [e for p, e in ch.uses if p == paper.number]
        if not uses:
            continue
        o = outcomes.get(ch.run_id)
        runs.append({"run": ch.run_id, "model": ch.label or ch.model, "experiments": uses,
                     "status": o.status if o else "not run", **({"reason": o.reason} if o and o.reason else {})})
    models = plan.filled[paper.number].models
    claims = []
    for c in paper.claims:
        for model in (["all"] if c.across_models else _claim_models(paper, c, plan, models)):
            claims.append(claim(paper, c, plan, outcomes, model))
    trained = {ch.label for ch in plan.children if ch.label} | {ch.model for ch in plan.children if ch.label}
    families: dict[str, list[dict[str, Any]]] = {}
    for c in claims:  # one family per paper x model variant: the base models, and each trained column
        if c["model"] in trained:
            c["holm_family"] = _label(plan, c["model"])
        families.setdefault(c.get("holm_family", ""), []).append(c)
    for family in families.values():
        verdicts.holm(family)
    scaled = [{"experiment": e.id, "title": e.title, "differs": e.differs_at(plan.scale)}
              for e in paper.experiments if e.differs_at(plan.scale) and e.id in plan.filled[paper.number].runs_at]
    not_run = [{"what": n.what, "cite": n.cite, "reason": n.reason}
               for n in paper.not_run if plan.scale in n.scales]
    return {"number": paper.number, "short": paper.short, "title": paper.title, "summary": paper.summary,
            "models": [_label(plan, m) for m in models], "runs": runs,
            "tables": [table(paper, t, plan, outcomes, models) for t in paper.tables],
            "claims": claims, "figures": figures(paper, plan, outcomes), "scaled_down": scaled, "not_run": not_run}


def content(plan: Plan, outcomes: Mapping[str, Outcome]) -> dict[str, Any]:
    """claims.json: the rule, the plan's shape and every paper's content (no times)."""
    return {"schema": SCHEMA, "scale": plan.scale, "models": list(plan.models),
            "rule": verdicts.RULE, "alpha": stats.ALPHA, "power": power.POWER,
            "papers": [paper_content(p, plan, outcomes) for p in plan.papers]}
