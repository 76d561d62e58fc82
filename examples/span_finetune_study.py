"""Fine-tune the bundled SmolLM2-135M on one AttentionSpan task on CPU, then evaluate
(paper 003, table 1 and 2), find key heads and reinforce them on OOD examples
(sec. 5.1, App. G) against random heads. Not part of the test suite.

    nice .venv/bin/python examples/span_finetune_study.py --task string_reversal \\
        --id-params length=1-8 --ood-params length=9-16 --train 1000 --lr 5e-5

With the paper's ID split (1-10 characters), 600 examples at lr 1e-4 bring SmolLM2-135M to
90% ID exact accuracy in 150 steps (``benchmarks/results/cpu_scale_timing.md``; that is
``reproduce 003 --scale cpu``'s budget). Writes a run folder under --output (default
/tmp/span_runs) and prints the numbers; the fine-tuned weights (~0.5 GB) go to the cache root
($WHITEBOX_EVAL_CACHE), where the same training is found again instead of repeated.
Interrupt and rerun with the same arguments to resume.
"""

from __future__ import annotations

import argparse
import time

import torch

from whitebox_eval.span.command import _floats, _ints, _parse_params, print_summary
from whitebox_eval.span.finetune import FinetuneConfig
from whitebox_eval.span.study import SpanConfig, run_span


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--task", default="string_reversal")
    p.add_argument("--id-params", default="length=1-8")
    p.add_argument("--ood-params", default="length=9-16")
    p.add_argument("--train", type=int, default=1000, help="fine-tuning examples (1 epoch, batch 4)")
    p.add_argument("--lr", type=float, default=5e-5, help="App. E uses 5e-6 for 1B models and long training")
    p.add_argument("--limit", type=int, default=64, help="evaluated examples per split")
    p.add_argument("--key-samples", type=int, default=30)
    p.add_argument("--heads", default="5,10,20")
    p.add_argument("--values", default="0.5,1.0")
    p.add_argument("--mode", default="standard")
    p.add_argument("--threshold", type=float, default=0.05)
    p.add_argument("--random-draws", type=int, default=2)
    p.add_argument("--generation", action="store_true", help="also score free greedy generation")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads; 1 is much faster than 2 on a contended 2-core machine")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="/tmp/span_runs")
    p.add_argument("--run-id", default=None)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cfg = SpanConfig(
        model=a.model, task=a.task, split="both", limit=a.limit,
        id_params=_parse_params(a.task, a.id_params, "--id-params"),
        ood_params=_parse_params(a.task, a.ood_params, "--ood-params"),
        generation=a.generation, finetune_examples=a.train,
        finetune=FinetuneConfig(learning_rate=a.lr, seed=a.seed),
        reinforce=True, key_samples=a.key_samples, heads=_ints(a.heads, "--heads"),
        values=_floats(a.values, "--values"), mode=a.mode, threshold=a.threshold,
        random_draws=a.random_draws, seed=a.seed)
    run_id = a.run_id or f"span-{a.task}-train{a.train}-seed{a.seed}"
    start = time.perf_counter()
    folder = run_span(cfg, a.output, run_id=run_id, resume=True, show_progress=False)
    print_summary(folder)
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
