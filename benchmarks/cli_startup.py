"""Start-up time of the command line: `whitebox-eval --help` and every `<command> --help`.

Prints the median wall time of each (over --repeat runs, each a fresh process) beside
the cost of `import torch` in the same run, the thing the lazy command group avoids.

    python benchmarks/cli_startup.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def wall(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="fresh processes per command (median reported)")
    ap.add_argument("--commands", default=None,
                    help="comma list of commands to time ('' = the bare group; default: the group and every command)")
    args = ap.parse_args()
    from whitebox_eval.cli import LAZY_COMMANDS

    commands = ["", *LAZY_COMMANDS, "runs", "models", "inspect"]
    if args.commands is not None:
        wanted = args.commands.split(",")
        unknown = sorted(set(wanted) - set(commands))
        if unknown:
            ap.error(f"unknown command(s) {unknown}; choose from {', '.join(c for c in commands if c)}")
        commands = [c for c in commands if c in wanted]
    py = [sys.executable]
    torch_s = wall(py + ["-c", "import torch, transformers"], args.repeat)
    print(f"{'import torch, transformers':32s} {torch_s:6.2f} s   (what --help no longer pays)")
    for cmd in commands:
        argv = py + ["-m", "whitebox_eval", *([cmd] if cmd else []), "--help"]
        s = wall(argv, args.repeat)
        print(f"{('whitebox-eval ' + cmd + ' --help'):32s} {s:6.2f} s   ratio to import torch: {s / torch_s:.2f}")


if __name__ == "__main__":
    main()
