"""Dead features of a TopK SAE against dictionary size and dead window (a study, not a test).

Trains one SAE per configuration on the same cached training residuals (``train-sae``'s cache:
the same ``--text`` list and ``--tokens`` give the same chunks) and measures each on the
held-out residuals: per-token explained variance and the share of features never active, on
the first ``--eval-tokens`` held-out tokens (what ``train-sae`` reports) and on all of them.
Loss recovered needs forwards with the reconstruction spliced in: run ``train-sae`` or
``mui sae-fidelity`` for the configuration you keep.

    .venv/bin/python benchmarks/sae_dead_features.py --tokens 320000 \\
        --text ../shared/datasets/wikitext2/valid.txt ../shared/datasets/{mmlu,hellaswag,arc,cosmosqa} \\
               ../shared/datasets/{halueval,triviaqa,snli,geometry_of_truth} \\
        --config 8192:102400 --config 4096:102400 --config 4096:20480 --config 4096:10240 --config 8192:10240
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--text", nargs="+", required=True)
    ap.add_argument("--layer", type=int, default=15)
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--heldout", type=float, default=0.05)
    ap.add_argument("--eval-tokens", type=int, default=16384)
    ap.add_argument("--cache", default="runs/.residual-cache", help="train-sae's residual cache folder")
    ap.add_argument("--config", action="append", required=True,
                    help="D_SAE:DEAD_WINDOW_TOKENS[:AUX_COEF[:SEED]] (repeatable)")
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from whitebox_eval.models import load_model
    from whitebox_eval.sae.training import train_topk_sae
    from whitebox_eval.sae.text import first_tokens
    from whitebox_eval.sae.training import cached_residuals, collect_residuals, training_chunks

    lm = load_model(args.model)
    chunks, _ = training_chunks(lm, args.text, n_tokens=args.tokens, context=args.context, heldout=args.heldout, seed=0)
    x, info = cached_residuals(lm, args.layer, chunks, args.cache)
    print(f"training residuals: {x.shape[0]} tokens ({'cached' if info['cached'] else 'collected'})", flush=True)
    held = {"first": torch.from_numpy(collect_residuals(lm, args.layer, first_tokens(chunks.heldout, args.eval_tokens))).float(),
            "all": torch.from_numpy(collect_residuals(lm, args.layer, chunks.heldout)).float()}

    def figures(sae, h: torch.Tensor) -> tuple[float, float]:
        with torch.no_grad():
            f = sae.encode(h)
            err = ((h - sae.decode(f)) ** 2).sum(-1)
        ev = float((1 - err / ((h - h.mean(0)) ** 2).sum(-1)).mean())
        return ev, float(((f > 0).sum(0) == 0).float().mean())

    rows = []
    print("| features | dead window (tokens) | aux coef | seed | per-token EV | dead, first "
          f"{held['first'].shape[0]} held-out tokens | dead, all {held['all'].shape[0]} | dead in training's window | train s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for spec in args.config:
        parts = spec.split(":")
        d_sae, window = int(parts[0]), int(parts[1])
        coef = float(parts[2]) if len(parts) > 2 else 1 / 32
        seed = int(parts[3]) if len(parts) > 3 else 0
        t0 = time.perf_counter()
        sae = train_topk_sae(x, d_sae, args.k, steps=args.steps, lr=args.lr, batch_size=args.batch_size, seed=seed,
                             aux_coef=coef, dead_tokens=window)
        secs = time.perf_counter() - t0
        ev, dead = figures(sae, held["first"])
        _, dead_all = figures(sae, held["all"])
        row = {"d_sae": d_sae, "dead_tokens": window, "aux_coef": coef, "seed": seed, "explained_variance": ev,
               "dead_fraction": dead, "dead_fraction_all_heldout": dead_all,
               "dead_fraction_training": sae.metadata["final_dead_fraction"], "train_s": secs}
        rows.append(row)
        print(f"| {d_sae} | {window} | {coef:.4g} | {seed} | {ev:.3f} | {100 * dead:.1f}% | {100 * dead_all:.1f}% | "
              f"{100 * row['dead_fraction_training']:.1f}% | {secs:.0f} |", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"model": args.model, "layer": args.layer, "k": args.k, "steps": args.steps,
                       "n_train_tokens": int(x.shape[0]), "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
