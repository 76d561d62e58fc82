"""A paper as data: its experiments, transcribed tables, claims and what does not run.

One YAML file per paper in ``papers/`` (installed with the package). This module reads
and checks them (every key and type, :mod:`.spec_keys`; every claim's statistic against its
suite's record, :mod:`.vocabulary`); it knows the suites only by their records. The layout of a file:

- ``experiments``: child runs, each one suite (a record of :mod:`whitebox_eval.suites`, and
  its ``mode`` where it has several) with its settings (the suite's config fields, as in
  :mod:`whitebox_eval.studies`), per-scale settings under ``scales`` (a scale's ``by_model``
  over them for one model by name: a training recipe chosen on that model's validation split) and an
  optional ``matrix`` of variables (e.g. ``shots``) that ``{name}`` fields fill in.
- ``tables``: the paper's tables cell by cell: ``cite`` (table number), ``region`` (text
  around the table in the seed file), ``columns`` and ``rows`` (a row's ``label``, its
  ``published`` numbers, where they are in the seed text, and where ours come from).
- ``claims``: testable statements with their statistic, direction and published effect,
  and what the verdict needs besides (:mod:`.claim_checks`): ``arms`` (both sides on the same
  items), ``unit`` (e.g. the chosen head), ``preconditions`` and ``controls``.
- ``not_run``: parts of the paper that do not run here, and why.
- ``models``: the paper's own models, run at ``--scale paper``: a hub ``id`` (``org/name``, or
  ``org/name@revision`` for a training checkpoint), the ``name`` the paper uses, ``cite`` (the
  table or section naming it) and ``ambiguous`` where the text leaves the exact model open (our
  reading is stated; ``id: null`` when no hub id can be named). An experiment's ``models``
  (names or ids) narrows them; ``differs_<scale>`` (``differs_paper``, ``differs_cpu``) is how
  that scale differs from the paper where it is not what ``differs`` says.
- ``model: "{run.EXPERIMENT}"``, ``label``, ``variant_of``: an experiment on a trained model (:mod:`.trained`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from importlib import resources
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.suites import suite as record
from whitebox_eval.reproduce import spec_keys
from whitebox_eval.reproduce.spec_tables import UNREADABLE, Row, Table, require as _require, table as _table  # noqa: F401

PAPERS_DIR = "papers"
"""The bundled papers' folder, package data of this package."""
SCALES = ("quick", "cpu", "paper", "micro")
#: a scale an experiment does not name takes the named one's settings (cpu: quick, plus what it adds)
FALLBACK = {"cpu": "quick"}
#: a scale's keys that are not suite settings: ``matrix`` (more points) and ``by_model`` (settings for
#: one model over the scale's, by its name: a recipe chosen on that model's validation split)
SCALE_KEYS = ("matrix", "by_model")
DIRECTIONS = ("greater", "less", "none")
EFFECT_UNITS = ("pp", "number")


@dataclass(frozen=True)
class Experiment:
    """One child run template: :mod:`.plan` expands it into its runs at a scale (one per matrix point)."""

    id: str
    suite: str
    title: str
    settings: dict[str, Any]
    scales: dict[str, dict[str, Any]]
    matrix: dict[str, list[Any]] = field(default_factory=dict)
    mode: str | None = None
    data: tuple[str, ...] = ()
    differs: str | None = None
    skip_models: dict[str, str] = field(default_factory=dict)
    models: tuple[str, ...] = ()  # the paper's models this experiment runs at --scale paper (names); () = all
    differs_by: dict[str, str] = field(default_factory=dict)  # scale -> its own ``differs_<scale>`` text
    #: manipulation checks every claim on this experiment is conditional on (antecedents.MANIPULATIONS);
    #: a claim whose statistic is the check's own test is exempt (it *is* the check)
    manipulation: tuple[dict[str, Any], ...] = ()
    model: str | None = None  # ``{run.EXPERIMENT}``: the model a finetune experiment trained (a trained column)
    label: str | None = None  # the trained column's name after the base model's: "smollm2-135m + <label>"
    variant_of: str | None = None  # the experiment whose claims this one answers for the trained column

    @property
    def producer(self) -> str | None:
        """The finetune experiment whose trained model this one runs on (``model``), or None."""
        return m.group(1) if (m := re.fullmatch(r"\{run\.([^{}]+)\}", self.model or "")) else None

    def differs_at(self, scale: str) -> str | None:
        """How ``scale`` differs from the paper (its ``differs_<scale>`` where given, else ``differs``)."""
        return self.differs_by.get(scale) or self.differs


