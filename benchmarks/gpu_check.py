"""The engine at 7-9B sizes on one GPU: models built from their configs with random weights.

Nothing is downloaded: the three configs below are written out from each model's
``config.json`` on the Hugging Face hub (the values that set the shapes and the maths).
Each model is built in bf16 directly on the GPU, measured, and freed before the next.

Per model it prints:

- ``logits``: the engine's last-position logits against the model's own forward
  (``logits_to_keep=1``, the same slice and product: the engine claims bit-identical); a
  mismatch is recorded (``logits_ok`` false) and the check goes on to the next measurement and
  model; the exit status is 1 when any model mismatched;
- ``overhead``: the one-pass white-box study pass (every head's QK-score at the option
  tokens, every head's attention row at the last token, the logit lens after every
  layer: ``mcqa.scoring.score_prompts`` with all scorers) against a plain forward, median
  ms per batch at 0-shot and 5-shot MMLU lengths;
- ``peak GiB``: peak GPU memory allocated during the white-box pass (weights included); the
  peak is reset, and the previous model's memory freed, before each model is built
  (``start_GiB``: what was still allocated then, 0 when nothing of the last model was left);
- ``white-box tok/s`` (0-shot and 5-shot): prompt tokens per second of that white-box pass, every
  token computed (no shared prefix); ``reproduce --plan-only`` turns the 0-shot one into FLOP/s;
- ``study tok/s``: prompt tokens per second of a 5-shot MMLU-length study (prompts that
  share their 5 demonstrations, every scorer, the demonstrations computed once through the
  prefix cache as ``mcqa`` does).

On a GPU (not ``--tiny``) the rows are also written to the package data
``src/whitebox_eval/reproduce/gpu_check.json``, the measured rate ``reproduce --plan-only`` reads.

MMLU lengths: lm-eval's MMLU prompts of the shared samples (``../shared/datasets/mmlu``,
532 items) are 72 tokens at 0-shot and 410 at 5-shot on average with SmolLM2's tokenizer
(Llama-3's is within ~10% on English text); ``--zero-shot-tokens`` / ``--five-shot-tokens``
change them. Prompts are random token ids (no tokenizer); option tokens are four positions
near the end, as in an MMLU prompt.

    python benchmarks/gpu_check.py                       # the three models, one GPU (fits one 10-minute call)
    python benchmarks/gpu_check.py --models llama-3-8b --repeats 10
    python benchmarks/gpu_check.py --tiny                # the same code on tiny configs, CPU, a few seconds
    python benchmarks/gpu_check.py --out benchmarks/results/gpu_check.md

The table goes to stdout (and ``--out`` as markdown plus a .json beside it).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DATA = REPO / "src" / "whitebox_eval" / "reproduce" / "gpu_check.json"
sys.path.insert(0, str(REPO / "src"))

# config.json of each model on the hub, the values that set its shapes and maths
CONFIGS = {
    # meta-llama/Meta-Llama-3-8B, config.json
    "llama-3-8b": dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0,
                       rms_norm_eps=1e-5, max_position_embeddings=8192, hidden_act="silu", tie_word_embeddings=False,
                       bos_token_id=128000, eos_token_id=128001),
    # Qwen/Qwen2.5-7B, config.json
    "qwen2.5-7b": dict(model_type="qwen2", hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                       num_attention_heads=28, num_key_value_heads=4, vocab_size=152064, rope_theta=1000000.0,
                       rms_norm_eps=1e-6, max_position_embeddings=131072, hidden_act="silu", tie_word_embeddings=False,
                       use_sliding_window=False, sliding_window=131072, max_window_layers=28,
                       bos_token_id=151643, eos_token_id=151643),
    # google/gemma-2-9b, config.json
    "gemma-2-9b": dict(model_type="gemma2", hidden_size=3584, intermediate_size=14336, num_hidden_layers=42,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=256000,
                       query_pre_attn_scalar=256, sliding_window=4096, attn_logit_softcapping=50.0,
                       final_logit_softcapping=30.0, rms_norm_eps=1e-6, rope_theta=10000.0,
                       max_position_embeddings=8192, hidden_activation="gelu_pytorch_tanh",
                       tie_word_embeddings=True, pad_token_id=0, bos_token_id=2, eos_token_id=1),
}
# the same families at a size a CPU runs in a blink (CI)
TINY = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "vocab_size": 512}
TINY_HEADS = {"llama-3-8b": (4, 2, 16), "qwen2.5-7b": (4, 2, 16), "gemma-2-9b": (4, 2, 32)}  # heads, kv heads, head_dim


class _NoTokenizer:
    """Prompts are token ids; the engine needs a pad id only."""

    pad_token_id = 0
    eos_token_id = None


def build(name: str, *, tiny: bool, device: str, dtype: torch.dtype):
    """A LoadedModel of ``name``'s config with random weights, built on ``device`` in ``dtype``."""
    import transformers as tf

    from whitebox_eval.models.architectures import Architecture
    from whitebox_eval.models.loading import LoadedModel

    values = dict(CONFIGS[name])
    model_type = values.pop("model_type")
    if tiny:
        heads, kv, head_dim = TINY_HEADS[name]
        values = {k: v for k, v in values.items() if not k.endswith("token_id")}  # ids beyond the tiny vocabulary
        values.update(TINY, num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
                      **({"query_pre_attn_scalar": head_dim} if model_type == "gemma2" else {}),
                      **({"sliding_window": 48} if model_type == "gemma2" else {}))  # the tiny window binds at 5-shot
    attn = "eager" if values.get("attn_logit_softcapping") else "sdpa"  # as models.load_model's "auto"
    cfg = tf.AutoConfig.for_model(model_type, **values, attn_implementation=attn)
    torch.manual_seed(0)
    with torch.device(device):
        model = tf.AutoModelForCausalLM.from_config(cfg, dtype=dtype).eval()
    return LoadedModel(model=model, tokenizer=_NoTokenizer(), arch=Architecture.of(model), spec=name, source="random")


