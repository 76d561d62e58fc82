"""The plan of a reproduction: which child runs, on which models, how many items, how long.

A child run is named by its settings alone (suite, mode, model and every setting, data
paths included): ``<suite>-<model>-<task>-<hash>``. Two papers (or two calls) that need
the same run get the same name, so it is run once and reused. A child on a trained model
(:mod:`.trained`) has the producer's :func:`run_ref` as its model: it is planned after its producer,
named by that reference (the same training declared twice is one producer, its consumers one run),
and shown as ``<base> + <label>``.

Which models each paper's experiments run on (:func:`models_for`), first match: ``--model PAPER=ID`` (that paper), ``--model ID`` (every paper), the
paper's own models at ``--scale paper`` (``models:`` in its YAML, an experiment's subset), the
bundled models. ``--models-root DIR`` maps a hub id ``org/name`` (or ``org/name@revision``) to
a local folder: the path ``DIR/models.yaml`` names for it (relative to DIR), else
``DIR/org--name`` (``DIR/org--name@revision``) when that folder exists; a model the paper names
without a hub id runs when ``DIR/models.yaml`` maps its name. A child keeps the hub id
as its name, so moving the folder changes nothing but where the weights are read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.hub_sources import MAPPING_FILE, local_folder, models_root  # noqa: F401 (one rule for every command)
from whitebox_eval.reproduce import costs, spec
from whitebox_eval.reproduce.instances import CHILD_PLACEHOLDERS, ClaimInstance, PaperInstances, TableInstance
from whitebox_eval.reproduce.spec import Claim, Experiment, Paper, Table

__all__ = ["DEFAULT_MODELS", "Child", "Plan", "build", "needed_data", "run_name"]
NEEDS_CODE_EXECUTION = ("it is scored by running the model's code, HumanEval's tests: give --allow-code-execution to "
                        "run it, each completion in a subprocess with a time limit, no network, a temporary folder")
"""Why a child whose settings allow code execution is not run without the flag."""
DEFAULT_MODELS = ("smollm2-135m", "gemma3-270m")
RUN_REF = re.compile(r"\{run:([^{}]+)\}")  # a :func:`run_ref`, the run id its group


def models_for(paper: Paper, exp: Experiment, scale: str, every: Sequence[str],
               per: dict[str, list[str]]) -> list[tuple[str, str | None]]:
    """(model, why it does not run or None) for each model ``exp`` of ``paper`` runs on."""
    if per.get(paper.number):
        return [(m, None) for m in per[paper.number]]
    if every:
        return [(m, None) for m in every]
    if scale == "paper" and paper.models:
        return [(m.id, None) if m.id else (m.name, f"no hub id: {m.ambiguous}") for m in models_of(paper, exp)]
    return [(m, None) for m in DEFAULT_MODELS]


def cite(paper: Paper, model: str) -> str:
    """``model`` as the paper names it, with the table or section naming it (empty when not one of its own)."""
    for m in paper.models:
        if model in (m.id, m.name):
            text = f"{m.name}: {m.cite}"
            return text + (f"; ambiguous: {m.ambiguous}" if m.ambiguous else "")
    return ""


def producer_of(model: str) -> str | None:
    """The run id of the child that trained ``model`` when it is a :func:`run_ref` (a trained column), else None."""
    return m.group(1) if (m := RUN_REF.fullmatch(model)) else None


# ------------------------------------------------------------------------ a paper's templates, expanded


def fill(value: Any, env: dict[str, Any]) -> Any:
    """``"{name}"`` alone becomes ``env[name]`` (its type kept); ``{name}`` inside a longer
    string is formatted; lists, tuples and dicts are filled item by item."""
    if isinstance(value, str):
        whole = re.fullmatch(r"\{([a-z0-9_.-]+)\}", value)
        if whole:
            if whole.group(1) not in env:
                raise WhiteboxError(f"no value for {{{whole.group(1)}}}")
            return env[whole.group(1)]

        def one(m: re.Match) -> str:
            if m.group(1) not in env:
                raise WhiteboxError(f"no value for {{{m.group(1)}}} in {value!r}")
            return str(env[m.group(1)])

        return re.sub(r"\{([a-z0-9_.-]+)\}", one, value)
    if isinstance(value, list | tuple):
        return [fill(v, env) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, env) for k, v in value.items()}
    return value


def scale_named(exp: Experiment, scale: str) -> str:
    """The scale whose settings ``exp`` runs at ``scale``: itself when named, else its fallback."""
    return scale if scale in exp.scales else spec.FALLBACK.get(scale, scale)


def points(exp: Experiment, scale: str) -> list[dict[str, Any]]:
    """The matrix points ``exp`` runs at ``scale`` (one empty point without a matrix)."""
    scale = scale_named(exp, scale)
    matrix = dict(exp.matrix)
    matrix.update((exp.scales.get(scale) or {}).get("matrix", {}))
    if scale not in exp.scales:
        return []
    names = list(matrix)
    out = []
    for values in itertools.product(*(matrix[n] for n in names)):
        point: dict[str, Any] = {}
        for name, value in zip(names, values):
            if isinstance(value, dict):  # {id: ..., more vars...}: the id names the point
                point.update({k: v for k, v in value.items() if k != "id"})
                point[name] = value["id"]
            else:
                point[name] = value
        out.append(point)
    return out


def settings_for(exp: Experiment, scale: str, point: dict[str, Any], data: dict[str, str],
                 runs: dict[str, str] | None = None, model: str | None = None) -> dict[str, Any]:
    """``exp``'s suite settings at ``scale``, matrix ``point`` and on ``model`` (the scale's ``by_model``
    entry over the scale's), data paths filled in, and ``{run.EXPERIMENT}`` with ``runs[EXPERIMENT]`` (an
    earlier child's run folder of the paper on the same model, as the plan names it: :func:`run_ref`)."""
    at = exp.scales.get(scale_named(exp, scale)) or {}
    merged = {**exp.settings, **{k: v for k, v in at.items() if k not in spec.SCALE_KEYS}, **(at.get("by_model") or {}).get(model, {})}
    env = {f"data.{k}": v for k, v in data.items()}
    env.update({f"run.{k}": v for k, v in (runs or {}).items()})
    env.update({k: fill(v, env) for k, v in point.items() if k != "data"})
    return {k: fill(v, env) for k, v in merged.items()}


