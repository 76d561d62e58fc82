"""Data-contamination simulation (paper 001 sec. 3.4, Table 10, Fig. 8; App. A.6): fine-tune on a
task's test items, then compare (accuracy, MUI) per checkpoint on that task and on others.

The study is the library's (``whitebox_eval.mui.contamination``, also ``reproduce 001 --scale
cpu``'s experiment ``contamination``): every evaluated test item of the contaminated task is
prompted exactly as the MUI study prompts it and followed by its gold answer and the
end-of-turn token, the loss on the answer tokens only; full-parameter AdamW for a few
epochs (the paper's ranges: lr 7e-5 .. 2e-9, 2-4 epochs, batch 4-128). The weights are
cached under the cache root ($WHITEBOX_EVAL_CACHE), so a second call trains nothing. Per
task and checkpoint it prints accuracy and MUI, and the direction of sec. 3.3 (from the
point estimates, and where both changes are significant). Expected from the paper: the
contaminated task moves up in accuracy and MUI (accumulating), the others collapse.

    nice .venv/bin/python examples/mui_contamination.py --task gsm8k=../shared/datasets/gsm8k/test_sample.jsonl \\
        --other-task arc=../shared/datasets/arc/arc_challenge_sample.llmfoundry.jsonl --limit 48 --epochs 3 \\
        --max-new-tokens 160 --output /tmp/mui_runs
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from whitebox_eval.mui.contamination import ContaminationConfig, describe, run_contamination


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="arithmetic-gen", help="the contaminated task (its test items are trained on)")
    ap.add_argument("--other-task", action="append", default=None, help="an out-of-domain task (repeatable; default ssd)")
    ap.add_argument("--limit", type=int, default=48)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--train-batch-size", type=int, default=4)
    ap.add_argument("--checkpoints", default="", help="extra steps to evaluate, e.g. 12,24 (the final one always is)")
    ap.add_argument("--max-new-tokens", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output", default="/tmp/mui_runs")
    ap.add_argument("--run-id", default=None)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = ContaminationConfig(model=args.model, task=args.task, ood_tasks=tuple(args.other_task or ["ssd"]),
                              limit=args.limit, epochs=args.epochs, learning_rate=args.lr,
                              train_batch_size=args.train_batch_size,
                              checkpoints=tuple(int(s) for s in args.checkpoints.split(",") if s.strip()),
                              max_new_tokens=args.max_new_tokens, seed=args.seed, batch_size=12)
    t0 = time.time()
    run_id = args.run_id or f"contamination-{args.epochs}ep-lr{args.lr:g}-n{args.limit}-seed{args.seed}"
    folder = run_contamination(cfg, args.output, run_id=run_id, resume=(Path(args.output) / run_id).is_dir())
    res = folder.load_results()
    print("fine-tune:", json.dumps(res["finetune"]))
    print(describe(res))
    print(f"results: {folder.path}  (total {time.time() - t0:.0f}s)")


if __name__ == "__main__":
    main()