@dataclass(frozen=True)
class Claim:
    id: str
    claim: str
    cite: str
    stat: dict[str, Any]
    direction: str
    experiment: str | None
    published: dict[str, Any]
    across_models: bool = False
    margin: float | None = None
    headline: bool = False
    differs: str | None = None
    not_at: dict[str, str] = field(default_factory=dict)  # scale -> why the claim is not tested there
    arms: dict[str, dict[str, Any]] = field(default_factory=dict)  # the two sides on the same items
    unit: dict[str, Any] | None = None  # what the claim is about, e.g. the chosen head
    preconditions: tuple[dict[str, Any], ...] = ()
    controls: tuple[dict[str, Any], ...] = ()
    effect_unit: str = "pp"  # "pp": a difference of fractions, shown in percentage points; "number"
    substance: tuple[dict[str, Any], ...] = ()  # the claim's own condition (antecedents.substance): failing it fails the claim
    positive_control: dict[str, Any] | None = None  # no-difference claims: a statistic known to differ, same measure
    manipulation: tuple[dict[str, Any], ...] = ()  # the claim's own manipulation checks, beside its experiment's


@dataclass(frozen=True)
class NotRun:
    what: str
    cite: str
    reason: str
    scales: tuple[str, ...] = SCALES


@dataclass(frozen=True)
class PaperModel:
    """One of a paper's own models (``models:``): its hub id, the paper's name for it, the citation."""

    id: str | None
    name: str
    cite: str
    ambiguous: str | None = None
    named_only: bool = False  # runs only in the experiments whose models: list names it


@dataclass(frozen=True)
class PaperSAE:
    """The released SAEs a paper read for one of its models (``saes:``): a SAELens release and its
    id per layer (``{layer}`` filled in), the hook, the citation. ``--scale paper`` reads them
    (``--sae saelens:RELEASE/ID`` on every layer) instead of training one."""

    model: str  # the paper model's name or hub id
    release: str
    ids: str
    layers: int
    hook: str
    cite: str
    repo: str | None = None  # the release's hub repository (where a local copy is looked for)


@dataclass(frozen=True)
class Paper:
    number: str
    short: str
    title: str
    seed: str
    experiments: tuple[Experiment, ...]
    tables: tuple[Table, ...]
    claims: tuple[Claim, ...]
    not_run: tuple[NotRun, ...]
    summary: str = ""
    models: tuple[PaperModel, ...] = ()
    saes: tuple[PaperSAE, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.number} {self.short}"

    def experiment(self, expid: str) -> Experiment:
        """The experiment whose id (template) expands to ``expid``."""
        for e in self.experiments:
            if e.id == expid or _matches(e.id, expid):
                return e
        raise WhiteboxError(f"paper {self.name}: no experiment {expid!r}")


def _matches(template: str, expid: str) -> bool:
    if "{" not in template:
        return False
    pattern = re.escape(template)
    pattern = re.sub(r"\\\{[a-z0-9_.]+\\\}", ".+", pattern)
    return re.fullmatch(pattern, expid) is not None


# ------------------------------------------------------------------------ reading


