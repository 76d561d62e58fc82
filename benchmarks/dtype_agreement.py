"""bf16 vs fp32 on the bundled models: how far the white-box scores move.

Runs the MCQA main pass (letter logits, every head's QK- and Attention-score) on the
same SSD items with the weights in float32 and in bfloat16, and prints per model: the
largest absolute difference of the letter logits, the letter probabilities, QK-scores
and Attention-scores, the share of items whose baseline answer agrees, and whether the
validation split picks the same best QK / Attention head.

    python benchmarks/dtype_agreement.py --limit 80 --out benchmarks/results/dtype_agreement.md
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np


def run(model: str, dtype: str, limit: int, out: Path) -> tuple[dict, dict]:
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    cfg = MCQAConfig(model=model, task="ssd", limit=limit, methods=("baseline", "qk", "attention"),
                     min_val_items=limit // 2, dtype=dtype, batch_size=8)
    folder = run_mcqa(cfg, out, run_id=f"{Path(model).name}-{dtype}", show_progress=False)
    arrays = {k: np.load(folder.path / "arrays" / f"{k}.npy") for k in ("letter_logits", "qk", "attention")}
    return arrays, folder.load_results()


def _softmax(x: np.ndarray) -> np.ndarray:
    x = np.nan_to_num(x, nan=-np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2-135m,gemma3-270m")
    ap.add_argument("--limit", type=int, default=80, help="SSD items (half validation, half test)")
    ap.add_argument("--out", default=None, help="also write the Markdown table here")
    args = ap.parse_args()
    rows = ["| model | max abs diff letter logits | max abs diff letter probs | max abs diff QK-score (rel. to max) "
            "| max abs diff Attention-score | baseline answers agree | best QK head fp32 / bf16 | best Attention head fp32 / bf16 |",
            "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            (a32, r32), (a16, r16) = (run(model, d, args.limit, Path(tmp)) for d in ("float32", "bfloat16"))
            fin = np.isfinite(a32["letter_logits"])
            dl = np.abs(a32["letter_logits"] - a16["letter_logits"])[fin].max()
            dp = np.abs(_softmax(a32["letter_logits"]) - _softmax(a16["letter_logits"])).max()
            qfin = np.isfinite(a32["qk"])
            dq = np.abs(a32["qk"] - a16["qk"])[qfin].max() / np.abs(a32["qk"][qfin]).max()
            afin = np.isfinite(a32["attention"])
            da = np.abs(a32["attention"] - a16["attention"])[afin].max()
            agree = np.mean(np.nanargmax(np.nan_to_num(a32["letter_logits"], nan=-np.inf), -1)
                            == np.nanargmax(np.nan_to_num(a16["letter_logits"], nan=-np.inf), -1))
            heads = [f"{tuple(r32[m]['best_head'])} / {tuple(r16[m]['best_head'])}" for m in ("qk", "attention")]
            rows.append(f"| {model} | {dl:.3g} | {dp:.3g} | {dq:.3g} | {da:.3g} | {agree:.1%} | {heads[0]} | {heads[1]} |")
            print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.out:
        Path(args.out).write_text(f"# bf16 vs fp32 (SSD, {args.limit} items, CPU)\n\n{table}\n")


if __name__ == "__main__":
    main()
