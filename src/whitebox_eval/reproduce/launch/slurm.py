"""``reproduce --launcher slurm``: each unfinished child one Slurm job, submitted through submitit.

Each job runs :class:`.job.ChildJob` (the child's ordinary resumable run folder under the
reproduction folder, which must be on a file system the nodes share), sized by
:func:`..costs.size`. A child that reads another's output (:func:`..children.producers`) waits for its
producer's job (``afterok``, ``--kill-on-invalid-dep=yes``: when the producer fails Slurm drops
it, and it is reported not run, naming the producer). ``--slurm-max-jobs N``: children of one
shape without producers go as one array with ``%N``; otherwise N lanes, each job waiting
(``afterany``) for the one before it in its lane, so at most N run at once after this process exits.
:mod:`.jobs` keeps a re-run from submitting a child whose job is pending or running. Unless
``--detach``, this process waits for every job (their states from ``sacct``: :func:`states`), then
the reproduction is assembled from the finished run folders, as ``--reuse-only`` would.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import costs
from whitebox_eval.reproduce.launch import jobs

EXTRA = "pip install 'whitebox-eval[cluster]'"
POLL_SECONDS = 30.0
"""How often a waiting ``reproduce`` asks ``sacct`` (tests set it lower)."""
ENDED_BAD = "failed"
LOGS = "slurm"
"""The folder under the reproduction folder where submitit keeps each job's pickles and logs."""
TAIL_LINES = 8


