"""``whitebox-eval reproduce PAPER``: each paper's tables and claims beside the published figures.

One reproduction folder per call (``--output``/``--run-id``): ``plan.json`` (the child runs
and their settings), ``runs/`` (the child run folders, ordinary resumable runs of the
suites), ``claims.json`` (tables and verdicts for machines), ``reproduction.md`` and
``reproduction.html``, and ``reproduction.log`` / ``timing.json`` (the only files with
times in them). The papers themselves are data: ``papers/*.yaml`` (see :mod:`.spec`).

The per-item evidence behind every verdict is kept beside claims.json, so that each p-value and
interval recomputes from the two files alone (:func:`split`). claims.json stays readable: each
claim's arms keep their counts and values; their per-item values (``items``: item id -> value), answer keys (``answers``: item id -> [K, gold, gold position],
:mod:`.chance`), strata (``strata``: item id -> stratum) and a random-head control's per-item draws
(``draw_items``) and a statistic's observations (``observations``: a token-level statistic's value,
group and sequence of each token; MUI's key units per response; PA stability's accuracy and PA of
each item; a refused cell's own: 001's response classes behind its off-format share, ``cell``) move
to ``evidence.json.gz`` (gzip with no time stamp: a resumed reproduction writes the same bytes), keyed ``paper/claim/model``; claims.json names the file (``evidence``) and each
claim its key (``evidence_key``). Resampling tests carry their scheme and seed in the claim
(``statistic.scheme``, the stratified test's ``permutations`` and ``seed``).
"""

from __future__ import annotations

import gzip
import io
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError

PLAN_FILE = "plan.json"
CLAIMS_FILE = "claims.json"
MARKDOWN_FILE = "reproduction.md"
HTML_FILE = "reproduction.html"
LOG_FILE = "reproduction.log"
EVIDENCE_FILE = "evidence.json.gz"
ARM_KEYS = ("items", "answers", "strata")
CONTROL_KEYS = ("draw_items",)
STATISTIC_KEYS = ("observations",)


@dataclass
class Reproduction:
    """A finished reproduction: its folder and claims.json's content."""

    folder: Path
    content: dict[str, Any]

    @property
    def claims(self) -> list[dict[str, Any]]:
        return [c for p in self.content["papers"] for c in p["claims"]]

    def verdicts(self) -> dict[tuple[str, str], str]:
        """(claim id, model) -> verdict."""
        return {(c["id"], c["model"]): c["verdict"] for c in self.claims}


def default_run_id(papers: Sequence[str], scale: str) -> str:
    names = "-".join(papers) if len(papers) < 5 else "all"
    return f"reproduce-{names}-{scale}"


def prepare(papers: Sequence[str], models: Sequence[str], scale: str, data: Sequence[str] | dict[str, str] = (),
            data_root: str | None = None, models_root: str | None = None, allow_code_execution: bool = False):
    """The plan of a reproduction (nothing runs): papers, data files and child runs. ``models``
    are ``--model`` values: ``ID`` for every paper, ``PAPER=ID`` for one (:func:`.plan.models_for`);
    none: each paper's own models at scale paper, the bundled ones otherwise. Children that run
    the model's code run only with ``allow_code_execution``."""
    from whitebox_eval.reproduce import data as bench
    from whitebox_eval.reproduce import plan as planning
    from whitebox_eval.reproduce import spec

    if scale not in spec.SCALES:
        raise WhiteboxError(f"unknown scale {scale!r}; choose {', '.join(spec.SCALES)}")
    chosen = spec.resolve(list(papers))
    given = dict(data) if isinstance(data, dict) else bench.parse_data_options(list(data))
    needed = planning.needed_data(chosen, scale)
    located = bench.locate(list(needed), given, bench.data_root(data_root), needed)
    every, per_paper = spec.parse_model_options(list(models or ()))
    return planning.build(chosen, every, scale, located, per_paper=per_paper,
                          models_root=planning.models_root(models_root),
                          allow_code_execution=allow_code_execution)


