"""Carry an unfinished reproduction to another machine through the repository, child by child.

    python benchmarks/reproduce_checkpoint.py save /work/repro_cpu/cpu-rerun    # after each child, or any time
    python benchmarks/reproduce_checkpoint.py restore ./repro_cpu               # on the new machine, then:
    whitebox-eval reproduce 000 001 002 003 004 --scale cpu --output ./repro_cpu --run-id cpu-rerun

``save`` copies every finished child of the reproduction folder (``runs/<child>/``: its
``results.json``, ``config.yaml`` and ``samples.jsonl``, gzipped with no time stamp, so an
unchanged child saves the same bytes) into ``--dest`` (default
``benchmarks/results/reproduce_cpu_progress/``), with the plan and each child's measured seconds.
With them go the arrays a claim reads back (the suites' statistics declare them,
``reproduce.vocabulary.carried_arrays``: the files as they are, and each pass whose name starts
with a declared prefix as one ``.npy`` per array in item order, ``arrays/passes/``),
and the run folders a child holds under ``runs/`` (a contamination child's checkpoint runs), saved
the same way. That is all a claim reads of a child. A finished child
whose folder feeds a child still to run (an SAE, a fine-tuned model, key neurons: a ``{run:...}``
in the other's settings) is kept back until that child has finished too, since its files are not
carried. No copied file keeps an absolute path of this machine (``reproduce_commit.py``'s rule).
A child the plan skips (HumanEval, without ``--allow-code-execution``) that a call allowing it
finished in a reproduction folder beside this one is saved too, and the command ``progress.md``
gives to go on allows it. It writes ``progress.md``: each child saved, kept back or still to run,
and the share of the plan's estimated work done.

``restore`` writes the saved children as finished run folders under ``OUTPUT/checkpoint/runs/``;
``reproduce`` with that ``--output`` reuses a finished child found in any reproduction folder
under it, so it runs only the rest.

``compare`` sets each saved child beside the committed child of the same name (``--against``,
default ``benchmarks/results/reproduce_cpu/runs``: a child is named by its settings, so the same
name is the same run): the values of results.json both hold (dates, versions and timings left
out) counted identical or not, the differing ones named with both values; it writes the table
into progress.md too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from reproduce_commit import copy_relative, path_roots, refuse_absolute, relative  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "benchmarks" / "results" / "reproduce_cpu_progress"
AGAINST = ROOT / "benchmarks" / "results" / "reproduce_cpu" / "runs"
FILES = ("results.json", "config.yaml")
SAMPLES = "samples.jsonl"
COMPARED = "## Beside the committed children of the same name"


def _refs(settings) -> set[str]:
    """The children a child's settings name (``{run:ID}``)."""
    import re

    return set(re.findall(r"\{run:([^{}]+)\}", json.dumps(settings)))


