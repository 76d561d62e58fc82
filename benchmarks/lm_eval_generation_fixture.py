"""Freeze lm-evaluation-harness 0.4.13's own generate_until runs for the generation route's tests.

Three tasks, each a different shape of lm-eval generation task, on synthetic rows in each
task's hub schema (``tests/fixtures/lm_eval_generation/data/<task>/<split>.jsonl``, written
here, deterministic):

- ``gsm8k`` (its default config: 5-shot from the train split, ``until`` Question:, the
  ``strict-match`` and ``flexible-extract`` filter pipelines, ``exact_match`` with its
  ``regexes_to_ignore``): word problems whose worked answers end in ``#### N``;
- ``bbh_fewshot_boolean_expressions`` (3-shot from the YAML's own samples, ``first_n``):
  random Boolean expressions and their values;
- ``hendrycks_math_algebra`` (0-shot, its own ``process_docs`` and ``process_results``):
  one-step equations whose solutions end in ``\\boxed{N}``.

lm-eval runs SmolLM2-135M greedily (its HF backend, float32, CPU, batch size 1 so no padding
enters a generation) with ``log_samples``; ``lm_eval_generation.json`` keeps, per document,
lm-eval's context, generation kwargs, kept text (``resps``), and per filter the filtered
answer and the metrics. Run with a Python that has lm-eval 0.4.13 (a separate venv, torch CPU
build first):

    /path/to/lmeval-venv/bin/python benchmarks/lm_eval_generation_fixture.py
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lm_eval_parity import REPO, build_task, find_model_dir, local_source, sanitize, write_jsonl  # noqa: E402

OUT = REPO / "tests" / "fixtures" / "lm_eval_generation"
MODEL_PLACEHOLDER = "<smollm2-135m HF folder>"
TASKS = {  # task -> (its splits written here, how many rows in each)
    "gsm8k": {"train": 12, "test": 16},
    "bbh_fewshot_boolean_expressions": {"test": 24},
    "hendrycks_math_algebra": {"train": 4, "test": 12},
}
NAMES = ("Ava", "Ben", "Chloe", "Dev", "Emma", "Finn", "Gia", "Hugo", "Iris", "Jack", "Kira", "Liam")
THINGS = ("apples", "stickers", "marbles", "pencils", "cookies", "cards", "books", "shells")


def gsm8k_rows(rng: random.Random, n: int) -> list[dict]:
    """Word problems in GSM8K's layout: a worked answer with <<calculator>> notes, then #### N."""
    rows = []
    for i in range(n):
        name, thing = rng.choice(NAMES), rng.choice(THINGS)
        a, b, c = rng.randint(2, 30), rng.randint(2, 12), rng.randint(2, 9)
        kind = i % 4
        if kind == 0:
            q = f"{name} has {a} {thing}. {name} buys {b} more {thing}. How many {thing} does {name} have now?"
            r = a + b
            w = f"{name} has {a} + {b} = <<{a}+{b}={r}>>{r} {thing}."
        elif kind == 1:
            a = a + b
            q = f"{name} had {a} {thing} and gave {b} of them to a friend. How many {thing} does {name} have left?"
            r = a - b
            w = f"{name} has {a} - {b} = <<{a}-{b}={r}>>{r} {thing} left."
        elif kind == 2:
            q = f"{name} buys {c} boxes of {thing}. Each box holds {b} {thing}. How many {thing} does {name} buy?"
            r = b * c
            w = f"{name} buys {c} * {b} = <<{c}*{b}={r}>>{r} {thing}."
        else:
            q = (f"{name} earns ${b} an hour and works {c} hours a day for {a % 6 + 2} days. "
                 f"How many dollars does {name} earn?")
            d = a % 6 + 2
            day, r = b * c, b * c * d
            w = (f"In one day {name} earns {b} * {c} = <<{b}*{c}={day}>>{day} dollars.\n"
                 f"In {d} days {name} earns {day} * {d} = <<{day}*{d}={r}>>{r} dollars.")
        rows.append({"question": q, "answer": f"{w}\n#### {r}"})
    return rows