def prompts(n: int, length: int, shared: int, vocab: int, seed: int):
    """``n`` TokenizedPrompts of ``length`` random tokens, the first ``shared`` of them common to all
    (the demonstrations), four option tokens and four answer ids."""
    from whitebox_eval.tasks.prompt_tokens import TokenizedPrompt

    g = torch.Generator().manual_seed(seed)
    demos = torch.randint(3, vocab, (shared,), generator=g).tolist()
    out = []
    for _ in range(n):
        ids = demos + torch.randint(3, vocab, (length - shared,), generator=g).tolist()
        opts = [length - 12 + 2 * k for k in range(4)]  # the option lines end near the prompt's end
        out.append(TokenizedPrompt(ids, opts, [5, 6, 7, 8], shared))
    return out


def _timed(fn, repeats: int, sync) -> float:
    """Median seconds of ``fn`` over ``repeats`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def check(name: str, args, device: str, dtype: torch.dtype) -> dict:
    from whitebox_eval.internals import Engine, batch_from_ids
    from whitebox_eval.internals.prefixes import PrefixCache
    from whitebox_eval.mcqa.scoring import SCORERS, score_prompts

    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:  # nothing of the previous model counts in this one's peak
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated() if cuda else 0
    t0 = time.perf_counter()
    lm = build(name, tiny=args.tiny, device=device, dtype=dtype)
    engine = Engine(lm)
    row: dict = {"model": name + (" (tiny)" if args.tiny else ""), "gpu": torch.cuda.get_device_name() if cuda else None,
                 "params_M": round(sum(p.numel() for p in lm.model.parameters()) / 1e6, 1),
                 "build_s": round(time.perf_counter() - t0, 1)}
    if cuda:
        row["start_GiB"] = round(start / 2**30, 2)
    vocab = lm.model.config.vocab_size
    with torch.no_grad():
        # 1. last-position logits: the engine against the model's own forward
        toks = prompts(args.batch, args.five_shot_tokens, 0, vocab, seed=1)
        ids = [t.input_ids[: args.five_shot_tokens - 7 * k] for k, t in enumerate(toks)]  # left padding
        batch = batch_from_ids(ids, pad_id=0).to(device)
        own = lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids,
                       logits_to_keep=1).logits[:, -1].float()
        ours = engine.run(batch).logits.float()
        row["logits_max_abs_diff"] = float((ours - own).abs().max())
        row["logits_argmax_equal"] = bool((ours.argmax(-1) == own.argmax(-1)).all())
        row["logits_ok"] = row["logits_argmax_equal"] and row["logits_max_abs_diff"] <= 1e-3 * float(own.abs().max())
        if not row["logits_ok"]:  # recorded; the other measurements and models still run
            print(f"{name}: MISMATCH: the engine's logits are not the model's own", file=sys.stderr, flush=True)
        # 2. the one-pass white-box scores against a plain forward, 0-shot and 5-shot lengths
        for label, length in (("0-shot", args.zero_shot_tokens), ("5-shot", args.five_shot_tokens)):
            toks = prompts(args.batch, length, 0, vocab, seed=2)
            batch = batch_from_ids([t.input_ids for t in toks], pad_id=0).to(device)
            plain = _timed(lambda: lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                            position_ids=batch.position_ids, logits_to_keep=1), args.repeats, sync)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            white = _timed(lambda: score_prompts(engine, toks, 4, SCORERS), args.repeats, sync)
            row[f"{label}_tokens"] = length
            row[f"{label}_plain_ms"] = round(plain * 1e3, 2)
            row[f"{label}_whitebox_ms"] = round(white * 1e3, 2)
            row[f"{label}_overhead"] = round(white / plain, 3)
            row[f"{label}_whitebox_tokens_per_s"] = round(args.batch * length / white, 1)  # every token computed
            if cuda:
                row[f"{label}_peak_GiB"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        # 3. a 5-shot study: prompts sharing their demonstrations, every scorer, the prefix cached once
        shared = args.five_shot_tokens - args.zero_shot_tokens
        toks = prompts(args.study_items, args.five_shot_tokens, shared, vocab, seed=3)
        cache = PrefixCache(engine)

        def study():
            for i in range(0, len(toks), args.batch):
                chunk = toks[i:i + args.batch]
                prefix = cache.for_batch([t.input_ids for t in chunk], limit=shared)
                score_prompts(engine, chunk, 4, SCORERS, prefix=prefix)

        study()  # warm-up; the prefix is then cached, as in every batch of a study after the first
        sync()
        t0 = time.perf_counter()
        study()
        sync()
        row["study_items"] = len(toks)
        row["study_tokens_per_s"] = round(len(toks) * args.five_shot_tokens / (time.perf_counter() - t0), 1)
        if cuda:
            row["peak_GiB"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return row  # the model is freed (and the peak reset) when the next check starts


COLUMNS = ["model", "params_M", "logits_ok", "logits_max_abs_diff",
           "0-shot_plain_ms", "0-shot_whitebox_ms", "0-shot_overhead", "0-shot_whitebox_tokens_per_s",
           "5-shot_plain_ms", "5-shot_whitebox_ms", "5-shot_overhead", "5-shot_whitebox_tokens_per_s",
           "start_GiB", "peak_GiB", "study_tokens_per_s"]


def table(rows: list[dict]) -> str:
    cols = [c for c in COLUMNS if any(c in r for r in rows)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(CONFIGS), help="comma list of " + ", ".join(CONFIGS))
    ap.add_argument("--tiny", action="store_true", help="tiny configs of the same families, float32 on the CPU")
    ap.add_argument("--batch", type=int, default=8, help="prompts per pass (default 8)")
    ap.add_argument("--repeats", type=int, default=5, help="timed calls per measurement, after one warm-up (default 5)")
    ap.add_argument("--zero-shot-tokens", type=int, default=72)
    ap.add_argument("--five-shot-tokens", type=int, default=410)
    ap.add_argument("--study-items", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None, help="markdown table here (and the rows as .json beside it)")
    args = ap.parse_args(argv)
    if args.tiny:
        device, dtype = "cpu", torch.float32
        args.batch, args.repeats, args.zero_shot_tokens, args.five_shot_tokens, args.study_items = 2, 1, 24, 64, 4
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no GPU here: run with --tiny for the CPU check, or on a machine with one GPU")
        device, dtype = "cuda", torch.bfloat16
    rows = []
    for name in args.models.split(","):
        if name not in CONFIGS:
            raise SystemExit(f"unknown model {name!r}; choose from {', '.join(CONFIGS)}")
        rows.append(check(name, args, device, dtype))
        print(json.dumps(rows[-1]), flush=True)
    where = "CPU, float32, tiny configs" if args.tiny else f"{torch.cuda.get_device_name(0)}, bf16"
    text = f"{where}; batch {args.batch}, median of {args.repeats} after a warm-up\n\n{table(rows)}"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(f"# benchmarks/gpu_check.py\n\n{text}\n", encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    if not args.tiny:  # the measured rate reproduce/gpu.py reads (package data)
        PACKAGE_DATA.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return rows


if __name__ == "__main__":
    sys.exit(0 if all(r["logits_ok"] for r in main()) else 1)
