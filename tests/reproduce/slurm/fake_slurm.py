"""A fake Slurm for the tests: ``sbatch``, ``srun``, ``sacct``, ``scontrol`` and ``scancel`` as one
script (the fixture in ``conftest.py`` puts a wrapper per name on PATH). Each job is a local
process group started by a detached runner; its state lives in ``$FAKE_SLURM_DIR/jobs/<key>.json``
so ``sacct`` reports it: PENDING (waiting for its dependencies or its array's ``%N``), RUNNING,
COMPLETED, FAILED (a non-zero exit or a kill), CANCELLED (``scancel``, or an ``afterok`` producer
that failed under ``--kill-on-invalid-dep=yes``), PREEMPTED and REQUEUED (``preempt`` below, then
``scontrol requeue``, after which the runner starts the batch script again). Only what submitit
and the launcher call is implemented: ``sbatch [--parsable] SCRIPT`` (options from ``#SBATCH``
lines), ``srun --output O --error E [--unbuffered] CMD`` (SLURM_NTASKS tasks with SLURM_PROCID,
SLURM_LOCALID, SLURM_NODEID), ``sacct -o FIELDS --parsable2 [-n] [-X] -j ID ...``,
``scontrol requeue ID``, ``scancel [--signal SIG] ID``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ACTIVE = ("PENDING", "RUNNING", "REQUEUED", "PREEMPTED")
INVALID = ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


def state_dir() -> Path:
    return Path(os.environ["FAKE_SLURM_DIR"])


@contextlib.contextmanager
def locked():
    root = state_dir()
    (root / "jobs").mkdir(parents=True, exist_ok=True)
    with open(root / "lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield root
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _path(key: str) -> Path:
    return state_dir() / "jobs" / f"{key}.json"


def read(key: str) -> dict:
    return json.loads(_path(key).read_text())


def write(rec: dict) -> None:
    tmp = _path(rec["key"]).with_suffix(".tmp")
    tmp.write_text(json.dumps(rec))
    os.replace(tmp, _path(rec["key"]))


def update(key: str, **fields) -> dict:
    with locked():
        rec = read(key)
        if "state" in fields and fields["state"] != rec["state"]:
            rec["history"].append(fields["state"])
        rec.update(fields)
        write(rec)
        return rec


def records() -> list[dict]:
    jobs = state_dir() / "jobs"
    return [json.loads(p.read_text()) for p in sorted(jobs.glob("*.json"))] if jobs.is_dir() else []


def _options(script: str, argv: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    lines = [ln[len("#SBATCH"):].strip() for ln in Path(script).read_text().splitlines() if ln.startswith("#SBATCH")]
    for item in lines + argv:
        if item.startswith("--"):
            k, _, v = item[2:].partition("=")
            opts[k] = v if _ else "true"
    return opts


def sbatch(argv: list[str]) -> int:
    parsable = "--parsable" in argv
    args = [a for a in argv if a != "--parsable"]
    script = args[-1]
    opts = _options(script, args[:-1])
    with locked() as root:
        counter = root / "next_id"
        job = int(counter.read_text()) if counter.exists() else 1000
        counter.write_text(str(job + 1))
        keys = [str(job)]
        throttle = None
        if "array" in opts:
            m = re.fullmatch(r"(\d+)-(\d+)(?:%(\d+))?", opts["array"])
            lo, hi = int(m.group(1)), int(m.group(2))
            throttle = int(m.group(3)) if m.group(3) else None
            keys = [f"{job}_{i}" for i in range(lo, hi + 1)]
        deps = []
        for part in filter(None, opts.get("dependency", "").split(",")):
            kind, *ids = part.split(":")
            deps += [(kind, i) for i in ids]
        for key in keys:
            write({"key": key, "job": job, "script": str(Path(script).resolve()), "opts": opts, "deps": deps,
                   "throttle": throttle, "state": "PENDING", "history": ["PENDING"], "runs": [], "requeue": False,
                   "exit_code": None, "pgid": None, "tasks": [], "submitted": time.time()})
    for key in keys:
        subprocess.Popen([sys.executable, __file__, "_run", key], start_new_session=True, env=dict(os.environ),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(job if parsable else f"Submitted batch job {job}", flush=True)
    return 0


def _dep_state(dep_id: str) -> list[str]:
    return [r["state"] for r in records() if r["key"] == dep_id or str(r["job"]) == dep_id]


def _wait_dependencies(rec: dict) -> bool:
    """True when the job may start; False when it was cancelled (a dependency that can never hold)."""
    while True:
        rec = read(rec["key"])
        if rec["state"] == "CANCELLED":
            return False
        ready = True
        for kind, dep in rec["deps"]:
            states = _dep_state(dep)
            if not states or any(s in ACTIVE for s in states):
                ready = False
            elif kind == "afterok" and any(s != "COMPLETED" for s in states):
                if rec["opts"].get("kill-on-invalid-dep") == "yes":
                    update(rec["key"], state="CANCELLED", reason="DependencyNeverSatisfied")
                    return False
                ready = False
        if ready and rec["throttle"]:
            with locked():
                running = [r for r in records() if r["job"] == rec["job"] and r["state"] == "RUNNING"]
                if len(running) < rec["throttle"]:
                    r = read(rec["key"])
                    r["state"] = "RUNNING"
                    r["history"].append("RUNNING")
                    write(r)
                    return True
            ready = False
        if ready:
            return True
        time.sleep(0.1)


def _expand(path: str, rec: dict, task: int | None = None) -> str:
    job, _, index = rec["key"].partition("_")
    out = path.replace("%A", job).replace("%a", index).replace("%j", rec["key"] if not index else job)
    return out.replace("%t", str(task)) if task is not None else out


def _run(key: str) -> int:
    rec = read(key)
    if not _wait_dependencies(rec):
        return 0
    while True:
        rec = update(key, state="RUNNING", requeue=False)
        job, _, index = key.partition("_")
        opts = rec["opts"]
        nodes = int(opts.get("nodes", 1))
        env = {**os.environ, "SLURM_JOB_ID": key.replace("_", "9"), "SLURM_JOB_NAME": opts.get("job-name", ""),
               "SLURM_NTASKS": str(nodes * int(opts.get("ntasks-per-node", 1))), "SLURM_JOB_NUM_NODES": str(nodes),
               "SLURM_JOB_NODELIST": "fakenode", "SLURM_NODEID": "0", "SLURM_RESTART_COUNT": str(len(rec["runs"])),
               "SLURM_FAKE_KEY": key, "SLURM_SUBMIT_DIR": os.getcwd()}
        if index:
            env.update(SLURM_ARRAY_JOB_ID=job, SLURM_ARRAY_TASK_ID=index)
        out = _expand(opts.get("output", "slurm-%j.out"), rec)
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        start = time.time()
        with open(out, "a") as f:
            proc = subprocess.Popen(["bash", rec["script"]], env=env, stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        update(key, pgid=proc.pid)
        asked = None
        while proc.poll() is None:
            time.sleep(0.1)
            if read(key)["requeue"]:
                asked = asked or time.time()
                if time.time() - asked > 3:  # Slurm ends a requeued job's processes itself
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.returncode
        with locked():
            rec = read(key)
            rec["runs"].append([start, time.time()])
            rec["exit_code"] = rc
            if rec["requeue"]:
                rec["history"] += ["PENDING"]
                rec["state"] = "PENDING"
                write(rec)
                continue_ = True
            else:
                if rec["state"] != "CANCELLED":
                    rec["state"] = "COMPLETED" if rc == 0 else "FAILED"
                    rec["history"].append(rec["state"])
                write(rec)
                continue_ = False
        if not continue_:
            return 0
        time.sleep(0.2)


def srun(argv: list[str]) -> int:
    valued = {"--output", "--error", "--cpu-bind", "--ntasks", "-n", "--nodes", "-N"}
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        a = argv[i]
        if a in valued:
            opts[a], i = argv[i + 1], i + 2
        else:
            i += 1
    cmd = argv[i:]
    key = os.environ["SLURM_FAKE_KEY"]
    rec = read(key)
    n = int(os.environ.get("SLURM_NTASKS", "1"))
    procs = []
    for t in range(n):
        env = {**os.environ, "SLURM_PROCID": str(t), "SLURM_LOCALID": str(t), "SLURM_STEP_ID": "0",
               "SLURM_STEP_NUM_TASKS": str(n)}
        out = open(_expand(opts.get("--output", "/dev/null"), rec, t), "a")
        err = open(_expand(opts["--error"], rec, t), "a") if "--error" in opts else subprocess.STDOUT
        procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=err))
    update(key, tasks=[p.pid for p in procs])
    codes = [p.wait() for p in procs]
    return next((c if c > 0 else 1 for c in codes if c != 0), 0)


def _elapsed(rec: dict) -> str:
    spans = list(rec["runs"])
    total = sum(b - a for a, b in spans)
    if rec["state"] == "RUNNING" and rec.get("pgid"):
        total += 0  # the running attempt is counted when it ends
    s = int(total)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def sacct(argv: list[str]) -> int:
    fields = ["JobID", "State"]
    ids: list[str] = []
    header = True
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-o", "--format"):
            fields, i = argv[i + 1].split(","), i + 2
            continue
        if a in ("-j", "--jobs"):
            ids += argv[i + 1].split(","); i += 2
            continue
        if a in ("-n", "--noheader"):
            header = False
        i += 1
    if header:
        print("|".join(fields))
    for rec in records():
        if not any(rec["key"] == j or str(rec["job"]) == j for j in ids):
            continue
        values = {"JobID": rec["key"], "State": rec["state"], "NodeList": "fakenode", "Elapsed": _elapsed(rec),
                  "ExitCode": f"{rec['exit_code'] or 0}:0", "JobName": rec["opts"].get("job-name", "")}
        print("|".join(values.get(f, "") for f in fields))
    return 0


def _signal_tasks(rec: dict, sig: int) -> None:
    for pid in rec.get("tasks") or []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _key(job_id: str) -> str:
    return job_id if _path(job_id).exists() else next(r["key"] for r in records() if str(r["job"]) == job_id)


def scontrol(argv: list[str]) -> int:
    if argv[:1] != ["requeue"]:
        print(f"fake scontrol: unsupported {argv}", file=sys.stderr)
        return 1
    update(_key(argv[1]), requeue=True, state="REQUEUED")
    return 0


def scancel(argv: list[str]) -> int:
    sig = None
    ids = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--signal", "-s"):
            sig, i = argv[i + 1], i + 2
            continue
        ids.append(argv[i]); i += 1
    for job_id in ids:
        keys = [r["key"] for r in records() if r["key"] == job_id or str(r["job"]) == job_id]
        for key in keys:
            rec = read(key)
            if sig:
                _signal_tasks(rec, getattr(signal, sig if sig.startswith("SIG") else "SIG" + sig))
            else:
                update(key, state="CANCELLED")
                if rec.get("pgid"):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(rec["pgid"], signal.SIGKILL)
    return 0


def preempt(key: str) -> None:
    """What the scheduler does to a preempted job with ``--signal USR2@...``: PREEMPTED, then
    SIGTERM and the user signal to its tasks (submitit checkpoints and asks for a requeue)."""
    rec = update(key, state="PREEMPTED")
    _signal_tasks(rec, signal.SIGTERM)
    time.sleep(0.2)
    _signal_tasks(rec, signal.SIGUSR2)


def kill(key: str) -> None:
    """A lost node: every process of the job killed outright (the job ends FAILED)."""
    rec = read(key)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(rec["pgid"], signal.SIGKILL)
    _signal_tasks(rec, signal.SIGKILL)


COMMANDS = {"sbatch": sbatch, "srun": srun, "sacct": sacct, "scontrol": scontrol, "scancel": scancel}

if __name__ == "__main__":
    name, *rest = sys.argv[1:]
    if name == "_run":
        sys.exit(_run(rest[0]))
    sys.exit(COMMANDS[name](rest))
