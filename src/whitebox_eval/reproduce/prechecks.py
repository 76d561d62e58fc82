"""What a reproduction checks before any child runs: that each data file it reads can be
read to its end, and that each model can be found and its config.json loads.

Data that cannot be read stops the command before any work, in one line (exit status 2),
as a missing ``--data`` path does: the file is the user's to fix, and every paper's plan
also has children that read no data, which would otherwise run alone. A model that
cannot be loaded stops only its own children: when that is every child, the command
stops before any work, in one line; otherwise it is one warning, its children are marked
not run as they fail, and the others go on. A bundled model is left to the child (its
check is the load of its weights package); a hub id is checked only for a reachable hub.
"""

from __future__ import annotations

from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce.data import IGNORED, LENIENT_TEXT
from whitebox_eval.reproduce.plan import Plan

#: the files of a benchmark folder that are read (its README or LICENSE are not)
DATA_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json")


def check(plan: Plan) -> list[str]:
    """Warnings (``warning: ...`` lines) for models that stop some children; raises
    :class:`WhiteboxError` for data that cannot be read, or models that stop every child."""
    runnable = [c for c in plan.children if c.skip is None]
    reads = _data_of(plan)
    names = sorted({n for c in runnable for n in reads[c.run_id] if n in plan.data})
    unreadable = [f"--data {n}: {why}" for n in names if (why := data_problem(n, plan.data[n]))]
    stops: dict[str, set[str]] = {}  # a model's problem -> the run ids it stops
    for model in dict.fromkeys(c.model for c in runnable):
        if why := model_problem(model):
            stops[f"model {model}: {why}"] = {c.run_id for c in runnable if c.model == model}
    if unreadable or (stops and set().union(*stops.values()) >= {c.run_id for c in runnable}):
        raise WhiteboxError(f"cannot start the plan's {len(runnable)} runs: " + "; ".join([*unreadable, *stops]))
    return [f"warning: {problem} ({len(ids)} run(s) will be marked not run; the others go on)"
            for problem, ids in stops.items()]


def model_problem(spec: str) -> str | None:
    """Why ``spec`` cannot be loaded, found without loading its weights (None: no problem seen)."""
    from whitebox_eval.models.bundled import BUNDLED

    if spec in BUNDLED:
        return None
    from whitebox_eval.models.loading import _hub_unreachable_reason, resolve_source

    try:
        source, _ = resolve_source(spec)  # a missing path, a folder without config.json or weights
        if Path(source).is_dir():
            from transformers import AutoConfig

            AutoConfig.from_pretrained(source)  # a config.json that does not load
        elif reason := _hub_unreachable_reason():  # a hub id (load_model's own first check)
            return f"not a bundled name or a local path, and the Hugging Face hub is unavailable ({reason})"
    except WhiteboxError as e:
        return str(e)
    except (OSError, ValueError) as e:
        return f"could not load model from {spec}: {str(e).strip().splitlines()[0]}"
    return None


def data_problem(name: str, path: str) -> str | None:
    """Why benchmark ``name``'s file (or a file of its folder) cannot be read, or None."""
    from whitebox_eval.datafiles import check_readable

    p = Path(path)
    files = [p] if not p.is_dir() else sorted(
        f for f in p.iterdir() if f.is_file() and f.suffix.lower() in DATA_SUFFIXES and f.name.lower() not in IGNORED)
    try:
        for f in files:
            check_readable(f, text=name not in LENIENT_TEXT and f.suffix.lower() != ".parquet")
    except WhiteboxError as e:
        return str(e)
    return None


def _data_of(plan: Plan) -> dict[str, tuple[str, ...]]:
    """Run id -> the benchmarks the child reads (those of every experiment point it serves)."""
    by_use: dict[tuple[str, str], tuple[str, ...]] = {}
    for paper in plan.papers:
        for exp in paper.experiments:
            for point in exp.points(plan.scale):
                by_use[(paper.number, exp.run_id(point))] = exp.data_needed(point)
    return {c.run_id: tuple(dict.fromkeys(n for u in c.uses for n in by_use.get(u, ()))) for c in plan.children}
