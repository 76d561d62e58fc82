"""Recipe sweep for ``finetune --task arithmetic-text`` (the trained arithmetic column): each recipe is trained
from the same base weights on the same train split and scored on the validation split only
(greedy exact match in 004's free format, 5-shot, by :func:`whitebox_eval.finetune.check.free_exact_match`,
every ``--eval-every`` steps); the test split is never read here. Beside it, on the same validation
items: teacher-forced exact match on the bare line (``76 + 44 =`` then every answer digit the argmax,
no demonstrations, no end token), which tells "has not learned the sums" from "cannot carry them into
004's format", and the mean answer loss. Appends one JSON row per recipe to ``--out`` (the curve,
seconds per step) and prints it; a run stopped by SIGTERM or Ctrl-C still writes its row, with the curve so
far and ``stopped_at``.

  PYTHONPATH=src python benchmarks/arithmetic_recipes.py --cats add2,sub2 --lr 1e-3 --batch 16 --steps 300 \\
      --out benchmarks/results/arithmetic_recipes.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from whitebox_eval.finetune import check
from whitebox_eval.finetune.arithmetic_text import LINE_STYLES
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune.sources import ANSWER_ENDS, answer_end_id, encode, load_items, parse_source
from whitebox_eval.finetune.splits import context_draw, make_splits
from whitebox_eval.models import load_model
from whitebox_eval.models.training import Recipe

import recipe_sweep  # noqa: E402 (benchmarks/, beside this script)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--cats", default="add2,sub2")
    ap.add_argument("--limit", type=int, default=3000)
    ap.add_argument("--validation", type=float, default=0.05)
    ap.add_argument("--test", type=float, default=0.04)
    ap.add_argument("--shots", type=int, default=5)
    ap.add_argument("--lr", type=float, nargs="+", default=[1e-3])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--val-n", type=int, default=60, help="validation items scored (the first of the split)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--end", choices=ANSWER_ENDS, default="eos",
                    help="what ends each training answer: the model's end token (the finetune task's own), "
                         "a newline (as 004's prompts end an answer), or nothing (loss on the digits alone)")
    ap.add_argument("--context", type=int, default=0, metavar="K",
                    help="each training line preceded by K other training lines (bare, a seeded draw per line; the "
                         "loss on its own answer only), so that the sums are learned in a context as 004's few-shot "
                         "prompts give one; 0: every line alone from its first token")
    ap.add_argument("--line-style", choices=LINE_STYLES, default="plain",
                    help="the training lines: 76 + 44 = 120 (plain) or each in one of six neutral styles (mixed, "
                         "finetune --line-style; the bare readings then read each validation line in its style); the "
                         "problems and splits are the same")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--keep", type=Path, default=None,
                    help="save the weights at the best validation point here (one file per learning rate)")
    ap.add_argument("--check", default=None, metavar="WEIGHTS|base",
                    help="instead of training: the held-out check on the test split (its first --test-n items, "
                         "--samples draws at T = 1) of the base model or of saved weights")
    ap.add_argument("--diagnose", default=None, metavar="WEIGHTS|base",
                    help="instead of training: on the --val-n validation items, where the answers are lost. 004's free "
                         "format with and without the line's end, and the bare line with no and with --shots bare "
                         "demonstrations (all teacher-forced)")
    ap.add_argument("--wording", default=None, metavar="WEIGHTS|base",
                    help="instead of training: on the --val-n validation items, teacher-forced exact match with the "
                         "--shots demonstrations and the asked line each in 004's question wording or as a bare line "
                         "(which of the two loses the answers)")
    ap.add_argument("--test-n", type=int, default=40)
    ap.add_argument("--samples", type=int, default=4)
    a = ap.parse_args()

    source = parse_source(f"arithmetic-text:{a.cats}")
    items, _ = load_items(source, a.limit, a.seed, line_style=a.line_style)
    splits = make_splits(items, validation=a.validation, test=a.test, shots=a.shots, seed=a.seed)
    lm = load_model(a.model)
    tok = lm.tokenizer
    try:
        eos = answer_end_id(a.end, lm)
    except WhiteboxError as e:
        ap.error(str(e))
    # the context draw's key is this script's own (the finetune child's --train-context keys its draws by split)
    seqs = check.sequences([encode(source, it, tok, context_draw(splits.train, a.context,
                                                                 f"arithmetic_recipes/context/{a.seed}/{i}", exclude=i), eos)
                            for i, it in enumerate(splits.train)])
    val = splits.validation[:a.val_n]
    if a.check:
        return test_check(a, lm, splits)
    bare = [encode(source, it, tok, [], None) for it in val]  # the bare line alone, and after the demonstrations
    shown = [encode(source, it, tok, list(splits.demos), None) for it in val]
    if a.diagnose:
        return diagnose(a, lm, splits, val, bare, shown)
    if a.wording:
        return wording(a, lm, splits, val)
    base = {k: v.detach().clone() for k, v in lm.model.state_dict().items()}
    hashes = {k: v["sha256"][:12] for k, v in splits.record(a.seed).items() if isinstance(v, dict)}

    def score() -> dict[str, float]:
        hits = check.free_exact_match(lm, val, splits.demos, batch_size=16)
        with_demos = bare_scores(lm, val, shown)
        return {"val_exact": sum(hits) / len(hits), **bare_scores(lm, val, bare),
                "val_bare_exact_with_demos": with_demos["val_bare_exact"], "val_loss_with_demos": with_demos["val_loss"]}

    t0 = time.perf_counter()
    base_em = score()
    eval_s = time.perf_counter() - t0
    print(f"untrained: validation exact {base_em['val_exact']:.3f}, bare teacher-forced {base_em['val_bare_exact']:.3f}, "
          f"answer loss {base_em['val_loss']:.3f}", flush=True)
    for lr in a.lr:
        lm.model.load_state_dict(base)
        recipe = Recipe(lr, (0.9, 0.999), 0.0, a.batch, a.steps, a.seed, f"finetune/{a.seed}")
        ran = recipe_sweep.run(
            lm, seqs, recipe, base_em, score, eval_every=a.eval_every, best=lambda p: p["val_exact"], keep=a.keep,
            show=lambda step, loss, p: (f"lr {lr:g} step {step}: loss {loss:.3f}, validation exact {p['val_exact']:.3f}, "
                                        f"bare teacher-forced {p['val_bare_exact']:.3f}, answer loss {p['val_loss']:.3f}"))
        recipe_sweep.write(a.out, {
            "model": a.model, "cats": a.cats, "lr": lr, "batch": a.batch, "steps": a.steps, "loss_on": "answer",
            "end": a.end, "context": a.context,
            **({"line_style": a.line_style} if a.line_style != "plain" else {}),
            "n_train": len(splits.train), "n_val_scored": len(val), "splits": hashes,
            "eval_s": round(eval_s, 1), **ran, "best_val_exact": max((c["val_exact"] for c in ran["curve"][1:]), default=None)})
        if "stopped_at" in ran:
            break


def bare_scores(lm, items, encoded) -> dict[str, float]:
    """Teacher-forced exact match on the bare lines (every answer token the argmax) and the mean
    answer loss per token, over ``encoded`` (prompt without demonstrations, answer without end)."""
    was = lm.model.training
    lm.model.eval()
    try:
        rows = check.token_accuracy(lm, items, encoded, batch_size=16)
    finally:
        lm.model.train(was)
    return {"val_bare_exact": round(sum(r["hits"] == r["tokens"] for r in rows) / len(rows), 4),
            "val_loss": round(check.mean_loss(lm, encoded, batch_size=16), 4)}


def diagnose(a, lm, splits, val, bare_lines, shown_lines) -> None:
    """Teacher-forced readings of ``val`` on the base model or saved weights: 004's free format
    (5-shot questions) with the line's end and with the answer's tokens alone; the bare line with
    no demonstrations and with the same demonstrations as bare lines."""
    if a.diagnose != "base":
        lm.model.load_state_dict(torch.load(a.diagnose))
    free = check.free_exact_match(lm, val, splits.demos, batch_size=16)
    digits = check.free_exact_match(lm, val, splits.demos, batch_size=16, need_end=False)
    bare, shown = bare_scores(lm, val, bare_lines), bare_scores(lm, val, shown_lines)
    record = {"weights": a.diagnose, "n": len(val), "free_exact": round(sum(free) / len(val), 4),
              "free_digits": round(sum(digits) / len(val), 4), "bare_exact": bare["val_bare_exact"],
              "bare_exact_with_demos": shown["val_bare_exact"], "bare_loss": bare["val_loss"],
              "bare_loss_with_demos": shown["val_loss"]}
    print(json.dumps(record), flush=True)
    with a.out.open("a") as f:
        f.write(json.dumps(record) + "\n")


def wording(a, lm, splits, val) -> None:
    """Teacher-forced exact match on ``val`` (every answer token the argmax, then a line end:
    :func:`whitebox_eval.finetune.check.line_exact_match`) with the demonstrations and the asked line
    each in 004's free wording (``Question: What is the value of 76 + 44?`` / ``Answer:``) or as a
    bare line (``76 + 44 =``), one line apart as 004's prompt lays them; beside them 004's own
    rendered prompt and both lines alone."""
    from whitebox_eval.finetune.arithmetic_text import line_of
    from whitebox_eval.tasks.prompts import render_prompt

    if a.wording != "base":
        lm.model.load_state_dict(torch.load(a.wording))

    def question(it):
        return render_prompt(it.source, fmt="free", demos=[]).text

    def bare(it):
        return line_of(it.source.meta["expression"], it.source.meta["answer"])[0]

    def answer(it):
        return line_of(it.source.meta["expression"], it.source.meta["answer"])[1]

    def shown(style, asked):
        return lambda it: "".join(style(d) + answer(d) + "\n" for d in splits.demos) + asked(it)

    demos = [d.source for d in splits.demos]
    variants = {"free_format": lambda it: render_prompt(it.source, fmt="free", demos=demos).text,
                "question_alone": question, "bare_demos_then_question": shown(bare, question),
                "question_demos_then_bare": shown(question, bare), "bare_demos_then_bare": shown(bare, bare),
                "bare_alone": bare}
    record: dict = {"model": a.model, "weights": a.wording, "n": len(val), "shots": len(splits.demos)}
    answers = [answer(it) for it in val]
    for name, render in variants.items():
        record[name] = sum(check.line_exact_match(lm, [render(it) for it in val], answers, batch_size=16))
    print(json.dumps(record), flush=True)
    with a.out.open("a") as f:
        f.write(json.dumps(record) + "\n")


def test_check(a, lm, splits) -> None:
    """The check of the test split's first ``test_n`` items in 004's free format (greedy and
    ``samples`` draws at T = 1, as :func:`whitebox_eval.finetune.check.held_out_check`)."""
    from whitebox_eval.finetune.check import _free_format

    if a.check != "base":
        lm.model.load_state_dict(torch.load(a.check))
    items = splits.test[:a.test_n]
    t0 = time.process_time()
    rows = _free_format(lm, items, splits.demos, a.samples, a.seed, 6)
    t1 = time.process_time()
    check.free_exact_match(lm, splits.validation[:a.val_n], splits.demos, batch_size=16)
    val_cpu = (time.process_time() - t1) / min(a.val_n, len(splits.validation))
    record = {"weights": a.check, "cpu_s_per_validation_item": round(val_cpu, 3), "cats": a.cats, "test_n": len(items), "samples": a.samples,
              "splits": {k: v["sha256"] for k, v in splits.record(a.seed).items() if isinstance(v, dict)},
              "cpu_s_per_item": round((time.process_time() - t0) / len(items), 2),
              "greedy": [bool(r["correct"]) for r in rows], "p_correct": [r["p_correct"] for r in rows],
              "ids": [r["id"] for r in rows], "responses": [r["response"] for r in rows]}
    print(json.dumps({k: v for k, v in record.items() if k not in ("ids", "responses")}), flush=True)
    with a.out.open("a") as f:
        f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    recipe_sweep.main_guard(main)
