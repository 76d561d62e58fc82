"""kill -9 an MCQA run again and again, then --resume: the same run as one never killed.

1. An uninterrupted run (``--run-id whole``).
2. The same command (``--run-id killed``) started ``--kills`` times, each time killed with
   SIGKILL: odd attempts from outside at a random moment (uniform over the time the work
   left should take, estimated from the uninterrupted run and the share of array parts
   still missing, times 2 / (kills left + 1) so that later kills still find work), even
   attempts by the process itself halfway through a random one of the next part writes
   (half the ``.npz`` bytes written, then SIGKILL). Every start after the first passes
   ``--resume``.
3. One last ``--resume`` without a kill; then results.json, samples.jsonl and every
   ``arrays/*.npy`` must equal the uninterrupted run's byte for byte (same machine, one
   thread, so every batch is computed by the same kernels).

    python benchmarks/kill_resume.py                       # SmolLM2-135M, 64 items, 10 kills
    python benchmarks/kill_resume.py --model tiny --limit 24 --kills 4   # a tiny random llama
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(kill_part: int | None, args: list[str]) -> None:
    """Run the CLI in this process; with ``kill_part`` = k, die during the k-th part write."""
    if kill_part:
        import numpy as np

        real, calls = np.savez, [0]

        def savez(file, *a, **k):
            calls[0] += 1
            if calls[0] == kill_part:
                buf = io.BytesIO()
                real(buf, *a, **k)
                data = buf.getvalue()
                f = file if hasattr(file, "write") else open(file, "wb")
                f.write(data[: len(data) // 2])
                f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return real(file, *a, **k)

        np.savez = savez
    from whitebox_eval.cli import main

    main(args)


def command(model: str, out: Path, run_id: str, limit: int, batch_size: int, resume: bool) -> list[str]:
    return ["mcqa", "--model", model, "--task", "ssd", "--limit", str(limit), "--min-val-items", "8",
            "--batch-size", str(batch_size), "--output", str(out), "--run-id", run_id, *(["--resume"] if resume else [])]


def start(args: list[str], kill_part: int | None = None) -> subprocess.Popen:
    """Start the CLI in a child process; its stderr goes to a file (``proc.stderr_path``)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(kill_part or 0), "--", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    err = tempfile.NamedTemporaryFile("w+", suffix=".stderr", delete=False)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True, env=env)
    proc.stderr_path = Path(err.name)
    err.close()
    return proc


def finish(proc: subprocess.Popen) -> str:
    """Wait for ``proc``; returns its stderr."""
    proc.wait()
    text = proc.stderr_path.read_text(errors="replace")
    proc.stderr_path.unlink(missing_ok=True)
    return text


def wait_loaded(proc: subprocess.Popen, log: Path, lines_before: int) -> float:
    """Wait until the run logs its item count (the model is loaded); returns the wait."""
    t0 = time.monotonic()
    while proc.poll() is None:
        if log.is_file() and any("items, model" in line for line in log.read_text().splitlines()[lines_before:]):
            break
        time.sleep(0.05)
    return time.monotonic() - t0


def state(run: Path) -> str:
    samples = run / "samples.jsonl"
    n = samples.read_bytes().count(b"\n") if samples.is_file() else 0
    parts = {p.name: len(list(p.glob("*.npz"))) for p in sorted((run / "arrays" / "parts").glob("*"))}
    return f"samples {n}, parts {parts}, results.json {'yes' if (run / 'results.json').is_file() else 'no'}"


def _content(path: Path) -> bytes:
    """The file's bytes; for results.json without lm-eval's ``date`` line (each run folder's start time)."""
    lines = path.read_bytes().splitlines(keepends=True)
    if path.name == "results.json":
        lines = [line for line in lines if not line.lstrip().startswith(b'"date": ')]
    return b"".join(lines)


