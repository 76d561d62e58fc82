"""Accuracy vs number of options on the Simple Synthetic Dataset (000 sec. 5.1, fig. 3).

Runs one MCQA study per option count (each a normal, resumable run folder under
--output) and plots baseline, best-QK-head and best-Attention-head test accuracy
against the number of essential options.

    python examples/mcqa_ssd_options.py --model smollm2-135m --options 2,4,8,16 --limit 300
"""

from __future__ import annotations

import argparse
from pathlib import Path

from whitebox_eval.mcqa.plots import plot_accuracy_vs_options
from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa
from whitebox_eval.models import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--options", default="2,4,8,16", help="comma list of essential option counts")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--output", default="runs/ssd_options")
    ap.add_argument("--batch-size", type=int, default=8)
    args = ap.parse_args()
    lm = load_model(args.model)
    counts = [int(x) for x in args.options.split(",")]
    name = Path(args.model).name  # a local model folder is named by its last part
    curves: dict[str, list[float]] = {"baseline": [], "QK head": [], "Attention head": []}
    for n in counts:
        cfg = MCQAConfig(model=args.model, n_options=n, limit=args.limit, batch_size=args.batch_size,
                         methods=("baseline", "qk", "attention"))
        folder = run_mcqa(cfg, args.output, run_id=f"{name}-ssd-{n}", resume=True, loaded=lm)
        h = folder.load_results()["headline"]
        curves["baseline"].append(h["acc,baseline"])
        curves["QK head"].append(h["acc,qk_head"])
        curves["Attention head"].append(h["acc,attention_head"])
        print(f"{n:3d} options: " + "  ".join(f"{k} {v[-1]:.1%}" for k, v in curves.items()), flush=True)
    path = plot_accuracy_vs_options(counts, curves, Path(args.output) / f"{name}-accuracy_vs_options.png")
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
