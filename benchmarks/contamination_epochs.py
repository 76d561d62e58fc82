"""How many epochs 001's contamination takes to raise the accuracy of its stopping half significantly
(exact McNemar, as the cpu scale's ``until_significant`` reads it; it trains on every item), on a
bundled model and a few GSM8K items, without the MUI passes.

    python benchmarks/contamination_epochs.py --model smollm2-135m --data PATH/test_sample.jsonl \
        --limit 16 --max-epochs 8 --learning-rate 5e-5 --out benchmarks/results/contamination_epochs.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--data", required=True)
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--max-epochs", type=int, default=8)
    ap.add_argument("--learning-rate", type=float, default=5e-5)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)  # a shared machine
    from whitebox_eval.models import load_model
    from whitebox_eval.mui.contamination import (ContaminationConfig, _train, stopping_split, task_item_ids,
                                                  training_sequences)

    cfg = ContaminationConfig(model=a.model, task=f"gsm8k={a.data}", ood_tasks=("ssd",), limit=a.limit,
                              learning_rate=a.learning_rate, train_batch_size=4, until_significant=True,
                              max_epochs=a.max_epochs, max_new_tokens=a.max_new_tokens,
                              mui={"score": "contribution", "threshold": "top-per-mille"})
    lm = load_model(cfg.model, dtype=cfg.dtype)
    seqs = training_sequences(cfg, lm)
    stop, _ = stopping_split(task_item_ids(cfg, lm.tokenizer), cfg.seed)
    start = time.perf_counter()
    log = []
    with tempfile.TemporaryDirectory() as dest:
        info = _train(lm, seqs, cfg, Path(dest), False, lambda line: (log.append(line), print(line, flush=True)), stop)
    out = {"model": a.model, "data": Path(a.data).name, "limit": a.limit, "learning_rate": a.learning_rate,
           "train_batch_size": 4, "max_new_tokens": a.max_new_tokens, "threads": 1,
           "until_significant": info["until_significant"], "steps": info["steps"],
           "loss_first": info["loss_first"], "loss_last": info["loss_last"],
           "wall_seconds": round(time.perf_counter() - start, 1), "log": log}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
