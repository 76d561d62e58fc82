"""Put a finished reproduction where every number traces to a file in the repository.

    python benchmarks/reproduce_commit.py /work/repro/quick-v2

Copies the reproduction's ``claims.json`` and, for every child run, its ``results.json``
and ``config.yaml`` into ``benchmarks/results/reproduce_quick/`` (``runs/<child>/``), and
its ``reproduction.md`` to ``benchmarks/results/reproduce_all_quick.md``. A child the
reproduction has not (yet) finished is listed in ``missing.txt``. Nothing is recomputed.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "benchmarks" / "results" / "reproduce_quick"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="a reproduction folder (holds claims.json and runs/)")
    args = ap.parse_args()
    folder = args.folder
    content = json.loads((folder / "claims.json").read_text(encoding="utf-8"))
    if DEST.exists():
        shutil.rmtree(DEST)
    (DEST / "runs").mkdir(parents=True)
    shutil.copy(folder / "claims.json", DEST / "claims.json")
    runs = sorted({r["run"] for p in content["papers"] for r in p["runs"]})
    missing = []
    for run in runs:
        src = (folder / "runs" / run).resolve()
        if not (src / "results.json").is_file():
            missing.append(run)
            continue
        (DEST / "runs" / run).mkdir()
        for name in ("results.json", "config.yaml"):
            if (src / name).is_file():
                shutil.copy(src / name, DEST / "runs" / run / name)
    (DEST / "missing.txt").write_text("".join(f"{r}\n" for r in missing), encoding="utf-8")
    shutil.copy(folder / "reproduction.md", ROOT / "benchmarks" / "results" / "reproduce_all_quick.md")
    print(f"{len(runs) - len(missing)} child runs copied to {DEST}, {len(missing)} missing")


if __name__ == "__main__":
    main()