def save(folder: Path, dest: Path, data_root: Path | None = None) -> dict[str, str]:
    """Copy the finished children of ``folder`` into ``dest``; each child's state by run id."""
    from whitebox_eval.reproduce.children import finished_copy
    from whitebox_eval.runs.finished import is_finished

    plan = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
    children = plan["children"]
    where = {}
    for c in children:
        here = folder / "runs" / c["run_id"]
        if c.get("skip") and not is_finished(here):  # HumanEval without --allow-code-execution: a call allowing it ran beside
            here = finished_copy(folder, folder.parent, c["run_id"]) or here
        where[c["run_id"]] = here
    finished = {run for run, path in where.items() if is_finished(path)}
    feeds: dict[str, set[str]] = {}
    for c in children:
        for ref in _refs(c.get("settings", {})) if not c.get("skip") else ():  # a child never run waits for nothing
            feeds.setdefault(ref, set()).add(c["run_id"])
    roots = path_roots(folder, data_root)
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "runs").mkdir(parents=True)
    copy_relative(folder / "plan.json", dest / "plan.json", roots)
    timing = json.loads((folder / "timing.json").read_text(encoding="utf-8")) if (folder / "timing.json").is_file() else {}
    state, seconds = {}, {}
    for c in children:
        run = c["run_id"]
        if c.get("skip") and run not in finished:
            state[run] = f"not run: {c['skip']}"
        elif run not in finished:
            state[run] = "to run"
        elif waiting := sorted(feeds.get(run, set()) - finished):
            state[run] = f"kept back: its folder feeds {', '.join(waiting)}, still to run"
        else:
            _save_child(where[run], dest / "runs" / run, roots)
            state[run] = "saved"
            if run in timing:
                seconds[run] = timing[run]
    (dest / "timing.json").write_text(json.dumps(seconds, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (dest / "progress.md").write_text(progress(plan, state, dest), encoding="utf-8")
    return state


def _save_child(src: Path, out: Path, roots) -> None:
    """One finished run folder's files, samples (gzipped) and read-back arrays; a run it holds under
    ``runs/`` (a contamination child's checkpoint runs) the same way."""
    out.mkdir(parents=True)
    for name in FILES:
        if (src / name).is_file():
            copy_relative(src / name, out / name, roots)
    if (src / SAMPLES).is_file():
        text = refuse_absolute(relative((src / SAMPLES).read_text(encoding="utf-8"), roots), src / SAMPLES)
        (out / (SAMPLES + ".gz")).write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))  # no time stamp
    _save_arrays(src, out)
    for inner in sorted(p for p in (src / "runs").iterdir() if (p / "config.yaml").is_file()) if (src / "runs").is_dir() else ():
        (out / "runs").mkdir(exist_ok=True)
        _save_child(inner, out / "runs" / inner.name, roots)


def _restore_child(src: Path, out: Path) -> None:
    out.mkdir(parents=True)
    for name in FILES:
        if (src / name).is_file():
            shutil.copy(src / name, out / name)
    if (src / (SAMPLES + ".gz")).is_file():
        (out / SAMPLES).write_bytes(gzip.decompress((src / (SAMPLES + ".gz")).read_bytes()))
    _restore_arrays(src, out)
    for inner in sorted(p for p in (src / "runs").iterdir() if p.is_dir()) if (src / "runs").is_dir() else ():
        _restore_child(inner, out / "runs" / inner.name)


def _save_arrays(src: Path, out: Path) -> None:
    """The arrays a claim reads back: files as they are, passes as ``passes/<pass>.<array>.npy`` (item order)."""
    import numpy as np
    from whitebox_eval.reproduce.vocabulary import carried_arrays
    from whitebox_eval.runs.parts import read_parts
    from whitebox_eval.runs.passes import INDEX_KEY, SAMPLES_KEY

    ARRAY_FILES, PASS_PREFIXES = carried_arrays()
    for name in ARRAY_FILES:
        if (src / "arrays" / name).is_file():
            (out / "arrays").mkdir(exist_ok=True)
            shutil.copy(src / "arrays" / name, out / "arrays" / name)
    parts = src / "arrays" / "parts"
    for pass_dir in sorted(parts.iterdir()) if parts.is_dir() else ():
        if not pass_dir.name.startswith(PASS_PREFIXES):
            continue
        rows: dict[str, dict[int, np.ndarray]] = {}
        for _, z in read_parts(pass_dir, set_aside=False):
            for key, value in z.items():
                if key not in (INDEX_KEY, SAMPLES_KEY):
                    rows.setdefault(key, {}).update(zip(map(int, z[INDEX_KEY]), value))
        (out / "arrays" / "passes").mkdir(parents=True, exist_ok=True)
        for key, by_row in rows.items():
            np.save(out / "arrays" / "passes" / f"{pass_dir.name}.{key}.npy", np.stack([by_row[i] for i in sorted(by_row)]))