def _identity(plan_dict: dict) -> dict:
    """What must match for --resume: the plan without its estimates (item counts)."""
    out = dict(plan_dict)
    if "children" in out:
        out["children"] = [{k: v for k, v in c.items() if k != "items"} for c in out["children"]]
    return out


def _open_folder(folder: Path, plan_dict: dict, resume: bool) -> None:
    plan_path = folder / PLAN_FILE
    if folder.exists() and not resume:
        raise WhiteboxError(f"{folder} exists: continue it with --resume (same --run-id), or give another --run-id")
    if resume:
        if not plan_path.is_file():
            raise WhiteboxError(f"--resume: {folder} holds no reproduction ({PLAN_FILE} missing); "
                                "drop --resume to start it")
        saved, wanted = _identity(json.loads(plan_path.read_text(encoding="utf-8"))), _identity(plan_dict)
        if saved != wanted:
            diff = sorted(k for k in set(saved) | set(wanted) if saved.get(k) != wanted.get(k))
            raise WhiteboxError(f"--resume: the plan in {folder} differs in {', '.join(diff)} (papers, models, "
                                "scale or data changed); give the same options, or another --run-id")
        return
    from whitebox_eval.runs.atomic import write_atomic

    folder.mkdir(parents=True)
    write_atomic(plan_path, json.dumps(plan_dict, indent=1, sort_keys=True) + "\n")


