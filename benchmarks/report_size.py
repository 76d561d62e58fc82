"""Size and build time of the interactive report (and of --static) for a 1,000-item MMLU
mcqa run and a ~500-example GAR intervention run.

The runs are made here with random models that have SmolLM2-135M's tokenizer (so the
prompts are real MMLU / GAR text in SmolLM2's tokens): for mcqa a llama with SmolLM2's
layout of 30 layers x 9 heads (so the head grid, the lens and the kept rows have the real
model's shapes) but a 36-wide residual, for GAR a 2-layer llama. On 2 shared cores the
real SmolLM2 took about 2 s per MMLU item (main pass + rows pass), too slow for 1,000
items here; what the report stores per item depends on the tokens and the layout, not
on the weights.

    python benchmarks/report_size.py --out benchmarks/results/report_size.md
"""

from __future__ import annotations

import argparse
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
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=48, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                         max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id or 0,
                         attn_implementation="sdpa")
    model = tf.LlamaForCausalLM(cfg).eval()
    return LoadedModel(model, tokenizer, Architecture.of(model), "random-smollm2-layout", "random")


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
    ap.add_argument("--mmlu", default="../shared/datasets/mmlu/test", help="MMLU test folder (hub CSV layout)")
    ap.add_argument("--work", default="/tmp/report_size", help="where the runs and pages go")
    ap.add_argument("--out", default=None, help="write the table here (markdown) as well as printing it")
    args = ap.parse_args()
    from whitebox_eval.gar.intervene_study import GARInterveneConfig, run_gar_intervene
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    work = Path(args.work)
    tokenizer = load_model("smollm2-135m").tokenizer
    rows = []
    t0 = time.perf_counter()
    mcqa = run_mcqa(MCQAConfig(model="random-smollm2-layout", task=f"mmlu={args.mmlu}", shots=0, limit=1000,
                               methods=("baseline", "qk", "attention", "lens"), batch_size=16),
                    work, run_id="mmlu-1000", loaded=random_llama(tokenizer, 30, 9, 3, 4, 36), show_progress=False)
    made = {"mmlu-1000": time.perf_counter() - t0}
    t0 = time.perf_counter()
    gar = run_gar_intervene(GARInterveneConfig(model="random-2-layer", tasks="truth", limit=167, heads="1.0,1.1",
                                               batch_size=16),
                            work, run_id="gar-500", loaded=random_llama(tokenizer, 2, 4, 2, 8, 32), show_progress=False)
    made["gar-500"] = time.perf_counter() - t0
    for run in (mcqa.path, gar.path):
        rows.append({**measure(run, work), "run_made_s": round(made[run.name], 1)})
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