def _experiment(d: dict, where: str) -> Experiment:
    suite = _require(d, "suite", where)
    try:
        record(suite).mode(d.get("mode"))
    except WhiteboxError as e:
        raise WhiteboxError(f"{where}: {e}") from None
    scales = d.get("scales") or {}
    unknown = set(scales) - set(SCALES)
    if unknown:
        raise WhiteboxError(f"{where}: unknown scale(s) {sorted(unknown)}")
    for name, at in scales.items():
        by_model = (at or {}).get("by_model")
        if by_model is not None and not (isinstance(by_model, Mapping) and all(
                isinstance(m, str) and isinstance(v, Mapping) for m, v in by_model.items())):
            raise WhiteboxError(f"{where}: scales.{name}.by_model must map a model's name to its settings "
                                f"(e.g. {{smollm2-135m: {{learning_rate: 3.0e-5}}}}), not {by_model!r}")
        if by_model and (clash := sorted(k for v in by_model.values() for k in v if k in SCALE_KEYS + ("model",))):
            raise WhiteboxError(f"{where}: scales.{name}.by_model sets {', '.join(clash)}: a model's entry holds "
                                "suite settings only")
    return Experiment(id=_require(d, "id", where), suite=suite, title=d.get("title", d["id"]),
                      settings=dict(d.get("settings") or {}), scales={k: dict(v or {}) for k, v in scales.items()},
                      matrix={k: list(v) for k, v in (d.get("matrix") or {}).items()}, mode=d.get("mode"),
                      data=tuple(d.get("data") or ()), differs=d.get("differs"),
                      skip_models=dict(d.get("skip_models") or {}), models=tuple(d.get("models") or ()),
                      differs_by={s: d[f"differs_{s}"] for s in SCALES if d.get(f"differs_{s}")},
                      manipulation=tuple(_checked(d.get("manipulation"), "manipulation", where)),
                      model=d.get("model"), label=d.get("label"), variant_of=d.get("variant_of"))


def _checked(checks: Any, key: str, where: str) -> list[dict[str, Any]]:
    """A list of declared checks (``kind: NAME`` of :data:`.vocabulary.CHECKS`'s ``key``)."""
    from whitebox_eval.reproduce.vocabulary import CHECKS

    known = CHECKS[key]
    if checks is not None and not isinstance(checks, list):
        raise WhiteboxError(f"{where}: {key} is a list of checks, got {checks!r:.60}")
    out = list(checks or ())
    for c in out:
        if not isinstance(c, dict) or c.get("kind") not in known:
            raise WhiteboxError(f"{where}: {key} entries need a kind, one of {', '.join(known)}; got {c!r}")
    return out


def _claim(d: dict, where: str) -> Claim:
    direction = _require(d, "direction", where)
    if direction not in DIRECTIONS:
        raise WhiteboxError(f"{where}: direction must be one of {DIRECTIONS}")
    margin = d.get("margin")
    if direction == "none" and margin is None:
        raise WhiteboxError(f"{where}: a claim of no difference needs a margin (the difference that would matter)")
    across = bool(d.get("across_models", False))
    not_at = {str(k): str(v) for k, v in (d.get("not_at") or {}).items()}
    if set(not_at) - set(SCALES):
        raise WhiteboxError(f"{where}: not_at names unknown scales {sorted(set(not_at) - set(SCALES))}")
    experiment = d.get("experiment")
    if experiment is None and not across:
        raise WhiteboxError(f"{where}: missing 'experiment'")
    for key in ("preconditions", "controls"):
        _checked(d.get(key), key, where)
    effect_unit = d.get("effect_unit", "pp")
    if effect_unit not in EFFECT_UNITS:
        raise WhiteboxError(f"{where}: effect_unit must be one of {EFFECT_UNITS}")
    positive = d.get("positive_control")
    if direction == "none" and not positive:
        raise WhiteboxError(f"{where}: a claim of no difference needs a positive_control (the same statistic between "
                            "two groups known to differ), or positive_control: {none: why} (then it cannot hold)")
    for sub in d.get("substance") or ():
        if not isinstance(sub, dict) or "stat" not in sub or "value" not in sub:
            raise WhiteboxError(f"{where}: substance entries need stat and value; got {sub!r}")
    if "margin_of" in (d.get("stat") or {}):
        raise WhiteboxError(f"{where}: margin_of is gone: state the margin on the statistic's own scale")
    return Claim(id=_require(d, "id", where), claim=_require(d, "claim", where), cite=_require(d, "cite", where),
                 stat=dict(_require(d, "stat", where)), direction=direction, experiment=experiment,
                 published=dict(d.get("published") or {}), across_models=across, margin=margin,
                 headline=bool(d.get("headline", False)), differs=d.get("differs"), not_at=not_at,
                 arms={str(k): dict(v) for k, v in (d.get("arms") or {}).items()}, unit=d.get("unit"),
                 preconditions=tuple(d.get("preconditions") or ()), controls=tuple(d.get("controls") or ()),
                 effect_unit=effect_unit, substance=tuple(d.get("substance") or ()), positive_control=positive,
                 manipulation=tuple(_checked(d.get("manipulation"), "manipulation", where)))