def models_of(paper: Paper, exp: Experiment) -> list[spec.PaperModel]:
    """The paper's models ``exp`` runs at --scale paper (a ``named_only`` model only where named)."""
    if exp.models:
        return [m for m in paper.models if m.name in exp.models or m.id in exp.models]
    return [m for m in paper.models if not m.named_only]


def saes_of(paper: Paper, model: str) -> spec.PaperSAE | None:
    """The released SAEs ``paper`` read for ``model`` (its name or hub id), or None."""
    names = {model} | {m.name for m in paper.models if m.id == model} | {m.id for m in paper.models if m.name == model}
    return next((s for s in paper.saes if s.model in names), None)


@dataclass
class Child:
    """One child run: a suite study with fixed settings on one model."""

    run_id: str
    suite: str
    mode: str | None
    model: str
    settings: dict[str, Any]
    uses: list[tuple[str, str]] = field(default_factory=list)  # (paper number, experiment id)
    items: int = 0
    seconds: float = 0.0
    skip: str | None = None  # why this model does not run it (known before running)
    source: str | None = None  # the local folder a hub id's weights are read from (--models-root)
    gpu_seconds: float | None = None  # estimated on a GPU from the model's shapes (None: shapes unknown)
    label: str | None = None  # a trained model's column, "<base> + <label>" (its model is the producer's run_ref)

    @property
    def load(self) -> str:
        """What the child loads: its local folder, else the model as named."""
        return self.source or self.model

    @property
    def producer(self) -> str | None:
        """The run id of the child that trained this child's model (its model a :func:`run_ref`), or None."""
        return producer_of(self.model)

    def describe(self) -> str:
        what = self.suite + (f" {self.mode}" if self.mode else "")
        task = self.settings.get("task") or self.settings.get("tasks") or self.settings.get("source_task") or ""
        shots = self.settings.get("shots")
        return (f"{what} {self.label or self.model} {_short_task(str(task))}"
                + (f" {shots}-shot" if isinstance(shots, int) else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "suite": self.suite, "mode": self.mode, "model": self.model,
                "settings": self.settings, "uses": [list(u) for u in self.uses], "items": self.items,
                "estimated_seconds": round(self.seconds), "skip": self.skip, "source": self.source,
                "estimated_gpu_seconds": None if self.gpu_seconds is None else round(self.gpu_seconds),
                **({"label": self.label} if self.label else {})}


@dataclass
class Plan:
    papers: list[Paper]
    models: list[str]  # the base models (a trained column's model is its producer's run_ref, not listed)
    scale: str
    data: dict[str, str]
    children: list[Child]
    filled: dict[str, PaperInstances] = field(default_factory=dict)  # by paper number: its templates filled (:func:`instances`)

    @property
    def items(self) -> int:
        return sum(c.items for c in self.children if c.skip is None)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.children if c.skip is None)

    def models_for(self, paper: str) -> list[str]:
        """The models ``paper``'s children run on, in plan order."""
        return list(dict.fromkeys(c.model for c in self.children if any(p == paper for p, _ in c.uses)))

    def to_dict(self) -> dict[str, Any]:
        """What must match for ``--resume`` (no times, no machine facts)."""
        return {"papers": [p.number for p in self.papers], "models": list(self.models), "scale": self.scale,
                "data": dict(sorted(self.data.items())),
                "children": [{k: v for k, v in c.to_dict().items()
                              if k not in ("estimated_seconds", "estimated_gpu_seconds", "source")}
                             for c in self.children]}

    def lines(self) -> list[str]:
        """The plan as printed before any work starts."""
        who = (f"{len(self.models)} models (per paper below)" if self.scale == "paper" and len(self.models) > 3
               else ", ".join(self.models))
        head = (f"reproduce {', '.join(p.name for p in self.papers)} at scale {self.scale} on "
                f"{who}: {sum(c.skip is None for c in self.children)} runs, "
                f"{self.items:,} items, estimated {costs.duration(self.seconds)} "
                f"({costs.BASIS})")
        out = [head]
        for i, c in enumerate(self.children, 1):
            used = ", ".join(f"{p}:{e}" for p, e in c.uses)
            if c.skip:
                out.append(f"  [{i}/{len(self.children)}] {c.describe()}: not run ({c.skip})")
            else:
                out.append(f"  [{i}/{len(self.children)}] {c.describe()}: {c.items:,} items, "
                           f"~{costs.duration(c.seconds)}  ({used})")
        return out + (self.paper_lines() + self.sae_lines() if self.scale == "paper" else []) + self.claim_lines()

    def claim_lines(self) -> list[str]:
        """What the plan says about the claims besides the child runs: per claim, the rules it is
        decided under that a reader should know before the run -- the manipulation it is conditional
        on, the positive control of a claim of no difference, the strata of a pooled comparison, its
        substance condition -- and every claim the scale cannot test, with the reason."""
        out = [f"claims at scale {self.scale} (every arm is also tested against its uninformed level):"]
        for p in self.papers:
            for c in p.claims:
                why = not_tested_at(p, c, self.scale)
                notes = [why] if why else [f"conditional on manipulation {m['kind']} ({m.get('label', '')})"
                                           for m in manipulations(p, c)]
                if not why and c.direction == "none":
                    pc = c.positive_control or {}
                    notes.append(f"positive control: {pc['none']}" if "none" in pc else
                                 f"positive control: {pc.get('label') or pc}")
                if not why and c.stat.get("strata"):
                    strip = c.stat["strata"].get("strip")
                    notes.append(f"strata: {c.stat['strata'].get('field')}" + (f" without {', '.join(strip)}" if strip else ""))
                notes += [] if why else [f"substance: {sub.get('label', sub['stat'])} >= {sub['value']}" for sub in c.substance]
                if notes:
                    out.append(f"  {p.number} {c.id}: " + "; ".join(notes))
        return out

    def sae_lines(self) -> list[str]:
        """The released SAEs each paper read (``saes:``), read at this scale, and where a local copy is."""
        from whitebox_eval.models.hub_sources import cached_snapshot
        from whitebox_eval.models.load_options import LOAD

        root = models_root(LOAD.models_root)
        out = []
        for p in self.papers:
            for s in p.saes:
                first, last = s.ids.format(layer=0), s.ids.format(layer=s.layers - 1)
                where = "no local copy: downloaded from the hub when reachable"
                if s.repo and (found := local_folder(s.repo, root) or cached_snapshot(s.repo, None)):
                    where = f"local copy {found}"
                out.append(f"SAEs of paper {p.name}, {s.model}: saelens:{s.release}/{first} .. {last} ({s.layers} "
                           f"layers, {s.hook}; {s.cite}); {where}")
        return out

    def paper_lines(self) -> list[str]:
        """Per paper: its models (with the table naming them), the data it needs, items and GPU time."""
        from whitebox_eval.reproduce.data import HUB_IDS

        flops, basis = costs.throughput()
        out = [f"GPU estimate per paper ({basis}; {costs.__name__.rsplit('.', 1)[-1]}.py states the rule):"]
        for p in self.papers:
            mine = [c for c in self.children if c.skip is None and any(q == p.number for q, _ in c.uses)]
            known = [c.gpu_seconds for c in mine if c.gpu_seconds is not None]
            unknown = sorted({c.model for c in mine if c.gpu_seconds is None})
            hours = sum(known) / 3600
            out.append(f"paper {p.name}: {len(mine)} runs, {sum(c.items for c in mine):,} items, ~{hours:,.1f} GPU hours "
                       f"({costs.duration(sum(known))})"
                       + (f" (no shapes for {', '.join(unknown)}: not counted)" if unknown else ""))
            for m in self.models_for(p.number):
                runs = [c for c in self.children if c.model == m and any(q == p.number for q, _ in c.uses)]
                skips = {c.skip for c in runs if c.skip}
                h = sum(c.gpu_seconds or 0 for c in runs if c.skip is None) / 3600
                where = next((c.source for c in runs if c.source), None)
                out.append(f"  model {m}" + (f" [{cite(p, m)}]" if cite(p, m) else "")
                           + (f": not run ({'; '.join(sorted(skips))})" if skips and len(skips) == len(runs) else
                              f": {len(runs)} runs, ~{costs.duration(h * 3600)} on the GPU") + (f", from {where}" if where else ""))
            needed = needed_data([p], self.scale)
            for name in needed:
                given = f"; given: {self.data[name]}" if name in self.data else ""
                out.append(f"  data {name}: --data {name}=PATH (hub: {HUB_IDS.get(name, 'none')}{given})")
        return out