def _restore_arrays(src: Path, out: Path) -> None:
    """The saved arrays back in a run folder's layout (each pass one part holding every item)."""
    import numpy as np
    from whitebox_eval.runs.parts import write_part
    from whitebox_eval.runs.passes import INDEX_KEY

    for path in sorted((src / "arrays").glob("*")) if (src / "arrays").is_dir() else ():
        if path.is_file():
            (out / "arrays").mkdir(exist_ok=True)
            shutil.copy(path, out / "arrays" / path.name)
    by_pass: dict[str, dict[str, np.ndarray]] = {}
    for path in sorted((src / "arrays" / "passes").glob("*.npy")) if (src / "arrays" / "passes").is_dir() else ():
        name, key = path.stem.rsplit(".", 1)
        by_pass.setdefault(name, {})[key] = np.load(path, allow_pickle=False)
    for name, arrays in by_pass.items():
        n = len(next(iter(arrays.values())))
        write_part(out / "arrays" / "parts" / name / f"{0:08d}.npz", **{INDEX_KEY: np.arange(n, dtype=np.int64)}, **arrays)


def _estimated(child: dict) -> float:
    """The plan's estimate of a child's seconds on this machine's kind (``reproduce.costs``)."""
    from whitebox_eval.reproduce import costs

    if child.get("skip"):
        return 0.0
    return costs.estimate(child["suite"], child["mode"], child["model"], child["settings"])[1]


def _dest_option(dest: Path | None) -> str:
    """`` --dest PATH`` for ``restore`` where the children were saved elsewhere than the default
    (relative to the repository where inside it), else nothing."""
    where = Path(dest).resolve() if dest is not None else DEST.resolve()
    if where == DEST.resolve():
        return ""
    try:
        where = where.relative_to(ROOT.resolve())
    except ValueError:
        pass
    return f" --dest {where.as_posix()}"


def progress(plan: dict, state: dict[str, str], dest: Path | None = None) -> str:
    """progress.md: one row a child, and the estimated work the saved children stand for; its
    restore command names ``dest`` where that is not the default."""
    seconds = {c["run_id"]: _estimated(c) for c in plan["children"]}
    total = sum(seconds.values()) or 1
    done = sum(seconds[r] for r, s in state.items() if s == "saved")
    n_saved = sum(s == "saved" for s in state.values())
    lines = [f"# Reproduction at scale {plan.get('scale')}: {n_saved} of {len(state)} children saved "
             f"({done / total:.0%} of the plan's estimated work)", "",
             "To go on (any machine; the data root is where the shared samples are):", "",
             "    python benchmarks/reproduce_checkpoint.py restore OUTPUT" + _dest_option(dest),
             f"    whitebox-eval reproduce {' '.join(plan.get('papers') or [])} --scale {plan.get('scale')} "
             + " ".join(f"--model {m}" for m in plan.get("models") or []) + " --data-root DATA --output OUTPUT"
             + (" --allow-code-execution" if any("--allow-code-execution" in (c.get("skip") or "")
                                                for c in plan["children"]) else ""),
             "", "It reuses these children and runs the rest.", "",
             "| child | estimated | state |", "|---|---|---|"]
    for c in plan["children"]:
        lines.append(f"| {c['run_id']} | {seconds[c['run_id']] / 60:.0f} min | {state[c['run_id']]} |")
    return "\n".join(lines) + "\n"


