"""``--batch-size auto`` on a GPU, measured: the size the probe finds for each model of
``gpu_check.py`` (configs of 7-9B models, random weights, bf16 on the GPU), how long the
probe takes, and what the size buys.

Per model it prints the probed size (``internals.batch_probe.probe_batch_size``: doubling,
then bisection, up to ``--cap``), the probe's seconds and passes, the peak memory of the
probe, and then the MCQA study pass (``mcqa.scoring.score_prompts``, every scorer) on prompts
of ``--tokens`` tokens at batch 8 and at the probed size: both must run, and the ratio of
their tokens per second is what ``auto`` gains over the default size.

    python benchmarks/batch_probe_check.py                 # the three models, one GPU
    python benchmarks/batch_probe_check.py --tiny --cap 4  # the same code on tiny configs, CPU
    python benchmarks/batch_probe_check.py --out benchmarks/results/batch_probe.md

    # after gpu_check.py in the same device call (<= 4 minutes):
    python benchmarks/batch_probe_check.py --assets benchmarks/gpu_smoke_assets --out $OUT/batch_probe.md
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(Path(__file__).parent)]
from gpu_check import CONFIGS, build, prompts  # noqa: E402


def tokens_per_s(engine, n: int, tokens: int, repeats: int, sync) -> float:
    """Prompt tokens per second of the study pass at batch ``n`` (median of ``repeats`` after a warm-up)."""
    from whitebox_eval.mcqa.scoring import SCORERS, score_prompts

    toks = prompts(n, tokens, 0, engine.loaded.model.config.vocab_size, seed=2)
    times = []
    with torch.no_grad():
        for _ in range(repeats + 1):
            sync()
            t0 = time.perf_counter()
            score_prompts(engine, toks, 4, SCORERS)
            sync()
            times.append(time.perf_counter() - t0)
    times = sorted(times[1:])
    return n * tokens / times[len(times) // 2]


def check(name: str, args, device: str, dtype: torch.dtype) -> dict:
    from whitebox_eval.internals import Engine
    from whitebox_eval.internals.batch_probe import probe_batch_size, probe_pass

    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    lm = build(name, tiny=args.tiny, device=device, dtype=dtype)
    passes: list[int] = []

    def counted(engine, n, tokens):
        passes.append(n)
        probe_pass(engine, n, tokens)

    t0 = time.perf_counter()
    size = probe_batch_size(lm, tokens=args.tokens, cap=args.cap, run=counted)
    row = {"model": name + (" (tiny)" if args.tiny else ""), "probed_batch": size,
           "probe_s": round(time.perf_counter() - t0, 1), "probe_passes": ",".join(map(str, passes))}
    if cuda:
        row["probe_peak_GiB"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
        row["gpu_GiB"] = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
    engine = Engine(lm)
    base = tokens_per_s(engine, min(8, size), args.tokens, args.repeats, sync)
    at = tokens_per_s(engine, size, args.tokens, args.repeats, sync)
    row.update({"study_tok_s_batch8": round(base), "study_tok_s_probed": round(at), "probed_over_batch8": round(at / base, 2)})
    del engine, lm
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(CONFIGS), help="comma list of " + ", ".join(CONFIGS))
    ap.add_argument("--tiny", action="store_true", help="tiny configs of the same families, float32 on the CPU")
    ap.add_argument("--tokens", type=int, default=1024, help="tokens per example of the probe and the study pass")
    ap.add_argument("--cap", type=int, default=None, help="largest size tried (default: the probe's own)")
    ap.add_argument("--repeats", type=int, default=3, help="timed study passes per size, after one warm-up")
    ap.add_argument("--assets", type=Path, default=None, help="gpu_smoke.py's assets (pinned wheels), used where needed")
    ap.add_argument("--out", type=Path, default=None, help="markdown table here (and the rows as .json beside it)")
    args = ap.parse_args(argv)
    if args.assets is not None and not args.tiny:
        import gpu_smoke

        gpu_smoke.use_pinned_wheels(args.assets)
    from whitebox_eval.internals.batch_probe import PROBE_MAX

    args.cap = args.cap or PROBE_MAX
    device = "cpu" if args.tiny else "cuda"
    dtype = torch.float32 if args.tiny else torch.bfloat16
    rows = []
    for name in args.models.split(","):
        rows.append(check(name, args, device, dtype))
        print(json.dumps(rows[-1]), flush=True)
    keys = list(rows[0])
    table = "\n".join(["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
                      + ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in rows])
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(f"{table}\n", encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return rows


if __name__ == "__main__":
    main()