def _short_task(task: str) -> str:
    """The task with its file's name only (:attr:`TaskSpec.short`); another suite's task names stay as they are."""
    from whitebox_eval.tasks.spec import TaskSpec

    return TaskSpec.from_config({"task": task}).short


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:40] or "run"


def run_name(suite: str, mode: str | None, model: str, settings: dict[str, Any], label: str | None = None) -> str:
    """The child's folder name: readable parts (``label``: a trained model's column, for its model
    part) and a hash of everything that sets its numbers."""
    canonical = json.dumps({"suite": suite, "mode": mode, "model": model, "settings": settings},
                           sort_keys=True, default=str, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:10]
    task = settings.get("task") or settings.get("tasks") or settings.get("source_task") or ""
    model_part = _slug(label or (Path(model).name if ("/" in model or "\\" in model) else model))
    parts = [suite] + ([mode] if mode else []) + [model_part, _slug(_short_task(str(task)))]
    return "-".join(p for p in parts if p) + "-" + digest


def build(papers: list[Paper], models: list[str], scale: str, data: dict[str, str], *,
          per_paper: dict[str, list[str]] | None = None, models_root: Path | None = None,
          allow_code_execution: bool = False) -> Plan:
    """Every child run of ``papers`` at ``scale`` (shared children once), each experiment on the
    models :func:`models_for` gives (``models``: for every paper; ``per_paper``: by
    paper number), a model's children together (one model in memory at a time); a child that runs
    the model's code is planned as not run unless ``allow_code_execution``."""
    todo: list[tuple[str, str | None, Paper, Experiment, dict]] = []
    for paper in papers:
        for exp in paper.experiments:
            for model, why in models_for(paper, exp, scale, models, per_paper or {}):
                todo.extend((model, why, paper, exp, point) for point in points(exp, scale))
    order_of = {m: i for i, m in enumerate(dict.fromkeys(t[0] for t in todo))}
    todo.sort(key=lambda t: order_of[t[0]])  # stable: papers and experiments keep their order per model
    children: dict[str, Child] = {}
    order: list[str] = []
    flops = costs.throughput()[0] if scale == "paper" else None
    for model, why, paper, exp, point in todo:
        _add(children, order, paper, exp, point, model, scale, data, why, models_root, flops)
    for c in children.values():
        if c.settings.get("allow_code_execution") and not allow_code_execution and c.skip is None:
            c.skip = NEEDS_CODE_EXECUTION
    plan = Plan(list(papers), list(order_of), scale, data, [children[k] for k in order])
    return dataclasses.replace(plan, filled={p.number: instances(p, plan) for p in papers})