def states(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Job id -> (Slurm state, elapsed HH:MM:SS) from ``sacct`` (a job sacct does not list is absent)."""
    if not job_ids:
        return {}
    cmd = ["sacct", "-o", "JobID,State,Elapsed", "--parsable2", "-n"]
    for j in sorted({j.split("_")[0] for j in job_ids}):
        cmd += ["-j", j]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise WhiteboxError(f"sacct did not answer ({e}); Slurm's accounting must be on for --launcher slurm") from e
    found: dict[str, tuple[str, str]] = {}
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) >= 3 and parts[0] and "." not in parts[0]:
            found[parts[0]] = ((parts[1].split() or ["UNKNOWN"])[0], parts[2])
    return found


def log_path(folder: Path, job_id: str) -> Path:
    """The job's stderr as submitit names it (rank 0)."""
    return folder / LOGS / job_id / f"{job_id}_0_log.err"


def tail(folder: Path, job_id: str, lines: int = TAIL_LINES) -> str:
    """The last lines of the job's log (stderr, else stdout), joined with `` | ``."""
    for path in (log_path(folder, job_id), log_path(folder, job_id).with_suffix(".out")):
        if path.is_file():
            text = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
            if text:
                return " | ".join(ln.strip() for ln in text[-lines:])
    return "no log written"


@dataclass
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    args: dict[str, str] = field(default_factory=dict)  # --slurm-arg KEY=VALUE (submitit's names)
    max_jobs: int | None = None
    time_factor: float = 3.0
    cache_root: str | None = None
    detach: bool = False


def parse_args(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``--slurm-arg KEY=VALUE`` items (dashes in KEY read as underscores, as submitit names them)."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise WhiteboxError(f"--slurm-arg {item!r}: give KEY=VALUE (e.g. constraint=a100)")
        out[key.strip().replace("-", "_")] = value
    return out


def check(options: SlurmOptions, *, submitting: bool = True) -> None:
    """Refuse, in one line and before any work: submitit missing, no ``sbatch``/``srun``/``sacct`` on
    PATH (``submitting``), an unknown ``--slurm-arg`` (submitit's own parameter check)."""
    try:
        import submitit
    except ImportError:
        raise WhiteboxError(f"--launcher slurm needs submitit, an optional extra: {EXTRA}") from None
    if submitting:
        missing = [c for c in ("sbatch", "srun", "sacct") if shutil.which(c) is None]
        if missing:
            raise WhiteboxError(f"--launcher slurm: no {', '.join(missing)} on PATH; run reproduce on a Slurm "
                                "login node, or use --launcher local")
    if options.max_jobs is not None and options.max_jobs < 1:
        raise WhiteboxError(f"--slurm-max-jobs must be at least 1, not {options.max_jobs}")
    if not options.time_factor > 0:
        raise WhiteboxError(f"--slurm-time-factor must be above 0, not {options.time_factor}")
    from submitit.slurm import slurm as sl

    valid = sl._get_default_parameters()  # the names SlurmExecutor.update_parameters accepts
    bad = sorted(set(options.args) - set(valid))
    if bad:
        import difflib

        near = difflib.get_close_matches(bad[0], list(valid), n=1)
        raise WhiteboxError(f"--slurm-arg {', '.join(bad)}: not a parameter submitit's SlurmExecutor takes"
                            + (f" (did you mean {near[0]!r}?)" if near else "")
                            + f"; it takes {', '.join(sorted(valid))}")
    del submitit


def _value(text: str):
    return int(text) if text.isdigit() else text


def cache_root(options: SlurmOptions, output: Path) -> str:
    """The cache root the jobs share: ``--cache-root``, else ``OUTPUT/cache``."""
    return str(Path(options.cache_root or output / "cache").resolve())


def plan_lines(plan, options: SlurmOptions) -> list[str]:
    """``--plan-only --launcher slurm``: each job and its resources, nothing submitted."""
    from whitebox_eval.reproduce.children import producers

    run = [c for c in plan.children if c.skip is None]
    out = [f"Slurm jobs ({len(run)}; resources by reproduce/costs.py, time = estimate x "
           f"{options.time_factor:g} + {costs.MARGIN_MINUTES} min):"]
    for i, c in enumerate(run, 1):
        after = producers(c, plan)
        out.append(f"  job {i}/{len(run)} {c.describe()}: {costs.size(c, options.time_factor).describe()}"
                   + (f"; after {', '.join(after)}" if after else ""))
    return out


def _parameters(options: SlurmOptions, r: costs.Resources, name: str) -> dict:
    params = {"job_name": name[:60], "time": r.minutes, "mem": f"{r.mem_gb}GB", "nodes": 1,
              "ntasks_per_node": r.tasks, "gpus_per_node": r.gpus, "cpus_per_task": costs.CPUS_PER_TASK,
              "signal_delay_s": 120}
    params.update({k: v for k, v in (("partition", options.partition), ("account", options.account),
                                     ("qos", options.qos)) if v})
    params.update({k: _value(v) for k, v in options.args.items()})
    return params


def reproduce(papers, options: SlurmOptions, *, models=(), scale: str = "quick", data=(), data_root=None,
              output: str | Path = "runs", run_id=None, resume: bool = False, show_progress=None, echo=None,
              models_root=None, allow_code_execution: bool = False):
    """``reproduce --launcher slurm``: :func:`whitebox_eval.reproduce.run` (its arguments, ``reuse_only`` aside) with
    each unfinished child a Slurm job (:func:`launch`), then the finished ones assembled; None when
    ``detach`` returned after submitting."""
    from whitebox_eval.reproduce import finish, prepare, start
    from whitebox_eval.reproduce.assemble import Outcome
    from whitebox_eval.reproduce.children import run

    check(options)  # submitit, sbatch/srun/sacct on PATH, --slurm-arg names: before any work
    plan = prepare(papers, models, scale, data, data_root, models_root, allow_code_execution)
    log = start(plan, output, run_id, resume, echo)
    started = time.monotonic()
    ended = launch(plan, log.folder, Path(output), options, log)
    if ended is None:  # --detach
        return None
    outcomes = run(plan, log.folder, Path(output), show_progress=show_progress, log=log, reuse_only=True)
    for rid, (status, reason) in ended.items():
        outcomes[rid] = Outcome(outcomes[rid].child, status, reason)
    return finish(plan, outcomes, log, started)


def launch(plan, folder: Path, output: Path, options: SlurmOptions,
           log: Callable[[str], None]) -> dict[str, tuple[str, str]] | None:
    """Submit the unfinished children of ``plan`` (none whose job is still pending or running),
    wait for them unless ``detach``; returns run id -> (status, reason) of each child a job did
    not finish (None when detached)."""
    import submitit

    from whitebox_eval.reproduce.children import RUNS, finished_copy, producers
    from whitebox_eval.reproduce.launch.job import ChildJob

    folder, output = folder.resolve(), output.resolve()
    runs = folder / RUNS
    runs.mkdir(parents=True, exist_ok=True)
    cache = cache_root(options, output)
    done = {c.run_id for c in plan.children if finished_copy(folder, output, c.run_id)}
    todo = [c for c in plan.children if c.skip is None and c.run_id not in done]
    not_run: dict[str, tuple[str, str]] = {}
    ids: dict[str, str] = {}
    with jobs.registry(folder) as reg:
        known = states([reg[c.run_id]["job"] for c in todo if c.run_id in reg])
        fresh = []
        for c in todo:
            old = reg.get(c.run_id)
            if old and known.get(old["job"], ("?",))[0] in jobs.ACTIVE:
                ids[c.run_id] = old["job"]
                log(f"reproduce: {c.run_id}: job {old['job']} is {known[old['job']][0].lower()}: not submitted again")
            else:
                fresh.append(c)
        skipped = {c.run_id: c.skip for c in plan.children if c.skip}
        executor = submitit.SlurmExecutor(folder=folder / LOGS / "%j", max_num_timeout=3)
        sized = {c.run_id: costs.size(c, options.time_factor) for c in fresh}
        prods = {c.run_id: producers(c, plan) for c in fresh}
        lanes: list[str | None] = [None] * (options.max_jobs or 0)
        submit = []
        for c in fresh:
            blocked = next((p for p in prods[c.run_id] if p in skipped or p in not_run), None)
            if blocked:
                not_run[c.run_id] = ("skipped", f"its producer {blocked} is not run")
                continue
            submit.append(c)
        one_shape = len({sized[c.run_id] for c in submit}) == 1 and not any(prods[c.run_id] for c in submit)
        if options.max_jobs and one_shape and len(submit) > 1:
            executor.update_parameters(**_parameters(options, sized[submit[0].run_id], "whitebox-eval-reproduce"),
                                       array_parallelism=options.max_jobs)
            submitted = executor.submit_array([ChildJob.of(c, runs, cache, _map(sized[c.run_id])) for c in submit])
            ids.update({c.run_id: j.job_id for c, j in zip(submit, submitted)})
        else:
            for i, c in enumerate(submit):
                deps = [f"afterok:{ids[p]}" for p in prods[c.run_id] if p in ids]
                lane = i % options.max_jobs if options.max_jobs else None
                if lane is not None and lanes[lane]:
                    deps.append(f"afterany:{lanes[lane]}")
                params = _parameters(options, sized[c.run_id], c.run_id)
                if deps:
                    params.update(dependency=",".join(deps), additional_parameters={
                        **params.get("additional_parameters", {}), "kill-on-invalid-dep": "yes"})
                executor.update_parameters(**params)
                job = executor.submit(ChildJob.of(c, runs, cache, _map(sized[c.run_id])))
                ids[c.run_id] = job.job_id
                if lane is not None:
                    lanes[lane] = job.job_id
                executor.parameters.pop("dependency", None)
                executor.parameters.pop("additional_parameters", None)
        for c in submit:
            r = sized[c.run_id]
            reg[c.run_id] = {"job": ids[c.run_id], "submitted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             "resources": asdict(r), "producers": prods[c.run_id], "cache_root": cache,
                             "estimate_seconds": round(c.gpu_seconds if c.gpu_seconds is not None else c.seconds)}
            log(f"reproduce: submitted {c.describe()} as job {ids[c.run_id]} ({r.describe()})")
    if options.detach:
        log(f"reproduce: {len(submit)} jobs submitted; see them with reproduce --status {folder}, assemble with "
            "--reuse-only (same options) when they are done")
        return None
    return {**not_run, **wait(plan, folder, ids, log)}


def _map(r: costs.Resources) -> str | None:
    return "auto" if r.gpus > 1 and r.tasks == 1 else None


def wait(plan, folder: Path, ids: dict[str, str], log: Callable[[str], None]) -> dict[str, tuple[str, str]]:
    """Poll ``sacct`` until no job of ``ids`` (run id -> job id) is pending or running; then run id ->
    (status, reason) for each child whose job did not finish it."""
    from whitebox_eval.reproduce.children import RUNS
    from whitebox_eval.runs.finished import is_finished

    seen: dict[str, str] = {}
    while True:
        found = states(list(ids.values()))
        for rid, jid in ids.items():
            state = found.get(jid, ("PENDING",))[0]
            if seen.get(rid) != state:
                seen[rid] = state
                log(f"reproduce: job {jid} {state.lower()}: {rid}")
        if not any(s in jobs.ACTIVE for s in seen.values()):
            break
        time.sleep(POLL_SECONDS)
    producers_of = {rid: j.get("producers", []) for rid, j in jobs.read(folder).items()}
    out: dict[str, tuple[str, str]] = {}
    for rid, jid in ids.items():
        if seen[rid] == "COMPLETED" and is_finished(folder / RUNS / rid):
            continue
        failed = next((p for p in producers_of.get(rid, []) if p in out and out[p][0] == ENDED_BAD), None)
        if seen[rid] == "CANCELLED" and failed:
            out[rid] = ("skipped", f"its producer {failed} failed (job {ids[failed]})")
        else:
            out[rid] = (ENDED_BAD, f"Slurm job {jid} {seen[rid]}: {tail(folder, jid)}")
    return out
