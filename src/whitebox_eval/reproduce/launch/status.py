"""``reproduce --status FOLDER``: each child's Slurm job, its state (``sacct``, :func:`.slurm.states`), its log's
tail where it failed, and its time used against its estimate."""

from __future__ import annotations

import json
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import costs
from whitebox_eval.reproduce.launch import jobs
from whitebox_eval.reproduce.launch.slurm import states, tail

WORDS = {"PENDING": "pending", "RUNNING": "running", "REQUEUED": "requeued", "PREEMPTED": "requeued",
         "COMPLETED": "done", "CANCELLED": "cancelled"}


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
