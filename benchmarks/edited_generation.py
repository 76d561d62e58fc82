"""Edited generation: the engine's cached decoding vs re-running the sequence vs HF ``generate``.

One left-padded batch of chat prompts (arithmetic questions, as MUI's arithmetic-gen)
is continued greedily for ``--new`` tokens (stop tokens off, so every method makes
the same number of steps). Methods, interleaved round by round:

  hf generate        ``model.generate`` with its own key/value cache, no edits = 1.00
  engine cached      :func:`whitebox_eval.internals.generation.generate`, no edits
  cached + masks     the same under MUI masking edits (``MaskNeurons``: ``--neurons``
                     random neurons in every layer, every position; 001 sec. 3.8)
  cached + attention the same under a per-step AttentionSpan-like edit of each new
                     query row (+0.5 post-softmax on the first token, 2 heads in 2 layers)
  uncached + masks   ``use_cache=False``: the whole sequence re-run for every token,
                     as ``generate_greedy_edited`` and MUI's edited responses did before

Before timing it asserts that the engine's unedited tokens equal HF ``generate``'s and
that cached and uncached masked tokens are equal: the fast path cannot be fast by being
wrong. Times: median seconds per batch over rounds, "x hf" its ratio to HF generate,
"paired" the median of per-round ratios, "cpu x" the ratio of median process CPU time
(steadier on a shared machine), "tok/s" new tokens per second.

    python benchmarks/edited_generation.py                         # smollm2-135m, 8 prompts, 64 new tokens
    python benchmarks/edited_generation.py --new 128 --rounds 5 --uncached-rounds 1
    python benchmarks/edited_generation.py --out benchmarks/results/edited_generation.json

Benchmarks print ratios measured in one run; they never assert wall-clock times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from whitebox_eval.internals import EditAttention, Engine, MaskNeurons
from whitebox_eval.internals.generation import generate
from whitebox_eval.models import load_model

QUESTIONS = ["What is 17 + 25?", "What is 143 - 58?", "Compute 12 * 13.", "What is 1000 divided by 8?",
             "If a train travels 60 km in 45 minutes, what is its speed in km/h?", "What is 2 to the power of 10?",
             "Tom has 23 apples and gives away 9. How many are left?", "What is the sum of the first ten odd numbers?"]


def _prompts(tok, n):
    out = []
    for q in (QUESTIONS * (n // len(QUESTIONS) + 1))[:n]:
        msgs = [{"role": "user", "content": q + " Think step by step."}]
        if getattr(tok, "chat_template", None):
            out.append(list(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False)))
        else:
            out.append(tok(q)["input_ids"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--new", type=int, default=64, help="new tokens per prompt")
    ap.add_argument("--neurons", type=int, default=16, help="masked neurons per layer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--uncached-rounds", type=int, default=1, help="rounds that also time the uncached path (slow)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="write every time to this JSON file")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = load_model(args.model)
    engine = Engine(lm)
    prompts = _prompts(lm.tokenizer, args.batch)
    arch = lm.arch
    g = torch.Generator().manual_seed(0)
    masks = [MaskNeurons(l, torch.randperm(arch.d_ff, generator=g)[: args.neurons].tolist()) for l in range(arch.n_layers)]
    starts = [len(p) for p in prompts]

    def newest_rows(lengths):
        s = max(lengths)
        cells = torch.zeros(len(lengths), s, s, dtype=torch.bool)
        for i, n in enumerate(lengths):
            cells[i, starts[i] - 1:n, 0] = True
        return [EditAttention(l, [0, 1], cells, mode="add", value=0.5) for l in (2, arch.n_layers // 2)]

    batch = engine.batch(prompts)
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0

    def hf():
        with torch.no_grad():
            out = lm.model.generate(input_ids=batch.input_ids, attention_mask=batch.attention_mask, do_sample=False,
                                    max_new_tokens=args.new, pad_token_id=pad, eos_token_id=None,
                                    temperature=None, top_p=None, top_k=None)
        return out[:, batch.seq_len:].tolist()

    def ours(edits=(), cache=True):
        return lambda: [x.ids for x in generate(engine, prompts, max_new_tokens=args.new, edits=edits, stop_ids=[], use_cache=cache)]

    methods = {"hf generate": hf, "engine cached": ours(), "cached + masks": ours(masks),
               "cached + attention": ours(newest_rows), "uncached + masks": ours(masks, cache=False)}
    # correctness first (also the warm-up round)
    tokens = {name: fn() for name, fn in methods.items()}
    assert tokens["engine cached"] == tokens["hf generate"], "unedited engine tokens differ from HF generate"
    assert tokens["cached + masks"] == tokens["uncached + masks"], "cached and uncached masked tokens differ"
    changed = sum(a != b for x, y in zip(tokens["cached + masks"], tokens["engine cached"]) for a, b in zip(x, y))

    wall: dict[str, list[float]] = {m: [] for m in methods}
    cpu: dict[str, list[float]] = {m: [] for m in methods}
    names = list(methods)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            if name == "uncached + masks" and r >= args.uncached_rounds:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            methods[name]()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    load = os.getloadavg()
    base, base_cpu = statistics.median(wall["hf generate"]), statistics.median(cpu["hf generate"])
    n_tok = args.batch * args.new
    print(f"{args.model}: batch {args.batch}, prompts {min(starts)}-{max(starts)} tokens, {args.new} new tokens, "
          f"{arch.n_layers} layers x {args.neurons} masked neurons; torch threads {torch.get_num_threads()}, "
          f"load average {load[0]:.1f} on {os.cpu_count()} CPUs" + ("  (LOADED: medians move, trust paired / cpu x)" if load[0] > (os.cpu_count() or 1) else ""))
    print(f"{'method':<20}{'s/batch':>10}{'x hf':>8}{'paired':>8}{'cpu x':>8}{'tok/s':>9}{'rounds':>8}")
    rows = {}
    for name in names:
        if not wall[name]:  # --uncached-rounds 0
            continue
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        k = min(len(wall[name]), len(wall["hf generate"]))
        paired = statistics.median([a / b for a, b in zip(wall[name][:k], wall["hf generate"][:k])])
        rows[name] = {"s_per_batch": w, "x_hf": w / base, "paired": paired, "cpu_x": c / base_cpu,
                      "tok_per_s": n_tok / w, "wall": wall[name], "cpu": cpu[name]}
        print(f"{name:<20}{w:>10.2f}{w / base:>8.2f}{paired:>8.2f}{c / base_cpu:>8.2f}{n_tok / w:>9.1f}{len(wall[name]):>8}")
    print(f"the masks changed {changed} of {n_tok} generated tokens")
    if "uncached + masks" in rows:
        u, cm = rows["uncached + masks"], rows["cached + masks"]
        print(f"cached vs uncached (masks): {u['s_per_batch'] / cm['s_per_batch']:.1f}x faster (cpu {statistics.median(u['cpu']) / statistics.median(cm['cpu']):.1f}x)")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "load_average": load, "cpus": os.cpu_count(),
                                              "torch_threads": torch.get_num_threads(), "tokens_changed_by_masks": changed, "methods": rows}, indent=2))


if __name__ == "__main__":
    main()