def _model(d: dict, where: str) -> PaperModel:
    mid = d.get("id", ...)
    if mid is ...:
        raise WhiteboxError(f"{where}: missing 'id' (null when no hub id can be named, with 'ambiguous' saying why)")
    if mid is None and not d.get("ambiguous"):
        raise WhiteboxError(f"{where}: id null needs 'ambiguous' (why no hub id is named)")
    if mid is not None and not re.fullmatch(r"[\w.-]+/[\w.-]+(@[\w.-]+)?", str(mid)):
        raise WhiteboxError(f"{where}: id {mid!r} is not a hub id (org/name, or org/name@revision)")
    return PaperModel(id=mid, name=str(_require(d, "name", where)), cite=str(_require(d, "cite", where)),
                      ambiguous=d.get("ambiguous"), named_only=bool(d.get("named_only", False)))


def _sae(d: dict, where: str) -> PaperSAE:
    ids = str(_require(d, "ids", where))
    if "{layer}" not in ids:
        raise WhiteboxError(f"{where}: ids {ids!r} must hold {{layer}} (one SAE id per layer)")
    layers = d.get("layers")
    if not isinstance(layers, int) or layers < 1:
        raise WhiteboxError(f"{where}: layers must be the model's number of layers, got {layers!r}")
    return PaperSAE(model=str(_require(d, "model", where)), release=str(_require(d, "release", where)), ids=ids,
                    layers=layers, hook=str(_require(d, "hook", where)), cite=str(_require(d, "cite", where)),
                    repo=d.get("repo"))


def parse_paper(doc: Any, source: str) -> Paper:
    """A :class:`Paper` from the parsed YAML ``doc`` (``source`` names it in errors): every key
    known and of its type (:mod:`.spec_keys`), every claim's statistic one its suite's runs give;
    a fault is one line."""
    try:
        paper = _paper(spec_keys.entry(doc, "paper", source), source)
    except (TypeError, AttributeError, ValueError, KeyError, IndexError) as e:
        raise WhiteboxError(f"{source}: a value of the wrong type or shape "
                            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else '?'})") from None
    spec_keys.statistics(paper, source)
    return paper


def _paper(doc: dict, source: str) -> Paper:
    experiments = tuple(spec_keys.entries(doc, "experiments", "experiment", source,
                                          lambda e, _: _experiment(e, f"{source} experiment {e.get('id')}")))
    tables = tuple(spec_keys.entries(doc, "tables", "table", source, lambda t, _: _table(t, f"{source} table {t.get('id')}")))
    claims = tuple(spec_keys.entries(doc, "claims", "claim", source, lambda c, _: _claim(c, f"{source} claim {c.get('id')}")))
    not_run = tuple(NotRun(what=_require(n, "what", source), cite=_require(n, "cite", source),
                           reason=_require(n, "reason", source), scales=tuple(n.get("scales") or SCALES))
                    for n in spec_keys.entries(doc, "not_run", "not_run", source))
    models = tuple(_model(m, f"{source} model {m.get('name')}") for m in spec_keys.entries(doc, "models", "model", source))
    paper = Paper(number=str(_require(doc, "paper", source)), short=_require(doc, "short", source),
                  title=_require(doc, "title", source), seed=_require(doc, "seed", source),
                  experiments=experiments, tables=tables, claims=claims, not_run=not_run,
                  summary=doc.get("summary", ""), models=models,
                  saes=tuple(_sae(x, f"{source} saes {x.get('model')}") for x in spec_keys.entries(doc, "saes", "saes", source)))
    known = {m.name for m in models} | {m.id for m in models if m.id}
    for x in paper.saes:
        if x.model not in known:
            raise WhiteboxError(f"{source} saes: model {x.model!r} is not in the paper's models")
    from whitebox_eval.models.bundled import BUNDLED

    for e in experiments:
        named = {m for at in e.scales.values() for m in (at.get("by_model") or {})}
        if named - known - set(BUNDLED):
            raise WhiteboxError(f"{source} experiment {e.id}: by_model names {sorted(named - known - set(BUNDLED))}, "
                                f"neither a bundled model ({', '.join(BUNDLED)}) nor one of the paper's models")
        if set(e.models) - known:
            raise WhiteboxError(f"{source} experiment {e.id}: models {sorted(set(e.models) - known)} are not in "
                                "the paper's models")
    ids = [e.id for e in experiments]
    if len(set(ids)) != len(ids):
        raise WhiteboxError(f"{source}: experiment ids repeat")
    from whitebox_eval.reproduce.trained import check_columns

    check_columns(experiments, source)
    for c in claims:
        if c.experiment is not None:
            paper.experiment(c.experiment)
        for e in c.stat.get("experiments", ()):
            paper.experiment(e)
    for t in tables:
        for r in (*t.rows, *t.ours_rows):
            for o in (r.ours if isinstance(r.ours, list) else [r.ours]):
                if o and "{" not in o["experiment"]:
                    paper.experiment(o["experiment"])
    return paper


