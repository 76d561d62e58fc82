"""Item by item: an ``mcqa --prompt lm-eval`` run folder beside lm-eval's own numbers.

The lm-eval side is a JSON written by ``lm_eval_parity.py`` (its per-item contexts,
log-likelihoods, acc and acc_norm; ``--n-items`` for more than the fixture's 30). Items
are paired in order: both take the first N rows of the same file, and a longer lm-eval
block is cut to our N. Prints, per task: lm-eval's acc / acc_norm, ours, how many items
predict differently, the largest log-likelihood difference and whether every prompt is
identical.

    # lm-eval on the first 99 rows (its own venv), then ours on the same rows
    /path/to/lmeval-venv/bin/python benchmarks/lm_eval_parity.py --n-items 99 --out /tmp/lm99.json --results-out /tmp/r.json
    whitebox-eval mcqa --task hellaswag=../shared/datasets/hellaswag/hellaswag_val_sample.jsonl --prompt lm-eval \\
        --limit 99 --run-id hs99
    python benchmarks/lm_eval_side_by_side.py /tmp/lm99.json hellaswag=runs/hs99
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def compare(block: dict, run: Path) -> dict:
    ours = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    head = json.loads((run / "results.json").read_text())["headline"]
    if len(ours) > len(block["items"]):
        raise SystemExit(f"{run}: {len(ours)} items, lm-eval block: {len(block['items'])}; run lm-eval on at least as many")
    items = block["items"][:len(ours)]  # the first N rows of the same file
    block = {**block, "items": items, "mean_over_items": {m: float(np.mean([it[m] for it in items])) for m in block["metrics"]}}
    worst, diff_acc, diff_norm, same_prompt = 0.0, 0, 0, True
    for o, r in zip(ours, block["items"]):
        ll = np.array(r["loglik"])
        worst = max(worst, float(np.abs(np.array(o["cloze_loglik"]) - ll).max()))
        diff_acc += o["pred_cloze"] != int(np.argmax(ll))
        diff_norm += o["pred_cloze_norm"] != int(np.argmax(ll / np.array([len(c) for c in r["choices"]], float)))
        same_prompt &= o.get("prompt") == r["context"]
    return {"n": len(ours), "lm_eval": block["mean_over_items"],
            "ours": {m: head.get(f"{m},cloze") for m in block["metrics"]},
            "items_differing": {"acc": diff_acc, "acc_norm": diff_norm}, "max_abs_loglik_diff": worst,
            "prompts_identical": same_prompt}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lm_eval_json", type=Path, help="output of lm_eval_parity.py")
    ap.add_argument("pairs", nargs="+", help="BLOCK=RUN_FOLDER, e.g. hellaswag=runs/hs99 arc_challenge=runs/arc99")
    args = ap.parse_args()
    tasks = json.loads(args.lm_eval_json.read_text())["tasks"]
    print(f"{'task':14s} {'n':>4s}  {'lm-eval acc / acc_norm':>24s}  {'ours acc / acc_norm':>22s}  differing  max|Δll|  prompts")
    for pair in args.pairs:
        name, run = pair.split("=", 1)
        r = compare(tasks[name], Path(run))
        fmt = lambda d: " / ".join("-" if d.get(m) is None else f"{d[m]:.4f}" for m in ("acc", "acc_norm"))  # noqa: E731
        print(f"{name:14s} {r['n']:4d}  {fmt(r['lm_eval']):>24s}  {fmt(r['ours']):>22s}  "
              f"{r['items_differing']['acc']:>3d} / {r['items_differing']['acc_norm']:<3d}  {r['max_abs_loglik_diff']:.1e}  "
              f"{'identical' if r['prompts_identical'] else 'DIFFER'}")


if __name__ == "__main__":
    main()
