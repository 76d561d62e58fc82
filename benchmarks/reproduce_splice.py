"""Put a trained column, or a base model's runs, of a new reproduction into a committed one, not re-running the rest.

    python benchmarks/reproduce_splice.py benchmarks/results/reproduce_cpu R/reproduce-001-004-cpu \\
        --column "smollm2-135m + arithmetic" --out R/cpu-spliced
    python benchmarks/reproduce_commit.py R/cpu-spliced --data-root DATA --dest benchmarks/results/reproduce_cpu ...

COMMITTED_DIR is a committed report (claims.json, evidence.json.gz, runs/<child>/{results.json,config.yaml});
NEW_FOLDER a reproduction folder whose column ``--column`` ran (its claims.json assembled: the reproduction
finished, or ``--reuse-only``). A trained column's claims and table cells (a base model's: those that read the
runs NEW_FOLDER ran on it, then Holm's family of the base models adjusted again), the entries and figures of
the runs NEW_FOLDER ran, replace the committed ones (:func:`whitebox_eval.reproduce.splice.splice`, whose docstring says
why the result is exactly what one reproduction running every child would have written; anything else that
differs stops it, named). OUT becomes a reproduction folder that ``reproduce_commit.py`` accepts: claims.json,
evidence.json.gz, reproduction.md/.html (``reproduce.write_outputs``) and runs/ holding every committed run's
files and the whole folders of the runs NEW_FOLDER ran (hard links where the file system allows, a copy
otherwise); paths into NEW_FOLDER (and a reproduction folder beside it, whence a child was reused) point into
OUT, in the content and in those runs' results.json and config.yaml. It prints, per paper, each replaced
claim's verdict (raw and after Holm) old -> new, and each other claim whose verdict after Holm moved.
With ``--md`` (the committed report's markdown) the report's command line is the committed one with this
splice added, so the splices that made a report stay listed in it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from whitebox_eval import reproduce  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.reproduce import splice as splicing  # noqa: E402

REWRITTEN = ("results.json", "config.yaml")  # what reproduce_commit.py copies of a run
SPLICED = " (benchmarks/reproduce_splice.py)"  # closes the command line of a spliced report


def read(folder: Path) -> dict:
    """A reproduction's content with its evidence in place (:func:`whitebox_eval.reproduce.merged`)."""
    claims = folder / reproduce.CLAIMS_FILE
    if not claims.is_file():
        raise WhiteboxError(f"{folder} holds no {reproduce.CLAIMS_FILE}: assemble it first (let the reproduction "
                            "finish, or run it again with --resume --reuse-only)")
    content = json.loads(claims.read_text(encoding="utf-8"))
    ev = folder / reproduce.EVIDENCE_FILE
    evidence = json.loads(gzip.decompress(ev.read_bytes())) if ev.is_file() else {}
    return reproduce.merged(content, evidence)


def prefixes(new: Path, out: Path) -> list[tuple[str, str]]:
    """(absolute prefix, its replacement), longest first: NEW_FOLDER, and a reproduction folder beside it (a
    child reused from there is runs/<child> in NEW_FOLDER too), become OUT."""
    folders = {new, new.resolve()}
    parent = new.resolve().parent
    folders |= {p for p in parent.iterdir() if p.is_dir() and (p / "runs").is_dir()} if parent.is_dir() else set()
    to = str(out.resolve()) + "/"
    return sorted(((str(f) + "/", to) for f in folders if str(f) + "/" != to), key=lambda r: -len(r[0]))


def rewrite(text: str, roots: list[tuple[str, str]]) -> str:
    for prefix, replacement in roots:
        text = text.replace(prefix, replacement)
    return text


