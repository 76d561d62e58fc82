"""SAE training speed on the bundled model (a benchmark, not a test).

Measured in one run, on the same token chunks:
1. residual collection, tokens/s: the forward stopped after the hooked block
   (:func:`whitebox_eval.sae.training.block_output`: ``Engine.run(..., stop_after=layer)``, what ``train-sae`` uses) vs a full
   forward returning every hidden state (``output_hidden_states=True``), alternating batch by
   batch so both see the same machine load; the ratio is the speed-up;
2. TopK SAE training steps/s (:func:`whitebox_eval.sae.training.train_topk_sae`) at the given size.

    .venv/bin/python benchmarks/sae_training.py --text ../shared/datasets/wikitext2/valid.txt \\
        --layer 15 --chunks 32 --d-sae 4096 --steps 40
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--text", nargs="+", required=True)
    ap.add_argument("--layer", type=int, default=15)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--chunks", type=int, default=32, help="chunks timed per method")
    ap.add_argument("--batch-size", type=int, default=16, help="chunks per forward")
    ap.add_argument("--d-sae", type=int, default=4096)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--train-batch", type=int, default=512)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from whitebox_eval.sae.training import block_output
    from whitebox_eval.models import load_model
    from whitebox_eval.sae.training import train_topk_sae
    from whitebox_eval.sae.text import chunk_text

    lm = load_model(args.model)
    chunks = chunk_text(lm.tokenizer, args.text, context=args.context, heldout=0.0).train[:args.chunks]
    times = {"truncated": 0.0, "full": 0.0}
    n_tok = 0
    for s in range(0, len(chunks), args.batch_size):
        ids = torch.tensor(chunks[s:s + args.batch_size])
        mask = torch.ones_like(ids)
        n_tok += ids.numel()
        t0 = time.perf_counter()
        h = block_output(lm, ids, mask, args.layer)
        times["truncated"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        with torch.no_grad():
            full = lm.model(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
        times["full"] += time.perf_counter() - t0
        assert torch.allclose(h, full.hidden_states[args.layer + 1], atol=1e-4), "truncated != full hidden state"
    rates = {k: n_tok / v for k, v in times.items()}
    x = torch.randn(max(4 * args.train_batch, 8192), lm.arch.d_model)
    train_topk_sae(x, args.d_sae, args.k, steps=2, batch_size=args.train_batch)  # warm-up, setup excluded below
    t0 = time.perf_counter()
    train_topk_sae(x, args.d_sae, args.k, steps=1, batch_size=args.train_batch)
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    train_topk_sae(x, args.d_sae, args.k, steps=args.steps + 1, batch_size=args.train_batch)
    steps_per_s = args.steps / (time.perf_counter() - t0 - setup)
    out = {
        "model": args.model, "layer": args.layer, "tokens_timed_per_method": n_tok, "context": args.context,
        "collection_tokens_per_s": {"stopped_after_block": rates["truncated"], "full_forward_all_hidden_states": rates["full"]},
        "collection_speedup": rates["truncated"] / rates["full"],
        "train": {"d_sae": args.d_sae, "k": args.k, "batch": args.train_batch, "steps_per_s": steps_per_s,
                  "tokens_per_s": steps_per_s * args.train_batch},
        "threads": args.threads, "cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
    }
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
