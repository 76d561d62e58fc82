"""Our ``mcqa --prompt lm-eval`` on the whole shared samples vs lm-eval 0.4.13's own run.

Reads ``tests/fixtures/lm_eval_whole_files.json`` (written by ``benchmarks/lm_eval_fixtures.py
--part whole``: lm-eval's prompt hashes, log-likelihoods, acc and acc_norm per document) and
runs our tool on the same files: ARC-Challenge (300 rows) and HellaSwag (200 rows) 0-shot,
MMLU's shared subjects 0- and 5-shot, ARC 25-shot and HellaSwag 10-shot with the samples'
first rows as the training split (the rest evaluated). Prints, per setting, n on both
sides, how many prompts are lm-eval's, the largest log-likelihood difference, and acc /
acc_norm on both sides with the items whose prediction differs, and writes the table to
``benchmarks/results/lm_eval_whole_files.md``.

    .venv/bin/python benchmarks/lm_eval_whole_files.py               # every setting the fixture has scored
    .venv/bin/python benchmarks/lm_eval_whole_files.py --only arc_challenge/0,mmlu/5 --limit 50

MMLU is a letters task: lm-eval's log-likelihood of " A".." D" is the next-token log-softmax,
ours the logit, so their differences to option A are compared (the same up to the
log-partition constant).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

FIXTURE = REPO / "tests" / "fixtures" / "lm_eval_whole_files.json"
TRAIN = {"arc": 50, "hellaswag": 40}
SOURCES = {"arc": "arc/arc_challenge_sample.llmfoundry.jsonl", "hellaswag": "hellaswag/hellaswag_val_sample.jsonl"}
SETTINGS = {"arc_challenge/0": ("arc", 0), "hellaswag/0": ("hellaswag", 0), "mmlu/0": ("mmlu", 0),
            "mmlu/5": ("mmlu", 5), "hellaswag/10": ("hellaswag", 10), "arc_challenge/25": ("arc", 25)}


def task_for(name: str, shots: int, shared: Path, tmp: Path) -> str:
    if name == "mmlu":
        return f"mmlu={shared / 'mmlu' / 'test'}"
    if shots == 0:
        return f"{name}={shared / SOURCES[name]}"
    lines = (shared / SOURCES[name]).read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp / f"{name}_train.jsonl").write_text("".join(lines[:TRAIN[name]]), encoding="utf-8")
    (tmp / f"{name}_test.jsonl").write_text("".join(lines[TRAIN[name]:]), encoding="utf-8")
    return f"{name}={tmp / f'{name}_test.jsonl'}"  # the train file beside it is the demonstrations' pool


def compare(key: str, block: dict, samples_by_task: dict[str, list[dict]]) -> dict:
    """Our samples of each lm-eval task against lm-eval's scored items (its first ``len(items)``)."""
    samples, theirs, prompts = [], [], []
    for name, t in block["tasks"].items():
        n_task = min(len(samples_by_task[name]), len(t["items"]))
        samples += samples_by_task[name][:n_task]
        theirs += t["items"][:n_task]
        prompts += t["prompts"][:n_task]
    n = len(samples)
    letters = key.startswith("mmlu")
    max_diff, same_prompt, diff = 0.0, 0, {"acc": [], "acc_norm": []}
    acc = {"acc": [0.0, 0.0], "acc_norm": [0.0, 0.0]}
    for s, t, p in zip(samples, theirs, prompts):
        same_prompt += s["prompt_hash"] == p["prompt_hash"]
        if letters:
            ours = np.array(s["letter_logits"], float)
            ref = np.array(t["loglik"], float)
            max_diff = max(max_diff, float(np.max(np.abs((ours - ours[0]) - (ref - ref[0])))))
            preds = {"acc": int(np.argmax(ours))}
        else:
            ours = np.array(s["cloze_loglik"], float)
            max_diff = max(max_diff, float(np.max(np.abs(ours - np.array(t["loglik"], float)))))
            preds = {"acc": s["pred_cloze"], "acc_norm": s["pred_cloze_norm"]}
        for m, pred in preds.items():
            if m in t:
                mine = float(int(pred) == int(s["gold"]))
                acc[m][0] += mine
                acc[m][1] += t[m]
                if mine != t[m]:
                    diff[m].append(t["doc_id"])
    return {"key": key, "n_ours": sum(map(len, samples_by_task.values())),
            "n_lm_eval": sum(len(t["prompts"]) for t in block["tasks"].values()), "compared": n,
            "same_prompts": same_prompt,
            "max_abs_loglik_diff": max_diff,
            **{f"{m}_ours": acc[m][0] / n for m in acc if acc[m][1] or diff[m] or m == "acc"},
            **{f"{m}_lm_eval": acc[m][1] / n for m in acc if acc[m][1] or diff[m] or m == "acc"},
            "differing_items": {m: v for m, v in diff.items() if v}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=Path, default=REPO.parent / "shared" / "datasets")
    ap.add_argument("--only", default=None, help="comma list of settings (default: every scored one)")
    ap.add_argument("--limit", type=int, default=None, help="first N items of each setting (lm-eval's first N too)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "lm_eval_whole_files.md")
    ap.add_argument("--fixture", type=Path, default=FIXTURE, help="lm-eval's side (default: %(default)s)")
    ap.add_argument("--model", default="smollm2-135m", help="the model lm-eval ran (default: %(default)s)")
    args = ap.parse_args()
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa
    from whitebox_eval.models import load_model

    fixture = json.loads(args.fixture.read_text(encoding="utf-8"))
    loaded = load_model(args.model, dtype="float32")
    kept = args.out.with_suffix(".json")  # every setting's last row, so settings can be run one at a time
    rows_by_key = json.loads(kept.read_text(encoding="utf-8")) if kept.exists() else {}
    for key, (name, shots) in SETTINGS.items():
        block = fixture["runs"].get(key)
        if (args.only and key not in args.only.split(",")) or not block or not all(
                "items" in t for t in block["tasks"].values()):
            continue
        scored = max(len(t["items"]) for t in block["tasks"].values())  # lm-eval scored its first N (LIMIT)
        full = max(len(t["prompts"]) for t in block["tasks"].values())
        limits = [x for x in (args.limit, scored if scored < full else None) if x]
        limit = min(limits) if limits else None
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            samples_by_task = {}
            for lm_task in block["tasks"]:  # MMLU: one run per subject file (lm-eval's mmlu_<subject> tasks)
                task = (f"mmlu={args.datasets / 'mmlu' / 'test' / (lm_task[len('mmlu_'):] + '_test.csv')}"
                        if name == "mmlu" else task_for(name, shots, args.datasets, Path(tmp)))
                # one item per cloze chunk (batch 2): its choices share the whole context, computed once
                cfg = MCQAConfig(model=args.model, task=task, prompt="lm-eval", shots=shots, limit=limit,
                                 methods=("baseline",) if name == "mmlu" else ("cloze",), uncertainty=False,
                                 batch_size=8 if name == "mmlu" else 2)
                folder = run_mcqa(cfg, Path(tmp) / "runs", run_id=lm_task, loaded=loaded, show_progress=True)
                samples_by_task[lm_task] = [json.loads(x) for x in (folder.path / "samples.jsonl").read_text().splitlines()]
            row = compare(key, block, samples_by_task)
            row["scored_limit"] = limit
            row["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(row), flush=True)
        rows_by_key[key] = row
        kept.write_text(json.dumps(rows_by_key, indent=1) + "\n", encoding="utf-8")
    rows = [dict(rows_by_key[k]) for k in SETTINGS if k in rows_by_key]
    lines = ["# Whole shared samples: our `mcqa --prompt lm-eval` vs lm-eval 0.4.13's own run", "",
             "Command: `python benchmarks/lm_eval_whole_files.py [--only SETTINGS]` (SmolLM2-135M float32, CPU; rows "
             "kept in lm_eval_whole_files.json). lm-eval's side: `tests/fixtures/lm_eval_whole_files.json`.", "",
             "| setting | n ours / lm-eval | same prompts | max abs Δ log-lik | acc ours / lm-eval | acc_norm ours / lm-eval"
             " | items predicted differently |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("scored_limit"):
            r["key"] += f" (first {r['scored_limit']} per task scored; every prompt compared in the tests)"
        norm = (f"{r['acc_norm_ours']:.4f} / {r['acc_norm_lm_eval']:.4f}" if "acc_norm_ours" in r else "(not reported)")
        lines.append(f"| {r['key']} | {r['n_ours']} / {r['n_lm_eval']} | {r['same_prompts']} of {r['compared']} | "
                     f"{r['max_abs_loglik_diff']:.1e} | {r['acc_ours']:.4f} / {r['acc_lm_eval']:.4f} | {norm} | "
                     f"{r['differing_items'] or 'none'} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