def _add(children: dict[str, Child], order: list[str], paper: Paper, exp: Experiment, point: dict, model: str,
         scale: str, data: dict[str, str], why: str | None = None, root: Path | None = None,
         flops: float | None = None) -> None:
    earlier = {e: run_ref(c.run_id) for c in children.values() if c.model == model
               for p, e in c.uses if p == paper.number}
    released = saes_of(paper, model) if scale == "paper" and exp.settings.get("score") == "sae" else None
    if released is not None:  # the paper's own SAEs replace an SAE child's folder: no such child is needed
        earlier = {**{e.id: None for e in paper.experiments}, **earlier}
    settings = settings_for(exp, scale, point, data, earlier, model)
    settings = {k: v for k, v in settings.items() if k != "model"}
    base, label = model, None
    if exp.model is not None:  # a trained model: the producer's run folder, by reference
        if exp.producer not in earlier:
            return  # its producer is not planned on this model (a matrix or scale without it)
        model, label = earlier[exp.producer], f"{base} + {exp.label}"
    if released is not None:  # the paper's own SAEs on every layer (saes:), not one trained here
        settings = {**{k: v for k, v in settings.items() if k != "train_sae"}, "sae": [f"saelens:{released.release}/{released.ids.format(layer=l)}" for l in range(released.layers)]}
    name = run_name(exp.suite, exp.mode, model, settings, label)
    if name not in children:
        items, seconds = costs.estimate(exp.suite, exp.mode, base, settings)
        source = None if label else local_folder(model, root)
        if why and why.startswith("no hub id") and source:
            why = None  # a converted copy mapped by the paper's name in --models-root's models.yaml
        skip = why or exp.skip_models.get(model)
        source = None if skip else source
        child = Child(name, exp.suite, exp.mode, model, settings, [], items, seconds, skip, source, label=label)
        if flops and (shape := costs.shapes(base, source)):
            from whitebox_eval.suites import suite as record

            units = record(exp.suite).estimate(exp.mode, settings)[1]
            child.gpu_seconds = costs.gpu_seconds(record(exp.suite), units, shape, flops)
        children[name] = child
        order.append(name)
    use = (paper.number, fill(exp.variant_of or exp.id, point))  # a variant answers for the experiment it varies
    if use not in children[name].uses:
        children[name].uses.append(use)


