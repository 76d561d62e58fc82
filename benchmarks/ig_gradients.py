"""Integrated gradients before/after: weight gradients no longer computed.

Both integrated-gradients paths called ``.backward()`` while every parameter required
a gradient, so each of the m steps also computed (and accumulated) the gradient of
every weight, the 28M-entry embedding included. Now the parameters are frozen for the
call and ``torch.autograd.grad`` goes to the attributed activations only (which also
leaves the layers below them without a graph). This script times

  mui ig (per layer)   ``token_scores(..., KeyNeuronConfig(score="ig"))`` (001 eq. 14,
                       one layer at a time: m x n_layers passes), ``mui --score ig``
  mui ig (joint)       the same with ``ig_joint_layers`` (m passes)
  eap-ig               ``integrated_gradients`` (002 sec. 4; head_out + mlp_act, KL metric)

each against a copy of the previous implementation ("before", kept below), on the same
inputs, and checks the scores agree (max |difference| relative to the largest score).
Columns: seconds (median over rounds), CPU seconds, and the before/after ratios.

    python benchmarks/ig_gradients.py                    # smollm2-135m, 2 samples, m = 2 per layer, 5 joint / EAP-IG
    python benchmarks/ig_gradients.py --steps 10 --rounds 3

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

from whitebox_eval.internals import Capture, Engine, Patch, integrated_gradients, kl_divergence_metric
from whitebox_eval.models import load_model
from whitebox_eval.mui import keyneurons as kn
from whitebox_eval.mui.neuron_scores import integrated_gradient_scores, riemann_alphas

PROMPTS = [("What is 17 + 25?", " 17 + 25 = 42. The answer is 42."),
           ("What is 143 - 58?", " 143 - 58 = 85. The answer is 85."),
           ("Compute 12 * 13.", " 12 * 13 = 156. The answer is 156."),
           ("What is 2 to the power of 10?", " 2^10 = 1024. The answer is 1024.")]


def _before_mui(engine, seqs, cfg):
    """mui/keyneurons._integrated_gradients before this change (backward through trainable weights)."""
    lay = kn._layout(engine, seqs)
    arch = engine.arch
    with torch.no_grad():
        clean = engine.run(lay.batch, [Capture("mlp_act", lay.positions, name="act")], logits=False)["act"]
    targets, valid = lay.targets.to(clean.device), lay.valid.to(clean.device)
    groups = [list(range(arch.n_layers))] if cfg.ig_joint_layers else [[l] for l in range(arch.n_layers)]
    grads = torch.zeros(cfg.ig_steps, *clean.shape, dtype=torch.float32)
    for group in groups:
        for k, alpha in enumerate(riemann_alphas(cfg.ig_steps).tolist()):
            edits = [Patch("mlp_act", l, lay.positions, (alpha * clean[:, l]).detach()) for l in group]
            trace = engine.run(lay.batch, [Capture("mlp_act", lay.positions, group, name="g", keep_grad=True)],
                               edits, logits=lay.positions, grad=True)
            logp = torch.log_softmax(trace.logits.float(), dim=-1)
            logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)[valid].sum().backward()
            g = trace.grad("g").float().cpu()
            for gi, l in enumerate(group):
                grads[k, :, l] = g[:, gi]
            engine.model.zero_grad(set_to_none=True)
    a = clean.float().cpu().permute(0, 2, 1, 3)[valid.cpu()]
    g = grads.permute(0, 1, 3, 2, 4)[:, valid.cpu()]
    n, L, F = a.shape
    return integrated_gradient_scores(a.reshape(n, L * F), g.reshape(cfg.ig_steps, n, L * F)).reshape(n, L, F)


def _before_eap(engine, batch, metric, points, steps):
    """internals.attribution.integrated_gradients before this change (zero baseline)."""
    layers = list(range(engine.arch.n_layers))
    caps = [Capture(p, "all", layers) for p in points]
    with torch.no_grad():
        e_clean = engine.arch.embed(batch.input_ids)
        e_base = torch.zeros_like(e_clean)
        clean = engine.run(batch, caps, inputs_embeds=e_clean)
        base = engine.run(batch, caps, inputs_embeds=e_base)
    grads = {p: torch.zeros_like(clean[p]) for p in points}
    for k in range(1, steps + 1):
        e = (e_base + (k - 0.5) / steps * (e_clean - e_base)).detach().requires_grad_(True)
        trace = engine.run(batch, [Capture(p, "all", layers, keep_grad=True) for p in points], grad=True, inputs_embeds=e)
        metric(trace.logits).sum().backward()
        for p in points:
            grads[p] += trace.grad(p)
    engine.model.zero_grad(set_to_none=True)  # the old code left these gradients on the weights
    out = {}
    for p in points:
        c = (clean[p] - base[p]) * grads[p] / steps
        out[p] = (c.sum(-1) if p != "mlp_act" else c).sum(2)
    return out


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def _rel(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2, help="m for MUI IG one layer at a time")
    ap.add_argument("--joint-steps", type=int, default=5, help="m for MUI IG joint layers and EAP-IG")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    lm = load_model(args.model)
    engine = Engine(lm)
    tok = lm.tokenizer
    pairs = PROMPTS[: args.samples]
    seqs = [kn.ScoredSequence(tok(q)["input_ids"], tok(r, add_special_tokens=False)["input_ids"]) for q, r in pairs]
    batch = engine.batch([q + r for q, r in pairs])
    with torch.no_grad():
        clean_logits = engine.run(batch).logits
    metric = kl_divergence_metric(clean_logits)
    points = ("head_out", "mlp_act")
    cases = {
        "mui ig (per layer)": (lambda: _before_mui(engine, seqs, kn.KeyNeuronConfig(score="ig", ig_steps=args.steps)),
                               lambda: torch.cat(kn.token_scores(engine, seqs, kn.KeyNeuronConfig(score="ig", ig_steps=args.steps)))),
        "mui ig (joint)": (lambda: _before_mui(engine, seqs, kn.KeyNeuronConfig(score="ig", ig_steps=args.joint_steps, ig_joint_layers=True)),
                           lambda: torch.cat(kn.token_scores(engine, seqs, kn.KeyNeuronConfig(score="ig", ig_steps=args.joint_steps, ig_joint_layers=True)))),
        "eap-ig": (lambda: _before_eap(engine, batch, metric, points, args.joint_steps),
                   lambda: integrated_gradients(engine, batch, metric, points=points, steps=args.joint_steps).scores),
    }
    load0 = os.getloadavg()
    results = {}
    print(f"{args.model}: {len(seqs)} samples ({min(len(s.ids) for s in seqs)}-{max(len(s.ids) for s in seqs)} tokens), "
          f"{lm.arch.n_layers} layers; load average {load0[0]:.1f} on {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}")
    print(f"{'case':<20}{'before s':>10}{'after s':>10}{'x':>7}{'before cpu':>12}{'after cpu':>11}{'cpu x':>7}{'max rel diff':>14}")
    for name, (before, after) in cases.items():
        tb, ta, cb, ca = [], [], [], []
        for r in range(args.rounds):
            old, w0, c0 = _timed(before)
            new, w1, c1 = _timed(after)
            tb.append(w0), ta.append(w1), cb.append(c0), ca.append(c1)
        diff = max(_rel(new[p], old[p]) for p in old) if isinstance(old, dict) else _rel(new, old)
        assert diff < 1e-4, f"{name}: scores differ ({diff:.2e})"
        assert all(p.grad is None for p in lm.model.parameters())
        row = {"before_s": statistics.median(tb), "after_s": statistics.median(ta), "before_cpu": statistics.median(cb),
               "after_cpu": statistics.median(ca), "max_rel_diff": diff, "rounds": args.rounds}
        results[name] = row
        print(f"{name:<20}{row['before_s']:>10.1f}{row['after_s']:>10.1f}{row['before_s'] / row['after_s']:>7.2f}"
              f"{row['before_cpu']:>12.1f}{row['after_cpu']:>11.1f}{row['before_cpu'] / row['after_cpu']:>7.2f}{diff:>14.1e}")
    load1 = os.getloadavg()
    print(f"load average at the end {load1[0]:.1f}" + ("  (LOADED: wall times move; cpu x is steadier)" if max(load0[0], load1[0]) > (os.cpu_count() or 1) else ""))
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "load_average": [load0, load1], "cpus": os.cpu_count(),
                                              "results": results}, indent=2))


if __name__ == "__main__":
    main()