def compare(a: Path, b: Path) -> dict:
    files = ["results.json", "samples.jsonl"] + sorted(f"arrays/{p.name}" for p in (a / "arrays").glob("*.npy"))
    extra = sorted({f"arrays/{p.name}" for p in (b / "arrays").glob("*.npy")} - set(files))
    return {"files_compared": len(files), "differ": [f for f in files if _content(a / f) != _content(b / f)],
            "only_in_killed": extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="a model spec, or 'tiny' (a random llama built here)")
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="folder for the runs (default: a temporary one)")
    ap.add_argument("--json", type=Path, default=None, help="write the outcome here")
    ns = ap.parse_args()
    rng = random.Random(ns.seed)
    with tempfile.TemporaryDirectory() as tmp:
        out = ns.out or Path(tmp)
        model = ns.model
        if model == "tiny":
            sys.path.insert(0, str(HERE.parent / "tests" / "faults"))
            from cases import build_model_dir

            model = str(build_model_dir(Path(tmp) / "tiny-model"))
        t0 = time.monotonic()
        whole = start(command(model, out, "whole", ns.limit, ns.batch_size, False))
        load = wait_loaded(whole, out / "whole" / "run.log", 0)
        err = finish(whole)
        if whole.returncode != 0:
            sys.exit(f"the uninterrupted run failed:\n{err}")
        work = time.monotonic() - t0 - load
        n_parts = sum(1 for _ in (out / "whole" / "arrays" / "parts").rglob("*.npz"))
        print(f"uninterrupted run: {time.monotonic() - t0:.1f} s ({load:.1f} s to load, {work:.1f} s of work), "
              f"{n_parts} array parts", flush=True)
        killed = out / "killed"
        attempts = []
        for i in range(ns.kills):
            args = command(model, out, "killed", ns.limit, ns.batch_size, resume=i > 0)
            log = killed / "run.log"
            before = len(log.read_text().splitlines()) if log.is_file() else 0
            remaining = n_parts - sum(1 for _ in (killed / "arrays" / "parts").rglob("*.npz"))
            share = 2 / (ns.kills - i + 1)  # the work left is spread over the kills left (on average)
            if i % 2 == 1 and remaining > 0:
                k = rng.randint(1, max(1, min(remaining, round(remaining * share))))
                proc = start(args, kill_part=k)
                how = f"SIGKILL during its part write no. {k} of {remaining} left"
            else:  # a random moment of the work that is left (or of the final steps)
                proc = start(args)
                wait_loaded(proc, log, before)
                delay = rng.uniform(0, work * max(remaining, 1) / n_parts * share)
                try:
                    proc.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                how = f"SIGKILL from outside {delay:.2f} s after the model was loaded ({remaining} parts left)"
            err = finish(proc)
            killed_now = proc.returncode == -signal.SIGKILL
            if proc.returncode not in (0, -signal.SIGKILL):
                sys.exit(f"attempt {i + 1} ended with {proc.returncode}:\n{err}")
            note = how if killed_now else f"{how}: not reached, the run finished (exit {proc.returncode})"
            attempts.append({"attempt": i + 1, "how": note, "killed": killed_now, "after": state(killed)})
            print(f"{i + 1:2d}. {note}; left {attempts[-1]['after']}", flush=True)
        final = start(command(model, out, "killed", ns.limit, ns.batch_size, resume=True))
        err = finish(final)
        if final.returncode != 0:
            sys.exit(f"the final --resume failed:\n{err}")
        outcome = compare(out / "whole", killed)
        unreadable = [line for line in (killed / "run.log").read_text().splitlines() if "unreadable" in line]
        outcome.update(model=ns.model, limit=ns.limit, batch_size=ns.batch_size, kills=sum(a["killed"] for a in attempts),
                       attempts=attempts, torn_parts_recomputed=unreadable,
                       identical=not outcome["differ"] and not outcome["only_in_killed"])
        print(json.dumps({k: v for k, v in outcome.items() if k != "attempts"}, indent=1))
        print("IDENTICAL to the uninterrupted run" if outcome["identical"] else "DIFFERENT from the uninterrupted run")
        if ns.json:
            ns.json.write_text(json.dumps(outcome, indent=1) + "\n")
        if not outcome["identical"]:
            sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]) or None, sys.argv[4:])
    else:
        main()
