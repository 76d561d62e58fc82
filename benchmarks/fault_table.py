"""The bad-input and fault cases, run against two versions: the before/after table.

Every case of ``tests/faults/cases.py`` runs as its own ``python -m whitebox_eval``-like
process (a full disk / read-only output is simulated by making ``os.fsync`` fail from
its third call on, before the command starts). For each version the table shows the
exit code, the last line on stderr and whether the command left a run folder behind.
Extra rows: a torn ``arrays/parts`` file then ``--resume``, the mode of results.json, and
the GGUF cache key after editing one byte near the end of the file.

    python benchmarks/fault_table.py --before /tmp/base/src --after src --out benchmarks/results/fault_table.md
    python benchmarks/fault_table.py --before /tmp/base/src --issue 38 --out benchmarks/results/fault_table_38.md

``--case ID`` (repeatable) runs only those cases. ``--before`` is the ``src`` folder of the old version (e.g. ``git archive <commit> src | tar -x -C /tmp/base``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "faults"))
from kill_resume import _content  # noqa: E402  (results.json without its start-time line)
from cases import CASES, MCQA, build_fixtures, failing_fsync  # noqa: E402


def child(patch: str | None, args: list[str]) -> None:
    """Run one command line in this process (``--child``), with the fsync fault if asked."""
    if patch:
        os.fsync = failing_fsync(patch)
    from whitebox_eval.cli import main

    main(args)


def run(src: Path, args: list[str], patch: str | None = None, env: dict | None = None) -> tuple[int, str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", *(["--patch", patch] if patch else []), "--", *args]
    full_env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", **(env or {})}
    p = subprocess.run(cmd, capture_output=True, text=True, env=full_env)
    lines = [line for line in p.stderr.splitlines() if line.strip() and "it/s]" not in line]
    flagged = [line for line in lines if line.startswith(("error:", "Error:", "warning:")) or "Warning: " in line]
    last = (flagged or lines or [""])[-1]
    if p.returncode not in (0, 2) and "Traceback" in p.stderr:
        last = f"Traceback: {last}"
    return p.returncode, last


def runs_left(d: Path, before: set[str]) -> str:
    new = sorted({p.name for p in (d / "runs").iterdir()} - before)
    return ", ".join(new) or "-"


def stale_gguf_row(src: Path, d: Path) -> str:
    """Cache entry of a file, then of the same file with one byte near its end changed."""
    code = (
        "import os,sys\nfrom pathlib import Path\nfrom whitebox_eval.models import loading\n"
        "p=Path(sys.argv[1]); a=loading._gguf_cache_dir(p).name\n"
        "f=open(p,'r+b'); f.seek(-10,2); b=f.read(1); f.seek(-10,2); f.write(bytes([b[0]^255])); f.close()\n"
        "st=p.stat(); os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns+10**9))\n"
        "b=loading._gguf_cache_dir(p).name\nprint('new cache entry' if a!=b else 'SAME cache entry (stale weights)', a, b)\n")
    gguf = d / "edited.gguf"
    gguf.write_bytes(os.urandom(3 << 20))
    env = {**os.environ, "PYTHONPATH": str(src), "WHITEBOX_EVAL_CACHE": str(d / "cache")}
    p = subprocess.run([sys.executable, "-c", code, str(gguf)], capture_output=True, text=True, env=env)
    return (p.stdout.strip() or p.stderr.strip().splitlines()[-1]).split(" ")[0:3]


def extra_rows(src: Path, d: Path) -> dict[str, tuple[str, str, str]]:
    out = {}
    mcqa = [a.replace("{d}", str(d)) for a in MCQA]
    code, last = run(src, [*mcqa, "--run-id", "whole"])
    whole = d / "runs" / "whole"
    mode = oct((whole / "results.json").stat().st_mode & 0o777) if code == 0 else "?"
    out["results.json mode (umask 022)"] = (str(code), mode, "-")
    torn = d / "runs" / "torn"
    shutil.copytree(whole, torn)
    (torn / "results.json").unlink()
    part = sorted((torn / "arrays" / "parts" / "main").glob("*.npz"))[1]
    part.write_bytes(part.read_bytes()[:300])
    code, last = run(src, [*mcqa, "--run-id", "torn", "--resume"])
    same = code == 0 and _content(torn / "results.json") == _content(whole / "results.json")
    out["torn arrays/parts/main part, then --resume"] = (str(code), last if code else
                                                         f"finished; results.json {'identical' if same else 'DIFFERENT'}", "-")
    out["GGUF edited 1 byte near the end"] = ("-", " ".join(stale_gguf_row(src, d)[:3]), "-")
    return out


def table(versions: dict[str, Path], fixtures: Path, issue: int | None = None, only: list[str] | None = None) -> str:
    rows: dict[str, dict[str, tuple[str, str, str]]] = {}
    for label, src in versions.items():
        d = fixtures.parent / f"{label}-fixtures"
        shutil.copytree(fixtures, d, symlinks=True)
        for case in (c for c in CASES if (issue is None or c.issue == issue) and (not only or c.id in only)):
            existing = {p.name for p in (d / "runs").iterdir()}
            code, last = run(src, case.args(d), case.patch, case.env)
            args = case.args(d)
            log = d / "runs" / args[args.index("--run-id") + 1] / "run.log" if "--run-id" in args else None
            if code == 0 and log is not None and log.is_file():
                noted = [line for line in log.read_text().splitlines() if "skipped" in line]
                last = f"run.log: {noted[-1][21:]}" if noted else last
            rows.setdefault(case.id, {})[label] = (str(code), last.replace(str(d), "D"), runs_left(d, existing))
            print(f"[{label}] {case.id}: {code} {last[:150]}", flush=True)
        for key, value in (extra_rows(src, d) if issue in (None, 13) else {}).items():
            rows.setdefault(key, {})[label] = tuple(v.replace(str(d), "D") for v in value)
            print(f"[{label}] {key}: {value}", flush=True)
    labels = list(versions)
    head = "| case | " + " | ".join(f"{v}: exit | {v}: last stderr line | {v}: run folder left" for v in labels) + " |"
    lines = [head, "|" + "---|" * (1 + 3 * len(labels))]
    for case, by in rows.items():
        cells = []
        for v in labels:
            code, last, left = by.get(v, ("", "", ""))
            cells += [code, "`" + last.replace("|", "\\|")[:260] + "`" if last else "", left]
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nD = the fixture folder; exit 1 with `Traceback:` = an uncaught exception.\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="src folder of the old version")
    ap.add_argument("--after", type=Path, default=HERE.parent / "src", help="src folder of the new version")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here too")
    ap.add_argument("--issue", type=int, default=None, help="only the cases of this issue (13, 38)")
    ap.add_argument("--case", action="append", default=[], help="only this case (its id; repeatable)")
    ns = ap.parse_args()
    unknown = sorted(set(ns.case) - {c.id for c in CASES})
    if unknown:
        ap.error(f"unknown case(s) {unknown}")
    with tempfile.TemporaryDirectory() as tmp:
        fixtures = build_fixtures(Path(tmp) / "fixtures")
        text = table({"before": ns.before.resolve(), "after": ns.after.resolve()}, fixtures, ns.issue, ns.case)
    print(text)
    if ns.out:
        which = f" --issue {ns.issue}" if ns.issue else ""
        ns.out.write_text(f"# Faults and bad input: before / after (issue {ns.issue or '13 and 38'})\n\n"
                          f"`python benchmarks/fault_table.py --before {ns.before} --after {ns.after}{which}`\n\n{text}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        rest = sys.argv[2:]
        patch = None
        if rest[:1] == ["--patch"]:
            patch, rest = rest[1], rest[2:]
        child(patch, rest[1:] if rest[:1] == ["--"] else rest)
    else:
        main()
