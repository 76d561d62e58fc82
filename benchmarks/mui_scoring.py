"""Cost of MUI neuron scoring (paper 001 eq. 2) relative to a plain teacher-forced forward.

Over the same batches of prompt + response tokens it times

* ``plain``: the Hugging Face model's own forward (``model(input_ids, attention_mask,
  position_ids)``, logits at every position, as a teacher-forced loss pass computes them);
* ``plain-hidden``: the same without the unembedding (``model.model(...)``), a stricter baseline;
* ``scoring``: one engine pass capturing the down-projection input at the positions that
  predict response tokens, eq. 2 scores with only the response tokens' unembedding rows
  gathered, and the top-1-per-mille key sets (everything a MUI study does per batch
  besides generation);

and prints the ratios (minimum over repeats, interleaved, so a noisy shared machine hurts
both sides alike). Peak memory is measured in fresh subprocesses as the growth of the
peak resident set size over the loaded model during each workload, next to the size a
``d_ff x vocab`` matrix per layer would need. Nothing is asserted: the numbers are printed.

    nice .venv/bin/python benchmarks/mui_scoring.py --model smollm2-135m --limit 32
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time
from pathlib import Path

import torch

DEFAULT_GSM8K = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "gsm8k" / "test_sample.jsonl"


def _batches(lm, task: str, limit: int, batch_size: int):
    from whitebox_eval.mui import responses as rsp
    from whitebox_eval.mui.keyneurons import ScoredSequence
    from whitebox_eval.mui.study import MUIConfig, prepare_task

    prepared = prepare_task(MUIConfig(model=lm.spec, task=task, limit=limit, responses="gold"), lm.tokenizer)
    seqs = []
    for it in prepared.items:
        p = prepared.prompt(it, lm.tokenizer)  # exactly as the MUI study prompts it
        seqs.append(ScoredSequence(p, rsp.given_response(lm.tokenizer, it.gold_response).ids))
    return [seqs[i:i + batch_size] for i in range(0, len(seqs), batch_size)]


def _plain(lm, batches, hidden_only: bool) -> None:
    from whitebox_eval.internals import batch_from_ids

    fwd = lm.model.model if hidden_only else lm.model
    pad = lm.tokenizer.pad_token_id or 0
    with torch.no_grad():
        for seqs in batches:
            b = batch_from_ids([s.ids for s in seqs], pad_id=pad)
            fwd(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=b.position_ids, use_cache=False)


def _scoring(engine, batches) -> None:
    from whitebox_eval.mui.keyneurons import KeyNeuronConfig, sample_key_mask, token_scores

    cfg = KeyNeuronConfig()
    for seqs in batches:
        for s in token_scores(engine, seqs, cfg):
            sample_key_mask(s, cfg)


def _memory_child(model: str, task: str, limit: int, batch_size: int, which: str, threads: int, q) -> None:
    torch.set_num_threads(threads)
    from whitebox_eval.internals import Engine
    from whitebox_eval.models import load_model

    lm = load_model(model)
    engine = Engine(lm)
    batches = _batches(lm, task, limit, batch_size)
    _plain(lm, batches[:1], hidden_only=True)  # warm allocator, same for both
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if which == "plain":
        _plain(lm, batches, hidden_only=False)
    else:
        _scoring(engine, batches)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    q.put((after - before) / 1024.0)  # MiB (ru_maxrss is KiB on Linux)


def main() -> None:
    ap = argparse.ArgumentParser(description="MUI neuron-scoring cost vs a plain teacher-forced forward")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default=f"gsm8k={DEFAULT_GSM8K}" if DEFAULT_GSM8K.is_file() else "ssd",
                    help="task whose prompts + gold responses are scored (default: GSM8K sample, long responses)")
    ap.add_argument("--limit", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-memory", action="store_true", help="skip the subprocess memory measurement")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from whitebox_eval.internals import Engine
    from whitebox_eval.models import load_model

    lm = load_model(args.model)
    engine = Engine(lm)
    batches = _batches(lm, args.task, args.limit, args.batch_size)
    n_tokens = sum(len(s.ids) for b in batches for s in b)
    n_scored = sum(len(s.response_ids) for b in batches for s in b)
    _scoring(engine, batches[:1])
    _plain(lm, batches[:1], hidden_only=False)
    times: dict[str, list[float]] = {"plain": [], "plain-hidden": [], "scoring": []}
    for _ in range(args.repeats):
        for name, fn in (("plain", lambda: _plain(lm, batches, False)), ("plain-hidden", lambda: _plain(lm, batches, True)),
                         ("scoring", lambda: _scoring(engine, batches))):
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    best = {k: min(v) for k, v in times.items()}
    arch = lm.arch
    out = {
        "model": args.model, "task": args.task.split("=")[0], "sequences": sum(len(b) for b in batches),
        "tokens": n_tokens, "scored_positions": n_scored, "threads": args.threads,
        "seconds_min": {k: round(v, 3) for k, v in best.items()},
        "ratio_scoring_vs_plain_forward": round(best["scoring"] / best["plain"], 3),
        "ratio_scoring_vs_plain_hidden_only": round(best["scoring"] / best["plain-hidden"], 3),
        "d_ff_x_vocab_per_layer_MiB": round(arch.d_ff * arch.vocab_size * 4 / 2**20, 1),
    }
    if not args.no_memory:
        ctx = mp.get_context("spawn")
        for which in ("plain", "scoring"):
            q = ctx.Queue()
            p = ctx.Process(target=_memory_child, args=(args.model, args.task, args.limit, args.batch_size, which,
                                                        args.threads, q))
            p.start()
            out[f"peak_rss_growth_MiB,{which}"] = round(q.get(), 1)
            p.join()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
