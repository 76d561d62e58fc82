"""Recipe sweep for ``finetune --task gar[:TASKS]`` (paper 002's trained column): each recipe is
trained from the same base weights on the same training lines (the train half of the element split,
as the finetune child deals them) and scored on the validation lines only, in App. C's terms (the
statistic 002's claims read: P(target) above 1/#alternatives at the first answer token, per format,
:func:`whitebox_eval.finetune.gar_tasks.appc_check`) every ``--eval-every`` steps, with the argmax
accuracy and the validation loss beside. The test split (the held-out elements) is never read here.
Appends one JSON row per recipe to ``--out`` (the curve, seconds per step) and prints it; a run
stopped by SIGTERM or Ctrl-C still writes its row, with the curve so far and ``stopped_at`` (the
learning rate is constant, so a prefix of a longer recipe is the shorter recipe).

The validation lines are the train half's elements (held-out lines, not held-out elements), so a
recipe chosen here still has to pass the finetune child's check on the test half.

  PYTHONPATH=src python benchmarks/gar_recipes.py --lr 1e-4 3e-4 --epochs 3 --eval-every 177 \\
      --out benchmarks/results/gar_recipes.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from whitebox_eval.finetune import check, gar_tasks
from whitebox_eval.finetune.sources import encode, load_items, parse_source
from whitebox_eval.models import load_model
from whitebox_eval.models.training import Recipe

import recipe_sweep  # noqa: E402 (benchmarks/, beside this script)


def scores(rows: list[dict]) -> dict[str, float]:
    """App. C accuracy and argmax accuracy per format over ``appc_check`` rows."""
    out: dict[str, float] = {}
    for fmt in gar_tasks.FORMATS:
        part = [r for r in rows if r["format"] == fmt]
        if part:
            out[f"appc_{fmt}"] = round(sum(r["correct"] for r in part) / len(part), 4)
            out[f"argmax_{fmt}"] = round(sum(r["correct_argmax"] for r in part) / len(part), 4)
            out[f"n_{fmt}"] = len(part)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="gar:all", help="gar or gar:TASKS, as finetune --task takes it")
    ap.add_argument("--limit", type=int, default=3000, help="training and validation lines before deduplication")
    ap.add_argument("--validation", type=float, default=0.05)
    ap.add_argument("--test", type=float, default=0.2, help="as the finetune child's (it sizes the test half's draw)")
    ap.add_argument("--lr", type=float, nargs="+", default=[1e-4])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--val-n", type=int, default=None, help="validation lines scored (default: all)")
    ap.add_argument("--batch-size", type=int, default=8, help="validation items per forward")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--keep", type=Path, default=None,
                    help="save the weights at the best validation point (mean of the formats' App. C accuracy) "
                         "here, one file per learning rate")
    a = ap.parse_args()

    source = parse_source(a.task)
    if source.kind != "gar":
        ap.error(f"--task must be gar or gar:TASKS; got {a.task!r}")
    items, _ = load_items(source, a.limit, a.seed, a.test)
    splits = gar_tasks.splits(items, validation=a.validation, seed=a.seed)
    lm = load_model(a.model)
    eos = lm.end_id
    seqs = check.sequences([encode(source, it, lm.tokenizer, [], eos) for it in splits.train])
    val = splits.validation[:a.val_n] if a.val_n else splits.validation
    val_enc = [encode(source, it, lm.tokenizer, [], eos) for it in val]
    steps = a.epochs * -(-len(seqs) // a.batch)
    hashes = {k: v["sha256"][:12] for k, v in splits.record(a.seed).items() if isinstance(v, dict)}

    def score() -> dict[str, float]:
        return {**scores(gar_tasks.appc_check(lm, val, a.batch_size)),
                "val_loss": round(check.mean_loss(lm, val_enc, a.batch_size), 4)}

    def mean_appc(point: dict) -> float:
        return sum(point[f"appc_{f}"] for f in gar_tasks.FORMATS if f"appc_{f}" in point) / \
            max(1, sum(f"appc_{f}" in point for f in gar_tasks.FORMATS))

    base = {k: v.detach().clone() for k, v in lm.model.state_dict().items()}
    t0 = time.perf_counter()
    base_point = score()
    eval_s = time.perf_counter() - t0
    print(f"step 0: {base_point}", flush=True)
    for lr in a.lr:
        lm.model.load_state_dict(base)
        recipe = Recipe(lr, (0.9, 0.999), 0.0, a.batch, steps, a.seed, f"finetune/{a.seed}")
        ran = recipe_sweep.run(lm, seqs, recipe, base_point, score, eval_every=a.eval_every, best=mean_appc, keep=a.keep,
                               show=lambda step, loss, p: f"lr {lr:g} step {step}/{steps}: {p}")
        recipe_sweep.write(a.out, {
            "model": a.model, "task": a.task, "lr": lr, "batch": a.batch, "epochs": a.epochs, "steps": steps,
            "n_train": len(splits.train), "n_val_scored": len(val), "splits": hashes, "eval_s": round(eval_s, 1),
            **ran, "best_mean_appc": max((mean_appc(c) for c in ran["curve"][1:]), default=None)})
        if "stopped_at" in ran:
            break


if __name__ == "__main__":
    recipe_sweep.main_guard(main)