def command(base: dict, columns: list[str], new_name: str, committed_md: str | None) -> str:
    """The spliced report's command line: the committed one (the first backticked line of its markdown, when
    given) with ``COLUMNS from NEW_NAME`` added, else the papers' command and this splice alone."""
    this = f"{', '.join(columns)} from {new_name}"
    lines = [ln for ln in (committed_md or "").splitlines() if ln.startswith("`whitebox-eval reproduce ")]
    before = lines[0][1:].split("`", 1)[0] if lines else ""
    if before.endswith(SPLICED):
        return f"{before[:-len(SPLICED)]}, {this}{SPLICED}"
    if not before:
        before = f"whitebox-eval reproduce {' '.join(p['number'] for p in base['papers'])} --scale {base['scale']}"
    return f"{before}; {this}{SPLICED}"


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("committed", type=Path, help="the committed report (claims.json, evidence.json.gz, runs/)")
    ap.add_argument("new", type=Path, help="a reproduction folder whose column (trained, or a base model's runs) ran")
    ap.add_argument("--column", action="append", required=True,
                    help="a trained column, '<base model> + <label>' (taken whole), or a base model, '<base model>' "
                         "(its claims and cells that read the runs NEW_FOLDER ran on it; Holm's family of the base "
                         "models adjusted again)")
    ap.add_argument("--out", type=Path, required=True, help="the reproduction folder to write (must not exist)")
    ap.add_argument("--md", type=Path, help="the committed report's markdown (reproduce_all_SCALE.md): its command "
                                           "line, with this splice added, heads the new one")
    args = ap.parse_args(argv)
    out = args.out
    if out.exists():
        raise SystemExit(f"{out} exists: give a new --out")
    if args.md and not args.md.is_file():
        raise SystemExit(f"--md {args.md}: no such file (the committed report's markdown, e.g. "
                         "benchmarks/results/reproduce_all_cpu.md)")
    md = args.md.read_text(encoding="utf-8") if args.md else None
    try:
        base, new = read(args.committed), read(args.new)
        roots = prefixes(args.new, out)
        new = json.loads(rewrite(json.dumps(new), roots))
        spliced, rows = splicing.spliced(base, new, args.column)
    except WhiteboxError as e:
        raise SystemExit(str(e)) from None
    out.mkdir(parents=True)
    (out / "runs").mkdir()
    for run in sorted((args.committed / "runs").iterdir()) if (args.committed / "runs").is_dir() else ():
        if run.is_dir():
            shutil.copytree(run, out / "runs" / run.name)
    papers = {p["number"] for p in new["papers"]}
    ran = sorted({r["run"] for p in new["papers"] if p["number"] in papers for r in p["runs"] if r.get("status") == "done"})
    for run in ran:
        src = (args.new / "runs" / run).resolve()
        if not src.is_dir():
            raise SystemExit(f"{args.new} ran {run} but holds no runs/{run}")
        dst = out / "runs" / run
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, copy_function=_link_or_copy)
        for name in REWRITTEN:  # a fresh file: a hard link's source stays as it was
            if (dst / name).is_file():
                text = rewrite((dst / name).read_text(encoding="utf-8"), roots)
                (dst / name).unlink()
                (dst / name).write_text(text, encoding="utf-8")
    reproduce.write_outputs(out, spliced, command(base, args.column, args.new.name, md))
    print(f"spliced {', '.join(args.column)} of {args.new} into {args.committed}: {out} "
          f"({len(ran)} runs from the new reproduction)")
    for number in dict.fromkeys(r["paper"] for r in rows):
        mine = [r for r in rows if r["paper"] == number and r["part"] == "replaced"]
        held = [r for r in rows if r["paper"] == number and r["part"] == "Holm"]
        changed = sum(r["old"] != r["new"] for r in mine)
        print(f"paper {number}: {len(mine)} cells replaced, {changed} changed verdict (raw / Holm)"
              + (f"; {len(held)} other cells changed verdict after Holm (the base models' family adjusted again)"
                 if held else ""))
        for r in mine + held:
            print(f"  {r['id']} [{r['model']}]: {r['old'][0]} / {r['old'][1]} -> {r['new'][0]} / {r['new'][1]}"
                  + (" (Holm only)" if r["part"] == "Holm" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