def _leaves(x, path: str = ""):
    """(path, value) of every number, text, bool or null of a JSON value."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, f"{path}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, x


def compare(dest: Path, against: Path, roots: list[tuple[str, str]] = ()) -> list[str]:
    """Rows ``| child | values both hold | identical | floats only | other |`` of each saved child that
    has a committed twin: a value differing only in float rounding (both numbers, one a float) is
    counted apart with the largest relative gap; any other is named with both values (the first
    three). ``roots``: absolute prefixes to make relative in the twin first (a committed file kept a
    path of the machine that made it). The children without a twin are named after the table."""
    from same_numbers import _number, _strip

    rows, new = [], []
    for child in sorted(p for p in (dest / "runs").iterdir() if p.is_dir()):
        twin = against / child.name / "results.json"
        if not twin.is_file():
            new.append(child.name)
            continue
        a = dict(_leaves(_strip(json.loads(relative(twin.read_text(encoding="utf-8"), roots)))))
        b = dict(_leaves(_strip(json.loads((child / "results.json").read_text(encoding="utf-8")))))
        shared = sorted(set(a) & set(b))
        differ = [k for k in shared if a[k] != b[k] and not (a[k] != a[k] and b[k] != b[k])]  # NaN is NaN
        floats = [k for k in differ if _number(a[k]) and _number(b[k]) and (isinstance(a[k], float) or isinstance(b[k], float))]
        other = [k for k in differ if k not in floats]
        gap = max((abs(a[k] - b[k]) / max(abs(a[k]), abs(b[k])) for k in floats), default=0.0)
        shown = "; ".join(f"`{k}` {json.dumps(a[k])[:40]} -> {json.dumps(b[k])[:40]}" for k in other[:3])
        rows.append(f"| {child.name} | {len(shared)} | {len(shared) - len(differ)} | "
                    f"{len(floats)}{f' (largest relative gap {gap:.1e})' if floats else ''} | "
                    f"{len(other)}{': ' + shown if shown else ''} |")
    head = ["| child | values both hold | identical | floats only | other |", "|---|---|---|---|---|"]
    tail = [f"No committed child of the same name (new settings): {', '.join(new)}."] if new else []
    return head + rows + ([""] + tail if tail else [])


def restore(dest: Path, output: Path) -> int:
    """The saved children as finished run folders under ``output/checkpoint/runs``; how many."""
    target = output / "checkpoint"
    runs = sorted(p for p in (dest / "runs").iterdir() if p.is_dir())
    for src in runs:
        out = target / "runs" / src.name
        if out.exists():
            shutil.rmtree(out)
        _restore_child(src, out)
    shutil.copy(dest / "timing.json", target / "timing.json")
    return len(runs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("save", help="copy the finished children of a reproduction folder into --dest")
    s.add_argument("folder", type=Path, help="a reproduction folder (holds plan.json and runs/)")
    s.add_argument("--dest", type=Path, default=DEST, help="where they go (default: %(default)s)")
    s.add_argument("--data-root", type=Path, default=None, help="the data root the data paths are made relative to")
    c = sub.add_parser("compare", help="each saved child beside the committed one of the same name")
    c.add_argument("--dest", type=Path, default=DEST, help="where they were saved (default: %(default)s)")
    c.add_argument("--against", type=Path, default=AGAINST, help="committed child runs (default: %(default)s)")
    c.add_argument("--folder", type=Path, default=None,
                   help="the reproduction folder: its data root and model folders made relative in the twins too")
    r = sub.add_parser("restore", help="write the saved children under OUTPUT/checkpoint/runs")
    r.add_argument("output", type=Path, help="the --output the reproduction will be run with")
    r.add_argument("--dest", type=Path, default=DEST, help="where they were saved (default: %(default)s)")
    args = ap.parse_args(argv)
    if args.what == "save":
        state = save(args.folder, args.dest, args.data_root)
        print(f"{sum(s == 'saved' for s in state.values())} of {len(state)} children saved to {args.dest}; "
              f"{sum(s.startswith('kept back') for s in state.values())} kept back, "
              f"{sum(s == 'to run' for s in state.values())} to run")
    elif args.what == "compare":
        table = compare(args.dest, args.against, path_roots(args.folder, None) if args.folder else ())
        print("\n".join(table))
        progress_md = args.dest / "progress.md"
        text = progress_md.read_text(encoding="utf-8").split(COMPARED)[0].rstrip("\n")
        progress_md.write_text(f"{text}\n\n{COMPARED}\n\n" + "\n".join(table) + "\n", encoding="utf-8")
    else:
        print(f"{restore(args.dest, args.output)} children restored under {args.output / 'checkpoint' / 'runs'}")


if __name__ == "__main__":
    main()
