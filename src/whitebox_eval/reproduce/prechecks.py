"""What a reproduction checks about its models before any child runs (its data files
are read to their end when they are located, :func:`whitebox_eval.reproduce.data.locate`):
each model can be found and its config.json loads.

A model that cannot be loaded stops only its own children: when that is every child, the
command stops before any work, in one line (exit status 2); otherwise it is one warning,
its children are marked not run as they fail, and the others go on. A bundled model is
left to the child (its check is the load of its weights package); a hub id is checked
only for a reachable hub.
"""

from __future__ import annotations

from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce.plan import Plan


def check(plan: Plan) -> list[str]:
    """Warnings (``warning: ...`` lines) for models that stop some children; raises
    :class:`WhiteboxError` when they stop every child that would run."""
    by_id = {c.run_id: c for c in plan.children}

    def base(c) -> str:
        """What ``c`` loads in the end: a trained model is its producer's base model."""
        while (pid := c.producer) is not None and pid in by_id:
            c = by_id[pid]
        return c.load

    runnable = [c for c in plan.children if c.skip is None]
    stops: dict[str, int] = {}  # a model's problem -> how many runs it stops (a trained model's with its producer)
    for load in dict.fromkeys(base(c) for c in runnable):
        if why := model_problem(load):
            stops[f"model {load}: {why}"] = sum(base(c) == load for c in runnable)
    if stops and sum(stops.values()) == len(runnable):
        first = next(iter(stops))
        more = f" (and {len(stops) - 1} more model(s) alike: {', '.join(p.split(':')[0][6:] for p in list(stops)[1:])})"
        raise WhiteboxError(f"none of the plan's {len(runnable)} runs can start: {first}" + (more if len(stops) > 1 else ""))
    return [f"warning: {problem} ({n} run(s) will be marked not run; the others go on)" for problem, n in stops.items()]


def model_problem(spec: str) -> str | None:
    """Why ``spec`` cannot be loaded, found without loading its weights (None: no problem seen)."""
    from whitebox_eval.models.bundled import BUNDLED

    if spec in BUNDLED:
        return None
    hub_id, _, revision = spec.partition("@")
    if revision and hub_id.count("/") == 1 and not Path(spec).expanduser().exists():
        folder = hub_id.replace("/", "--") + "@" + revision
        return (f"checkpoint {revision} of {hub_id} loads from a local folder only: download it (hf "
                f"download {hub_id} --revision {revision} --local-dir DIR/{folder}) and give --models-root DIR")
    from whitebox_eval.models.loading import hub_unreachable_reason, resolve_source

    try:
        source, _ = resolve_source(spec)  # a missing path, a folder without config.json or weights
        if Path(source).is_dir():
            from transformers import AutoConfig

            AutoConfig.from_pretrained(source)  # a config.json that does not load
        elif reason := hub_unreachable_reason():  # a hub id (load_model's own first check)
            return (f"not a bundled name or a local path, and the Hugging Face hub is unavailable ({reason}); "
                    f"give --models-root DIR holding DIR/{spec.replace('/', '--')} (or a DIR/models.yaml naming "
                    "its folder)")
    except WhiteboxError as e:
        return str(e)
    except (OSError, ValueError) as e:
        return f"could not load model from {spec}: {str(e).strip().splitlines()[0]}"
    return None