def run_ref(run_id: str) -> str:
    """How a child's settings name another child's run folder (``{run.EXPERIMENT}`` in a paper):
    by its run id, so the name hashes the same under any ``--output``; the folder is put in when
    the child runs (:func:`.children.resolve_refs`)."""
    return f"{{run:{run_id}}}"


def needed_data(papers: list[Paper], scale: str) -> dict[str, str]:
    """Benchmark name -> the experiment that needs it first (for the one-line error)."""
    out: dict[str, str] = {}
    for p in papers:
        for e in p.experiments:
            for point in points(e, scale):
                for name in dict.fromkeys([*e.data, *point.get("data", ())]):  # the experiment's and the point's own
                    out.setdefault(name, f"paper {p.number} {fill(e.id, point)}")
    return out


def not_tested_at(paper: Paper, c: Claim, scale: str, verdict: str = "not tested") -> str | None:
    """Why ``c`` is not tested at ``scale`` (None when it is): its ``not_at`` entry for the
    scale, or for the scale whose settings its experiment runs there (cpu runs quick's where
    the experiment names no cpu settings), led by ``verdict`` (*not run* where no child ran)."""
    named = scale_named(paper.experiment(c.experiment), scale) if c.experiment else scale
    for s in dict.fromkeys((scale, named)):
        if s in c.not_at:
            via = "" if s == scale else f" (its experiment runs the {s} scale's settings)"
            return f"{verdict} at the {scale} scale{via}: {c.not_at[s]}"
    return None


