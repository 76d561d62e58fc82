"""Data-parallel MCQA study: one process vs ``torchrun --nproc-per-node N`` (gloo).

Runs the same study twice through the CLI, checks that the two run folders agree
(results.json, samples in item order, arrays) and prints both wall times and their
ratio. On a 2-core CPU this is a correctness check (two 1-thread ranks vs one 2-thread
process), not a speed-up; on a multi-GPU node use ``--device cuda``.

    python benchmarks/data_parallel.py --items 200 --nproc 2
    python benchmarks/data_parallel.py --items 2000 --nproc 8 --device cuda --json out.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _run(cmd: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def _max_float_difference(a, b) -> float:
    """Largest difference between two equally shaped JSON structures (inf if shapes differ)."""
    if isinstance(a, dict):
        return max((_max_float_difference(a[k], b.get(k)) for k in a), default=0.0) if a.keys() == b.keys() else float("inf")
    if isinstance(a, list):
        return max((_max_float_difference(x, y) for x, y in zip(a, b)), default=0.0) if len(a) == len(b) else float("inf")
    if isinstance(a, float) or isinstance(b, float):
        return abs(float(a) - float(b)) if a is not None and b is not None else float("inf")
    return 0.0 if a == b else float("inf")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--items", type=int, default=200)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--device", default="auto")
    p.add_argument("--methods", default="baseline,qk,attention,lens,pride,pa")
    p.add_argument("--min-val-items", type=int, default=None, help="as mcqa's (default: mcqa's own)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args()
    study = ["mcqa", "--model", args.model, "--limit", str(args.items), "--batch-size", str(args.batch_size),
             "--methods", args.methods, *(["--min-val-items", str(args.min_val_items)] if args.min_val_items else [])]
    with tempfile.TemporaryDirectory() as tmp:
        one = _run([sys.executable, "-m", "whitebox_eval", "--device", args.device, *study,
                    "--output", tmp, "--run-id", "one"])
        many = _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.nproc),
                     "-m", "whitebox_eval", "--device", args.device, *study, "--output", tmp, "--run-id", "many"])
        a, b = Path(tmp, "one"), Path(tmp, "many")
        ra, rb = ({k: v for k, v in json.loads((d / "results.json").read_text()).items() if k != "date"}  # start time
                  for d in (a, b))
        sa, sb = ([json.loads(line) for line in (d / "samples.jsonl").read_text().splitlines()] for d in (a, b))
        arrays = {n: float(np.nanmax(np.abs(np.load(a / "arrays" / f"{n}.npy") - np.load(b / "arrays" / f"{n}.npy"))))
                  for n in ("letter_logits", "qk", "attention")}
    out = {"model": args.model, "items": args.items, "nproc": args.nproc, "device": args.device,
           "seconds_1_process": round(one, 1), f"seconds_{args.nproc}_ranks": round(many, 1),
           "ratio_ranks_over_1": round(many / one, 3),
           "results_max_difference": _max_float_difference(ra, rb),
           "samples_same_order": [s["id"] for s in sa] == [s["id"] for s in sb],
           "samples_max_difference": _max_float_difference(sa, sb), "arrays_max_difference": arrays}
    for k, v in out.items():
        print(f"{k:28s} {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
