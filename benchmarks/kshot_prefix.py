"""What k-shot demonstrations cost with the token-level prefix cache: 5-shot vs 0-shot wall time.

lm-eval's MMLU prompt (``--prompt lm-eval``) on the shared sample, dev demonstrations of
the item's subject, methods baseline, QK, attention and lens (one pass per batch):

    whitebox-eval mcqa --model M --task mmlu=<test> --demos-from <dev> --prompt lm-eval \\
        --shots 5|0 --methods baseline,qk,attention,lens --limit N

Each arm is the CLI command in its own process (model loading included), both with
``OMP_NUM_THREADS=1`` / ``MKL_NUM_THREADS=1`` so that other work on a shared machine
slows both alike; with ``--repeats R`` the arms alternate (0, 5, 0, 5, ...) and the
median of each is used. Prints every time, the medians and the ratio 5-shot / 0-shot
(target <= 1.5; without the cache the demonstrations are recomputed for every prompt).

Before timing, one in-process check on the first ``--check`` items: the 5-shot main pass
with the cache equals the pass without it up to float32 rounding (every score array),
and the cache was used for every batch of one subject.

    python benchmarks/kshot_prefix.py --items 240 --repeats 2 | tee benchmarks/results/kshot_prefix.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
METHODS = "baseline,qk,attention,lens"


def shared_mmlu() -> Path:
    env = os.environ.get("WHITEBOX_SHARED_DATASETS")
    root = Path(env) if env else HERE.parent.parent / "shared" / "datasets"
    if not (root / "mmlu" / "test").is_dir():
        sys.exit(f"no MMLU sample at {root / 'mmlu'} (set WHITEBOX_SHARED_DATASETS)")
    return root / "mmlu"


def command(model: str, mmlu: Path, shots: int, items: int, batch_size: int, out: Path, run_id: str) -> list[str]:
    return [sys.executable, "-m", "whitebox_eval", "mcqa", "--model", model, "--task", f"mmlu={mmlu / 'test'}",
            "--demos-from", str(mmlu / "dev"), "--prompt", "lm-eval", "--shots", str(shots), "--methods", METHODS,
            "--limit", str(items), "--min-val-items", str(min(50, items // 4)),  # 50, the default, from 200 items
            "--batch-size", str(batch_size), "--output", str(out), "--run-id", run_id]


def check_same_scores(model: str, mmlu: Path, items: int, batch_size: int) -> str:
    """The cached 5-shot pass equals the uncached one (float32 rounding); returns a summary line."""
    import numpy as np
    import torch

    from whitebox_eval.internals import Engine
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa
    from whitebox_eval.models import load_model

    torch.set_num_threads(1)
    lm = load_model(model)
    used = []
    run = Engine.run
    Engine.run = lambda self, batch, *a, **kw: used.append(kw.get("prefix") is not None) or run(self, batch, *a, **kw)
    try:
        cfg = dict(model=model, task=f"mmlu={mmlu / 'test'}", demos_from=str(mmlu / "dev"), prompt="lm-eval", shots=5,
                   methods=tuple(METHODS.split(",")), limit=items, min_val_items=items // 4, batch_size=batch_size)
        with tempfile.TemporaryDirectory() as tmp:
            on = run_mcqa(MCQAConfig(**cfg), tmp, run_id="on", loaded=lm, show_progress=False)
            hits = sum(used)
            off = run_mcqa(MCQAConfig(**cfg, prefix_cache=False), tmp, run_id="off", loaded=lm, show_progress=False)
            worst = {}
            for name in METHODS.replace("baseline", "letter_logits").split(","):
                a, b = on.load_array(name), off.load_array(name)
                ok = np.isfinite(b)
                np.testing.assert_array_equal(np.isfinite(a), ok)
                scale = float(np.max(np.abs(b[ok])))  # float32 sums of d_model-many terms: ~1e-6 of their size
                worst[name] = float(np.max(np.abs(a[ok] - b[ok]))) / scale
                np.testing.assert_allclose(a[ok], b[ok], rtol=1e-4, atol=1e-5 * scale, err_msg=name)
    finally:
        Engine.run = run
    batches = -(-items // batch_size)
    if hits < batches - 2:  # at most the batches that mix two subjects run in full
        raise AssertionError(f"the cache was used in only {hits} of {batches} batches")
    return (f"check on {items} items: cache used in {hits} of {batches} batches; largest |cached - full| / max |full|: "
            + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--items", type=int, default=240, help="MMLU items per run (>= 200 for the target)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1, help="runs per arm, alternating 0-shot and 5-shot")
    ap.add_argument("--check", type=int, default=24, help="items in the cached-vs-uncached check (0: skip)")
    args = ap.parse_args()
    mmlu = shared_mmlu()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "WHITEBOX_PROGRESS": "off"}
    print(f"model {args.model}, {args.items} lm-eval MMLU items ({mmlu}), methods {METHODS}, batch size "
          f"{args.batch_size}, OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 in both arms")
    if args.check:
        print(check_same_scores(args.model, mmlu, args.check, args.batch_size), flush=True)
    times: dict[int, list[float]] = {0: [], 5: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for shots in (0, 5):
                cmd = command(args.model, mmlu, shots, args.items, args.batch_size, Path(tmp), f"k{shots}_{r}")
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
                dt = time.perf_counter() - t0
                if proc.returncode != 0:
                    sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
                times[shots].append(dt)
                print(f"  run {r + 1}: {shots}-shot {dt:7.1f} s", flush=True)
    zero, five = statistics.median(times[0]), statistics.median(times[5])
    print(f"0-shot {zero:.1f} s, 5-shot {five:.1f} s (median of {args.repeats}); "
          f"5-shot / 0-shot = {five / zero:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