def manipulations(paper: Paper, c: Claim) -> list[dict[str, Any]]:
    """The manipulation checks claim ``c`` is conditional on: its own and (a claim on one experiment)
    its experiment's; a check whose test is the claim's own statistic does not apply (that claim
    *is* the check), nor one that ``applies_to`` another test."""
    specs = list(c.manipulation)
    if c.experiment and not c.across_models:
        specs = list(paper.experiment(c.experiment).manipulation) + specs
    own = c.stat.get("test_at") or [c.stat.get("paired")]
    return [m for m in specs if not any(k in m and m[k] == c.stat.get(k) for k in ("paired", "test_at"))
            and not (m.get("applies_to") and m["applies_to"] not in own)]


def instances(paper: Paper, plan: Plan) -> PaperInstances:
    """What ``plan`` decides about ``paper`` before any child runs (:mod:`.instances`)."""
    env = {**{f"data.{k}": v for k, v in plan.data.items()}, **{f"data.{k}.name": Path(v).name for k, v in plan.data.items()},
           **{k: "{" + k + "}" for k in CHILD_PLACEHOLDERS}}
    claims: dict[str, ClaimInstance] = {}
    for c in paper.claims:  # the manipulation checks that apply to its statistic as the plan fills it
        filled = dataclasses.replace(c, stat=_known(c.stat, env), manipulation=tuple(_known(list(c.manipulation), env)))
        claims[c.id] = ClaimInstance(not_tested_at(paper, c, plan.scale), _known(manipulations(paper, filled), env))
    return PaperInstances(plan.models_for(paper.number), claims, {t.id: _table(t, env) for t in paper.tables},
                          [e.id for e in paper.experiments if points(e, plan.scale)], env)


def _table(t: Table, env: dict[str, Any]) -> TableInstance:
    rows = [_known(r.ours, env) if r.ours is None or t.ours_by == "model" else
            [_known(r.ours[j], env) if isinstance(r.ours, list) else _known(r.ours, {**env, **(col.get("vars") or {})})
             for j, col in enumerate(t.columns)] for r in t.rows]
    return TableInstance(rows, [[_known(s, env) for s in r.ours] for r in t.ours_rows])


def _known(value: Any, env: dict[str, Any]) -> Any:
    """``value`` filled from ``env``, or as written where it names a value ``env`` lacks."""
    try:
        return fill(value, env)
    except WhiteboxError:
        return value