def split(content: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """claims.json's content without the per-item evidence, and the evidence by claim key."""
    slim = json.loads(json.dumps(content))  # a deep copy of plain data
    evidence: dict[str, Any] = {}
    for paper in slim.get("papers", ()):
        for c in paper.get("claims", ()):
            ev: dict[str, Any] = {}
            for name, arm in (c.get("arms") or {}).items():
                moved = {k: arm.pop(k) for k in ARM_KEYS if k in arm}
                if moved:
                    ev.setdefault("arms", {})[name] = moved
            for i, ctl in enumerate(c.get("controls") or ()):
                moved = {k: ctl.pop(k) for k in CONTROL_KEYS if k in ctl}
                if moved:
                    ev.setdefault("controls", {})[str(i)] = moved
            moved = {k: c["statistic"].pop(k) for k in STATISTIC_KEYS if k in (c.get("statistic") or {})}
            if moved:
                ev["statistic"] = moved
            moved = {k: c.pop(k) for k in STATISTIC_KEYS if k in c}  # a refused cell's (001: each response's class)
            if moved:
                ev["cell"] = moved
            if ev:
                key = f"{paper['number']}/{c['id']}/{c['model']}"
                c["evidence_key"] = key
                evidence[key] = ev
    slim["evidence"] = EVIDENCE_FILE
    return slim, evidence


def evidence_bytes(evidence: dict[str, Any]) -> bytes:
    """The evidence as deterministic gzip bytes (no file name, mtime 0)."""
    raw = json.dumps(evidence, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as f:
        f.write(raw)
    return buf.getvalue()


def merged(content: dict[str, Any], evidence: dict[str, Any]) -> dict[str, Any]:
    """claims.json's content with the evidence put back in place (as :func:`split` found it)."""
    out = json.loads(json.dumps(content))
    for paper in out.get("papers", ()):
        for c in paper.get("claims", ()):
            ev = evidence.get(c.get("evidence_key", ""), {})
            for name, moved in (ev.get("arms") or {}).items():
                c["arms"][name].update(moved)
            for i, moved in (ev.get("controls") or {}).items():
                c["controls"][int(i)].update(moved)
            c.get("statistic", {}).update(ev.get("statistic") or {})
            c.update(ev.get("cell") or {})
    return out


def write_outputs(folder: Path, content: dict[str, Any], command: str) -> dict[str, Any]:
    """claims.json, its per-item evidence (:func:`split`), reproduction.md and
    reproduction.html (atomic, no times inside); returns claims.json's content."""
    from whitebox_eval.reproduce import render
    from whitebox_eval.runs.atomic import AtomicFile, write_atomic

    slim, items = split(content)
    with AtomicFile(folder / EVIDENCE_FILE, "wb") as f:
        f.write(evidence_bytes(items))
    write_atomic(folder / CLAIMS_FILE, json.dumps(slim, indent=1, sort_keys=True, allow_nan=False) + "\n")
    bs = render.blocks(slim, command)
    write_atomic(folder / MARKDOWN_FILE, render.markdown(bs))
    write_atomic(folder / HTML_FILE, render.html(bs, "whitebox-eval reproduce", base=folder))
    return slim


@dataclass
class Log:
    """reproduction.log: each line time-stamped, and said (``say``) unless ``echo`` is False."""

    folder: Path
    say: Callable[[str], None]

    def __call__(self, line: str, echo: bool = True) -> None:
        if echo:
            self.say(line)
        with open(self.folder / LOG_FILE, "a", encoding="utf-8") as f:
            f.write(time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + line + "\n")


def start(plan, output: str | Path, run_id: str | None, resume: bool, echo: Callable[[str], None] | None) -> Log:
    """Print ``plan`` and its prechecks (one line, and no work, when no child could run), and open
    its reproduction folder (``--resume``: only for the same plan); the folder's log."""
    from whitebox_eval.reproduce import prechecks
    from whitebox_eval.runs.run_ids import run_path

    folder = run_path(output, run_id or default_run_id([p.number for p in plan.papers], plan.scale))
    lines = plan.lines() + prechecks.check(plan)
    log = Log(folder, echo or (lambda line: print(line, file=sys.stderr, flush=True)))
    for line in lines:
        log.say(line)
    _open_folder(folder, plan.to_dict(), resume)
    for line in lines:
        log(line, echo=False)
    return log


def finish(plan, outcomes: dict, log: Log, started: float) -> Reproduction:
    """Assemble the children's ``outcomes`` (run id -> :class:`.assemble.Outcome`), write the folder,
    and the seconds since ``started`` in its timing.json."""
    from whitebox_eval.reproduce import assemble, children

    content = assemble.content(plan, outcomes)
    command = "whitebox-eval reproduce " + " ".join(p.number for p in plan.papers) + f" --scale {plan.scale}"
    content = write_outputs(log.folder, content, command)
    seconds = children.timings(log.folder)
    seconds["_wall_seconds_this_call"] = round(time.monotonic() - started, 1)
    children.save_timings(log.folder, seconds)
    log(f"reproduce: wrote {log.folder / MARKDOWN_FILE}, {log.folder / HTML_FILE} and {log.folder / CLAIMS_FILE}")
    return Reproduction(log.folder, content)


def run(papers: Sequence[str], *, models: Sequence[str] = (), scale: str = "quick",
        data: Sequence[str] | dict[str, str] = (), data_root: str | None = None, output: str | Path = "runs",
        run_id: str | None = None, resume: bool = False, show_progress: bool | None = None,
        echo: Callable[[str], None] | None = None, models_root: str | None = None,
        allow_code_execution: bool = False, reuse_only: bool = False) -> Reproduction:
    """Plan, run (or reuse) every child run here, one after another, and write the reproduction
    folder. ``reuse_only``: run nothing, assemble the children already finished under ``output``
    (the rest not run). Each child a Slurm job instead: :func:`.launch.slurm.reproduce`."""
    from whitebox_eval.reproduce import children

    plan = prepare(papers, models, scale, data, data_root, models_root, allow_code_execution)
    log = start(plan, output, run_id, resume, echo)
    started = time.monotonic()
    outcomes = children.run(plan, log.folder, Path(output), show_progress=show_progress, log=log,
                            reuse_only=reuse_only)
    return finish(plan, outcomes, log, started)