@functools.cache
def papers() -> dict[str, Paper]:
    """Every paper file in ``papers/``, by number."""
    out = {}
    folder = resources.files(__package__) / PAPERS_DIR
    for entry in sorted((e for e in folder.iterdir() if e.name.endswith(".yaml")), key=lambda e: e.name):
        paper = parse_paper(spec_keys.load(entry.read_text(encoding="utf-8"), entry.name), entry.name)
        out[paper.number] = paper
    return out


def paper_file(path: str | Path) -> Paper:
    """A paper of your own: a YAML file laid out as ``papers/*.yaml`` (``reproduce PATH.yaml``),
    its experiments on any registered suite (a plug-in's too)."""
    p = Path(path).expanduser()
    try:
        data = spec_keys.load(p.read_text(encoding="utf-8"), str(p))
    except (OSError, UnicodeDecodeError) as e:
        raise WhiteboxError(f"cannot read the paper file {p}: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(data, dict):
        raise WhiteboxError(f"{p}: a paper file is a mapping (paper, short, title, experiments, claims ...)")
    return parse_paper(data, p.name)


def resolve(names: tuple[str, ...] | list[str]) -> list[Paper]:
    """Papers named by number (``000``, ``0``), short name (``wise-few``), ``all``, or a paper file of
    your own (``PATH.yaml``, :func:`paper_file`)."""
    known = papers()
    if not names:
        raise WhiteboxError("name a paper: " + _choices(known))
    out: list[Paper] = []
    for name in names:
        key = str(name).strip().lower()
        if key.endswith((".yaml", ".yml")):
            chosen = [paper_file(str(name).strip())]
        elif key == "all":
            chosen = list(known.values())
        else:
            chosen = [p for p in known.values()
                      if key in (p.number, p.short) or (key.isdigit() and int(key) == int(p.number))]
        if not chosen:
            raise WhiteboxError(f"unknown paper {name!r}; choose " + _choices(known))
        out.extend(p for p in chosen if p not in out)
    return out


def _choices(known: dict[str, Paper]) -> str:
    return ", ".join(f"{p.number} ({p.short})" for p in known.values()) + " or all"


def parse_model_options(items: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """``--model`` values -> (models for every paper, {paper number: its models}); ``PAPER=ID``
    names a paper by number or short name (as :func:`resolve`), or ``all``."""
    every: list[str] = []
    per: dict[str, list[str]] = {}
    for item in items:
        left, sep, right = item.partition("=")
        if not sep:
            every.append(item)
            continue
        if not left.strip() or not right.strip():
            raise WhiteboxError(f"--model {item!r}: give ID, or PAPER=ID (PAPER a number or short name)")
        try:
            papers = resolve([left.strip()])
        except WhiteboxError as e:
            raise WhiteboxError(f"--model {item!r}: {e} (ID alone applies to every paper)") from None
        for p in papers:
            per.setdefault(p.number, []).append(right.strip())
    return every, per
