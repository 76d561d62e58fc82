"""Full MCQA study: the engine's single-pass path vs a straightforward per-method path.

The study is 000's: baseline + Permutation Accuracy + PriDe + every head's QK- and
Attention-score + logit lens, on the Simple Synthetic Dataset, 0-shot and 5-shot.

- engine: ``run_mcqa`` (one pass per batch feeds every scorer; last-position logits
  only; attention rows of the last token only; the 5-shot demonstrations' key/value
  cache computed once and reused);
- per-method: what one writes with plain transformers: a separate forward per method
  (baseline; QK via hooks on q/k projections; attention with eager
  ``output_attentions``; logit lens from ``output_hidden_states`` through the full
  vocabulary), full-sequence logits, no cache, for the original, permuted and PriDe
  prompts alike.

Both paths are checked to agree (baseline predictions and per-head accuracy tables),
then timed. Prints wall time per path, the ratio, and 5-shot / 0-shot.

    python benchmarks/mcqa_study.py --model smollm2-135m --items 60
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from whitebox_eval.mcqa import head_scores as hs
from whitebox_eval.tasks.demos import select_demos, split_demo_pool
from whitebox_eval.tasks.prompts import render_prompt
from whitebox_eval.mcqa.study import MCQAConfig, load_items, permutation_order, run_mcqa
from whitebox_eval.tasks.prompt_tokens import tokenize_prompt
from whitebox_eval.models import load_model

METHODS = ("baseline", "qk", "attention", "lens", "pride", "pa")


def naive_study(lm, cfg: MCQAConfig) -> dict[str, np.ndarray]:
    """Every method with its own plain forward passes (eager attention, full logits, no cache)."""
    model, tok, arch = lm.model, lm.tokenizer, lm.arch
    model.set_attn_implementation("eager")
    items = load_items(cfg)
    demos = []
    if cfg.shots:
        pool, items = split_demo_pool(items)
        demos = select_demos(pool, cfg.shots, seed=cfg.seed)
    items = items[: cfg.limit]
    split = hs.validation_split(len(items), cfg.val_fraction, cfg.min_val_items, cfg.seed)
    render = lambda it: render_prompt(it, demos=demos)
    L, H, D = arch.n_layers, arch.n_heads, arch.head_dim

    def forward(r, **kw):
        t = tokenize_prompt(tok, r)
        with torch.no_grad():
            out = model(input_ids=torch.tensor([t.input_ids]), **kw)
        return t, out

    def baseline(r):
        t, out = forward(r)
        return out.logits[0, -1, t.answer_ids].numpy()

    def qk(r):
        store = {}
        hooks = []
        for l in range(L):
            att = arch.attention(l)
            hooks.append(att.q_proj.register_forward_hook(lambda m, a, o, l=l: store.__setitem__(("q", l), o[0])))
            hooks.append(att.k_proj.register_forward_hook(lambda m, a, o, l=l: store.__setitem__(("k", l), o[0])))
        t, _ = forward(r)
        for h in hooks:
            h.remove()
        out = np.zeros((L, H, len(t.option_positions)), dtype=np.float32)
        for l in range(L):
            q = store[("q", l)][-1].view(H, D)
            k = store[("k", l)][t.option_positions].view(len(t.option_positions), -1, D)
            for h in range(H):
                out[l, h] = (k[:, arch.kv_head(h)] @ q[h]).numpy()
        return out

    def attention(r):
        t, out = forward(r, output_attentions=True)
        return np.stack([a[0, :, -1, t.option_positions].numpy() for a in out.attentions])

    def lens(r):
        t, out = forward(r, output_hidden_states=True)
        rows = []
        for hsd in out.hidden_states[1:]:
            logits = model.lm_head(model.model.norm(hsd[0, -1]))  # full vocabulary
            rows.append(logits[t.answer_ids].detach().numpy())
        return np.stack(rows)

    rendered = [render(it) for it in items]
    res = {"baseline": np.stack([baseline(r) for r in rendered]), "qk": np.stack([qk(r) for r in rendered]),
           "attention": np.stack([attention(r) for r in rendered]), "lens": np.stack([lens(r) for r in rendered])}
    rng = random.Random(f"pa-{cfg.seed}")
    orders = [permutation_order(len(it.options), rng) for it in items]
    perm = [render(it.permuted(o)) for it, o in zip(items, orders)]
    res["perm_baseline"] = np.stack([baseline(r) for r in perm])
    res["perm_qk"] = np.stack([qk(r) for r in perm])
    res["perm_attention"] = np.stack([attention(r) for r in perm])
    n = len(items[0].options)
    res["pride"] = np.stack([[baseline(render(items[i].permuted([(j + p) % n for j in range(n)]))) for p in range(n)] for i in split.val])
    model.set_attn_implementation("whitebox_sdpa")
    return res


def time_it(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="bundled name or model folder")
    ap.add_argument("--items", type=int, default=60, help="SSD items (validation split = --min-val-items)")
    ap.add_argument("--min-val-items", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--shots", default="0,5", help="comma list of shot counts to time")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--out", default="benchmarks/results/mcqa_study.json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = load_model(args.model)
    rows = {}
    for shots in [int(s) for s in args.shots.split(",")]:
        cfg = MCQAConfig(model=args.model, limit=args.items, min_val_items=args.min_val_items, shots=shots,
                         batch_size=args.batch_size, methods=METHODS)
        with tempfile.TemporaryDirectory() as tmp:
            folder = None

            def engine_path():
                nonlocal folder
                folder = run_mcqa(cfg, tmp, run_id=f"s{shots}", loaded=lm, show_progress=False)

            t_engine = time_it(engine_path)
            naive = {}
            t_naive = time_it(lambda: naive.update(naive_study(lm, cfg)))
            letters = folder.load_array("letter_logits")[:, : naive["baseline"].shape[1]]
            agree = float((letters.argmax(1) == naive["baseline"].argmax(1)).mean())
            qk_diff = float(np.nanmax(np.abs(folder.load_array("qk")[..., : naive["qk"].shape[-1]] - naive["qk"])))
            att_diff = float(np.nanmax(np.abs(folder.load_array("attention")[..., : naive["attention"].shape[-1]] - naive["attention"])))
        rows[shots] = {"engine_s": t_engine, "naive_s": t_naive, "speedup": t_naive / t_engine,
                       "baseline_agreement": agree, "max_abs_diff_qk": qk_diff, "max_abs_diff_attention": att_diff}
        print(f"{shots}-shot: engine {t_engine:7.1f} s   per-method {t_naive:7.1f} s   speed-up {t_naive / t_engine:4.1f}x   "
              f"(baseline predictions agree on {agree:.0%}, max |QK diff| {qk_diff:.1e}, max |attn diff| {att_diff:.1e})", flush=True)
    if 0 in rows and 5 in rows:
        r5 = rows[5]["engine_s"] / rows[0]["engine_s"]
        n5 = rows[5]["naive_s"] / rows[0]["naive_s"]
        print(f"5-shot / 0-shot cost: engine {r5:.2f}x   per-method {n5:.2f}x")
        rows["five_over_zero"] = {"engine": r5, "naive": n5}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": args.model, "items": args.items, "torch_threads": torch.get_num_threads(),
                               "argv": sys.argv, "rows": {str(k): v for k, v in rows.items()}}, indent=2))
    print(f"written {out}")


if __name__ == "__main__":
    main()
