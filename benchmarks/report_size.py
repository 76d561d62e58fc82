"""Size and build time of the interactive report (and of --static) for a 1,000-item
MMLU-style mcqa run and a GAR intervention run of every non-KR task, 2 examples each (768
examples, 4 stages: 3,072 sample lines; the issue asked for at least 500).

The 1,000 items: the shared MMLU sample's test rows (532), its dev rows (285) and ARC
Challenge rows (183), all four-option lettered questions, written as one ``mcq=`` file.
The runs are made with random llamas that have SmolLM2-135M's tokenizer, so the prompts
are real text in SmolLM2's tokens: mcqa 4 layers x 9 heads (SmolLM2 has 30 x 9), GAR 2
layers. On 2 shared cores the real SmolLM2 took about 2 s per MMLU item (main pass + rows
pass), too slow for 1,000 items here. What the page holds per item depends on the tokens
and on the 8 kept heads, not on the weights; with SmolLM2's 30 layers the lens adds 26
numbers per item (about 0.2 MB per 1,000 items) and the two head grids 2 x 270 cells.

    python benchmarks/report_size.py --data ../shared/datasets --out benchmarks/results/report_size.md
    python benchmarks/report_size.py --items 12 --gar-tasks generation --gar-limit 1 --work /tmp/rs   # a small check
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import torch
import transformers as tf

from whitebox_eval.models import load_model
from whitebox_eval.models.architectures import Architecture
from whitebox_eval.models.loading import LoadedModel
from whitebox_eval.report import write_report


def random_llama(tokenizer, layers: int, heads: int, kv_heads: int, head_dim: int, hidden: int) -> LoadedModel:
    """A random llama of the given layout over ``tokenizer``'s vocabulary."""
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=48, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                         max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id or 0,
                         attn_implementation="sdpa")
    model = tf.LlamaForCausalLM(cfg).eval()
    return LoadedModel(model, tokenizer, Architecture.of(model), "random-llama", "random")


def mmlu_style_file(data: Path, out: Path, n: int = 1000) -> Path:
    """``n`` four-option questions as JSON lines: MMLU test, then MMLU dev, then ARC Challenge."""
    rows = []
    for split in ("test", "dev"):
        for path in sorted((data / "mmlu" / split).glob("*.csv")):
            with path.open(encoding="utf-8", newline="") as f:
                for k, r in enumerate(csv.reader(f)):
                    rows.append({"id": f"mmlu/{path.stem}/{k}", "question": r[0], "choices": r[1:5],
                                 "answer": "ABCD".index(r[5].strip())})
    for k, line in enumerate((data / "arc" / "arc_challenge_sample.llmfoundry.jsonl").open(encoding="utf-8")):
        r = json.loads(line)
        if len(r["choices"]) == 4:
            rows.append({"id": f"arc/{k}", "question": r["query"].removeprefix("Question: "), "choices": r["choices"],
                         "answer": r["gold"]})
    if len(rows) < n:
        raise SystemExit(f"only {len(rows)} questions under {data}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows[:n]), encoding="utf-8")
    return out


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and "parts" not in p.parts)


def measure(run: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    page = write_report([run], out / f"{run.name}.html")
    built = time.perf_counter() - t0
    t0 = time.perf_counter()
    static = write_report([run], out / f"{run.name}-static.html", static=True)
    built_static = time.perf_counter() - t0
    n = sum(1 for _ in (run / "samples.jsonl").open(encoding="utf-8"))
    rows = run / "arrays" / "attention_rows.npy"
    return {"run": run.name, "sample_lines": n, "report_bytes": page.stat().st_size, "build_s": round(built, 2),
            "static_bytes": static.stat().st_size, "static_build_s": round(built_static, 2),
            "run_bytes_without_parts": folder_bytes(run), "samples_bytes": (run / "samples.jsonl").stat().st_size,
            "attention_rows_bytes": rows.stat().st_size if rows.is_file() else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/datasets", help="folder holding mmlu/{test,dev}/*.csv and arc/")
    ap.add_argument("--work", default="/tmp/report_size", help="where the runs and pages go")
    ap.add_argument("--out", default=None, help="write the table here (markdown) as well as printing it")
    ap.add_argument("--items", type=int, default=1000, help="questions in the mcqa run (default: %(default)s)")
    ap.add_argument("--gar-tasks", default="all", help="the GAR run's --tasks (default: %(default)s)")
    ap.add_argument("--gar-limit", type=int, default=2, help="examples per GAR task (default: %(default)s)")
    ap.add_argument("--tokenizer", default="smollm2-135m",
                    help="model whose tokenizer the random llamas get (default: %(default)s)")
    args = ap.parse_args()
    from whitebox_eval.gar.intervene_study import GARInterveneConfig, run_gar_intervene
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    work = Path(args.work)
    tokenizer = load_model(args.tokenizer).tokenizer
    rows = []
    n = args.items
    items = mmlu_style_file(Path(args.data), work / f"mmlu_style_{n}.jsonl", n)
    made: dict[str, float | None] = {}

    def made_once(run_id: str, make) -> Path:
        """A finished run under ``work`` is measured again, not remade (its making time is then unknown)."""
        if (work / run_id / "results.json").is_file():
            made[run_id] = None
            return work / run_id
        t0 = time.perf_counter()
        path = make().path
        made[run_id] = round(time.perf_counter() - t0, 1)
        return path

    mcqa = made_once(f"mmlu-{n}", lambda: run_mcqa(
        MCQAConfig(model="random-4x9", task=f"mcq={items}", limit=n, methods=("baseline", "qk", "attention", "lens"),
                   batch_size=16, min_val_items=min(50, n // 4)),  # 50 (the default) from 200 items on
        work, run_id=f"mmlu-{n}", loaded=random_llama(tokenizer, 4, 9, 3, 4, 36), show_progress=False))
    gar_id = f"gar-{args.gar_tasks.replace(',', '+')}-{args.gar_limit}"
    gar = made_once(gar_id, lambda: run_gar_intervene(
        GARInterveneConfig(model="random-2-layer", tasks=args.gar_tasks, limit=args.gar_limit, heads="1.0,1.1",
                           batch_size=16),
        work, run_id=gar_id, loaded=random_llama(tokenizer, 2, 4, 2, 8, 32), show_progress=False))
    for run in (mcqa, gar):
        rows.append({**measure(run, work), "run_made_s": made[run.name]})
    lines = ["| run | sample lines | report.html | build | --static | build | run folder (no parts) | samples.jsonl | attention_rows.npy |",
             "|---|---|---|---|---|---|---|---|---|"]
    mb = lambda b: "\u2014" if b is None else f"{b / 1e6:.2f} MB"  # noqa: E731
    for r in rows:
        lines.append(f"| {r['run']} | {r['sample_lines']} | {mb(r['report_bytes'])} | {r['build_s']} s | "
                     f"{mb(r['static_bytes'])} | {r['static_build_s']} s | {mb(r['run_bytes_without_parts'])} | "
                     f"{mb(r['samples_bytes'])} | {mb(r['attention_rows_bytes'])} |")
    text = "\n".join(lines)
    print(text)
    print(json.dumps(rows, indent=1))
    if args.out:
        Path(args.out).write_text(text + "\n\n```json\n" + json.dumps(rows, indent=1) + "\n```\n", encoding="utf-8")


if __name__ == "__main__":
    main()
