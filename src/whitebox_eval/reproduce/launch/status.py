"""What Slurm says of a reproduction's jobs (``sacct``), their logs' tails, and ``reproduce --status FOLDER``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import costs
from whitebox_eval.reproduce.launch import jobs

LOGS = "slurm"
"""The folder under the reproduction folder where submitit keeps each job's pickles and logs."""
TAIL_LINES = 8
WORDS = {"PENDING": "pending", "RUNNING": "running", "REQUEUED": "requeued", "PREEMPTED": "requeued",
         "COMPLETED": "done", "CANCELLED": "cancelled"}


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


def seconds(elapsed: str) -> float:
    """Slurm's ``[D-]HH:MM:SS`` as seconds."""
    days, _, clock = elapsed.rpartition("-")
    parts = [float(p) for p in clock.split(":") if p]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return (float(days) if days else 0.0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def lines(folder: Path, plan_file: str = "plan.json") -> list[str]:
    """``reproduce --status FOLDER``: per child its job, state and time used against its estimate
    (``plan_file``: :data:`whitebox_eval.reproduce.PLAN_FILE`, the plan's children)."""
    from whitebox_eval.reproduce.children import RUNS
    from whitebox_eval.runs.finished import is_finished

    folder = Path(folder)
    if not (folder / plan_file).is_file():
        raise WhiteboxError(f"--status: {folder} holds no reproduction ({plan_file} missing)")
    plan = json.loads((folder / plan_file).read_text(encoding="utf-8"))
    registry = jobs.read(folder)
    found = states([j["job"] for j in registry.values()])
    out = [f"reproduction {folder}: {len(plan['children'])} child runs, {len(registry)} submitted to Slurm"]
    counts: dict[str, int] = {}
    for c in plan["children"]:
        rid = c["run_id"]
        job = registry.get(rid)
        if c.get("skip"):
            word, detail = "not run", c["skip"]
        elif is_finished(folder / RUNS / rid):
            word, detail = "done", ""
        elif job is None:
            word, detail = "not submitted", ""
        else:
            state, _ = found.get(job["job"], ("UNKNOWN", ""))
            word = WORDS.get(state, "failed")
            detail = ""
            if word == "done":  # the job ended but left no finished run folder
                word = "failed"
            if word in ("failed", "cancelled"):
                detail = f"{state}: {tail(folder, job['job'])}"
        counts[word] = counts.get(word, 0) + 1
        used = ""
        if job is not None and job["job"] in found:
            estimate = job.get("estimate_seconds") or 0
            used = f", {found[job['job']][1]} used of ~{costs.duration(estimate)} estimated"
        jid = f"job {job['job']}" if job else "no job"
        out.append(f"  {rid}: {jid}, {word}{used}" + (f" ({detail})" if detail else ""))
    out.append("states: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return out