def boolean_rows(rng: random.Random, n: int) -> list[dict]:
    """BIG-Bench Hard boolean_expressions' layout: a spaced expression ending in "is", its value."""
    def expr(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            return ("not " if rng.random() < 0.3 else "") + rng.choice(("True", "False"))
        kind = rng.random()
        if kind < 0.25:
            return f"not ( {expr(depth - 1)} )"
        return f"{expr(depth - 1)} {rng.choice(('and', 'or'))} {expr(depth - 1)}"
    rows, seen = [], set()
    while len(rows) < n:
        e = expr(2)
        if e in seen:
            continue
        seen.add(e)
        rows.append({"input": f"{e} is", "target": str(eval(e))})  # noqa: S307 - our own True/False/and/or/not text
    return rows


def algebra_rows(rng: random.Random, n: int) -> list[dict]:
    """MATH's layout: a LaTeX problem and a solution whose answer is \\boxed{}."""
    rows = []
    for _ in range(n):
        x, a, b = rng.randint(-9, 12), rng.randint(2, 9), rng.randint(1, 20)
        c = a * x + b
        rows.append({"problem": f"Solve for $x$: ${a}x + {b} = {c}$.",
                     "solution": f"Subtracting {b} from both sides gives ${a}x = {c - b}$, so $x = \\boxed{{{x}}}$.",
                     "level": "Level 1", "type": "Algebra"})
    return rows


def write_data(out: Path = OUT) -> dict[str, dict[str, str]]:
    makers = {"gsm8k": gsm8k_rows, "bbh_fewshot_boolean_expressions": boolean_rows,
              "hendrycks_math_algebra": algebra_rows}
    files: dict[str, dict[str, str]] = {}
    for task, splits in TASKS.items():
        rows = makers[task](random.Random(f"whitebox-eval/generation/{task}"), sum(splits.values()))
        files[task], start = {}, 0
        for split, k in splits.items():
            files[task][split] = write_jsonl(out / "data" / task / f"{split}.jsonl", rows[start:start + k])
            start += k
    return files


def overrides(files: dict[str, str]) -> dict:
    """The data source set to local files, every split the files lack null (lm-eval's offline use)."""
    have = set(files)
    splits = {key: None for key, name in (("training_split", "train"), ("validation_split", "validation"))
              if name not in have}
    return local_source(files, **splits)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir")
    ap.add_argument("--project-python", default=os.environ.get("WHITEBOX_PYTHON", str(REPO / ".venv" / "bin" / "python")))
    ap.add_argument("--out", type=Path, default=OUT, help="folder written (default: %(default)s)")
    ap.add_argument("--limit", type=int, default=None, help="lm-eval's --limit: the first N documents of each task")
    args = ap.parse_args()
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import lm_eval
    from lm_eval.tasks import TaskManager

    model_dir = args.model_dir or find_model_dir(args.project_python)
    model_args = {"pretrained": model_dir, "dtype": "float32"}
    files = write_data(args.out)
    tm = TaskManager(metadata=dict(model_args))
    tasks = [build_task(tm, t, overrides(files[t])) for t in TASKS]
    res = lm_eval.simple_evaluate(model="hf", model_args=dict(model_args), tasks=tasks, batch_size=1, device="cpu",
                                  log_samples=True, task_manager=tm, limit=args.limit)
    out = {"header": {"lm_eval_version": getattr(lm_eval, "__version__", "0.4.13"),
                      "model": "smollm2-135m (dequantized GGUF, float32, cpu)", "batch_size": 1,
                      "fewshot_random_seed": 1234, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "command": "python benchmarks/lm_eval_generation_fixture.py",
                      "data": "tests/fixtures/lm_eval_generation/data/<task>/<split>.jsonl (synthetic, each task's hub "
                              "schema)", "splits": TASKS},
           "tasks": {}}
    for t in TASKS:
        by_doc: dict[int, dict] = {}
        for s in res["samples"][t]:
            d = by_doc.setdefault(s["doc_id"], {"doc_id": s["doc_id"], "prompt": s["arguments"][0][0],
                                                "gen_kwargs": s["arguments"][0][1], "target": s["target"],
                                                "resp": s["resps"][0][0], "filters": {}})
            d["filters"][s["filter"]] = {"filtered": s["filtered_resps"][0],
                                         **{m: s[m] for m in s["metrics"]}}
        out["tasks"][t] = {"n_shot": res["n-shot"][t], "results": res["results"][t],
                           "docs": [by_doc[k] for k in sorted(by_doc)]}
        print(t, {k: v for k, v in res["results"][t].items() if "stderr" not in k}, flush=True)
    path = args.out / "lm_eval_generation.json"
    path.write_text(json.dumps(sanitize(out, {model_dir: MODEL_PLACEHOLDER}), indent=1, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
