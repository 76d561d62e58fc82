"""Time ``whitebox-eval reproduce all`` at the quick scale and write the timing table.

    python benchmarks/reproduce_timing.py --data-root ../shared/datasets            # run, then write
    python benchmarks/reproduce_timing.py --from runs/reproduce-all-quick            # a finished folder
    python benchmarks/reproduce_timing.py --paper 003 --scale micro --model MODEL_DIR --out /tmp/t   # small

Runs (or resumes) the reproduction in this process while a thread samples the machine's
load average, then writes ``benchmarks/results/reproduce_timing.md`` and ``.json``: wall
minutes per paper and model (a child shared by papers counts for each), seconds per item
and per unit of work for each suite and model (the units of
:mod:`whitebox_eval.reproduce.costs`, so each suite record's ``rate`` and costs' ``MODEL_FACTOR`` can be set from
them), the verdicts, and the load the run shared the machine with. A benchmark, not a
test: nothing is asserted about the times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time
from pathlib import Path

from whitebox_eval import suites
from whitebox_eval.reproduce import costs, spec

ROOT = Path(__file__).resolve().parents[1]


class LoadSampler(threading.Thread):
    def __init__(self, every: float = 30.0) -> None:
        super().__init__(daemon=True)
        self.every, self.samples, self._stop = every, [], threading.Event()

    def run(self) -> None:
        while not self._stop.wait(0 if not self.samples else self.every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> list[float]:
        self._stop.set()
        return self.samples


def _log_span(path: Path) -> float | None:
    """Seconds between the first and the last time stamp of a run.log (None without one)."""
    from datetime import datetime

    try:
        stamps = [line.split(" ", 1)[0] for line in path.read_text(encoding="utf-8").splitlines() if line[:2] == "20"]
        first, last = (datetime.strptime(x, "%Y-%m-%dT%H:%M:%SZ") for x in (stamps[0], stamps[-1]))
    except (OSError, IndexError, ValueError):
        return None
    return (last - first).total_seconds()


def summarize(folder: Path, load: list[float], wall: float | None) -> dict:
    plan = json.loads((folder / "plan.json").read_text())
    timing = json.loads((folder / "timing.json").read_text()) if (folder / "timing.json").is_file() else {}
    claims = json.loads((folder / "claims.json").read_text())
    per_paper: dict[str, dict[str, float]] = {}
    per_suite: dict[tuple[str, str], list[float]] = {}
    children = []
    for c in plan["children"]:
        seconds = timing.get(c["run_id"])
        if seconds is None:  # a child timed in an earlier, killed call: the span of its run.log
            seconds = _log_span(folder / "runs" / c["run_id"] / "run.log")
        items, units = suites.suite(c["suite"]).estimate(c["mode"], c["settings"])
        children.append({**{k: c[k] for k in ("run_id", "suite", "mode", "model")}, "items": items,
                         "units": units, "seconds": seconds,
                         "papers": sorted({p for p, _ in c["uses"]})})
        if seconds is None:
            continue
        for p in {p for p, _ in c["uses"]}:
            per_paper.setdefault(p, {}).setdefault(c["model"], 0.0)
            per_paper[p][c["model"]] += seconds
        per_suite.setdefault((c["suite"] + (f" {c['mode']}" if c["mode"] else ""), c["model"]), []).append(
            seconds / max(units, 1e-9))
    verdicts: dict[str, dict[str, int]] = {}
    for p in claims["papers"]:
        for c in p["claims"]:
            verdicts.setdefault(f"{p['number']} {c['model']}", {}).setdefault(c["verdict"], 0)
            verdicts[f"{p['number']} {c['model']}"][c["verdict"]] += 1
    papers = plan.get("papers") or sorted(spec.papers())
    every = sorted(spec.papers()) == sorted(papers)
    shown = Path(folder)  # no absolute path of this machine in a committed file: the folder as --output/--run-id
    return {"folder": str(Path(shown.parent.name, shown.name) if shown.is_absolute() else shown), "papers": "all" if every else " ".join(papers), "scale": plan["scale"],
            "models": plan["models"], "wall_seconds": wall,
            "children": children, "per_paper_model_seconds": per_paper,
            "seconds_per_unit": {f"{s} | {m}": statistics.median(v) for (s, m), v in sorted(per_suite.items())},
            "verdicts": verdicts, "load_average": {"samples": len(load), "mean": statistics.mean(load) if load else None,
                                                    "max": max(load) if load else None},
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}


def markdown(s: dict) -> str:
    models = s["models"]
    lines = [f"# `whitebox-eval reproduce {s['papers']}` at the {s['scale']} scale: time per paper and model", "",
             f"Folder `{s['folder']}`; {s['machine']['cpus']} CPU cores ({s['machine']['platform']}).", ""]
    load = s["load_average"]
    if load["mean"] is not None:
        lines += [f"The machine was shared: the 1-minute load average, sampled every 30 s during the run, was "
                  f"{load['mean']:.1f} on average (max {load['max']:.1f}) on {s['machine']['cpus']} cores, so "
                  f"this run had roughly {min(1.0, s['machine']['cpus'] / max(load['mean'], 1e-9)):.0%} of the "
                  "machine; an idle machine runs it correspondingly faster.", ""]
    if s["wall_seconds"]:
        lines += [f"Whole run: {costs.duration(s['wall_seconds'])} (h:mm:ss).", ""]
    lines += ["| paper | " + " | ".join(f"{m} (min)" for m in models) + " |", "|---|" + "---|" * len(models)]
    for p, by_model in sorted(s["per_paper_model_seconds"].items()):
        lines.append(f"| {p} | " + " | ".join(f"{by_model.get(m, 0) / 60:.1f}" for m in models) + " |")
    lines += ["", "A child run shared by two papers counts for both; children reused from an earlier call are "
              "not timed (blank below).", "", "| child run | model | items | seconds | s / item |", "|---|---|---|---|---|"]
    for c in s["children"]:
        sec = c["seconds"]
        shown = ("", "") if sec is None else (f"{sec:.0f}", f"{sec / max(c['items'], 1):.2f}")
        lines.append(f"| {c['run_id']} | {c['model']} | {c['items']} | {shown[0]} | {shown[1]} |")
    lines += ["", "Seconds per unit of work (the units of the suite records; their `rate` and costs.py's MODEL_FACTOR come from these):",
              "", "| suite | model | s / unit |", "|---|---|---|"]
    for key, v in s["seconds_per_unit"].items():
        suite, model = key.split(" | ")
        lines.append(f"| {suite} | {model} | {v:.4f} |")
    lines += ["", "Verdicts:", "", "| paper, model | verdicts |", "|---|---|"]
    for k, v in sorted(s["verdicts"].items()):
        lines.append(f"| {k} | " + ", ".join(f"{n} {x}" for x, n in sorted(v.items())) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="folder", default=None, help="summarize this finished reproduction folder only")
    ap.add_argument("--data-root", default=None, help="as whitebox-eval reproduce --data-root")
    ap.add_argument("--output", default="runs")
    ap.add_argument("--run-id", default="reproduce-all-quick")
    ap.add_argument("--model", action="append", default=[], help="repeatable; default both bundled models")
    ap.add_argument("--paper", default="all", help="as whitebox-eval reproduce PAPERS (default: %(default)s)")
    ap.add_argument("--scale", default="quick", help="as whitebox-eval reproduce --scale (default: %(default)s)")
    ap.add_argument("--load-log", default=None,
                    help="with --from: a file of load samples written during the run (lines '<time> <loadavg 1 5 15 ...>')")
    ap.add_argument("--wall", type=float, default=None, help="with --from: the run's wall seconds, if measured outside")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "reproduce_timing"),
                    help="path without suffix: writes .md and .json")
    a = ap.parse_args()
    load: list[float] = []
    wall = None
    if a.folder:
        folder = Path(a.folder)
        wall = a.wall
        if a.load_log:
            load = [float(line.split()[1]) for line in Path(a.load_log).read_text().splitlines() if line.strip()]
    else:
        from whitebox_eval import studies

        sampler = LoadSampler()
        sampler.start()
        start = time.monotonic()
        folder = Path(a.output) / a.run_id
        r = studies.reproduce(a.paper, a.output, run_id=a.run_id, resume=folder.exists(), models=a.model,
                              scale=a.scale, data_root=a.data_root)
        wall = time.monotonic() - start
        load = sampler.stop()
        folder = r.folder
    s = summarize(folder, load, wall)
    Path(a.out + ".json").write_text(json.dumps(s, indent=1) + "\n")
    Path(a.out + ".md").write_text(markdown(s))
    print(markdown(s))


if __name__ == "__main__":
    main()
