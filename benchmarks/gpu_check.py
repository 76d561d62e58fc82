"""The engine at 7-9B sizes on one GPU: models built from their configs with random weights.

Nothing is downloaded: the three configs below are written out from each model's
``config.json`` on the Hugging Face hub (the values that set the shapes and the maths).
Each model is built in bf16 directly on the GPU once, measured at every batch size
(``--batches``), and freed before the next.

Per model and batch size it prints:

- ``logits``: the engine's last-position logits against the model's own forward
  (``logits_to_keep=1``, the same slice and product: the engine claims bit-identical); a
  mismatch is recorded (``logits_ok`` false) and the check goes on to the next measurement and
  model; the exit status is 1 when any model mismatched;
- ``overhead``: the one-pass white-box study pass (every head's QK-score at the option
  tokens, every head's attention row at the last token, the logit lens after every
  layer: ``mcqa.scoring.score_prompts`` with all scorers) against a plain forward, median
  ms per batch at 0-shot and 5-shot MMLU lengths. The three passes run interleaved, round by
  round in a rotating order: plain (``logits_to_keep=1``, HF's cache on as by default),
  plain without the cache (``use_cache=False``: what the white-box pass also skips) and
  white-box; ``overhead`` is white-box over plain, ``overhead_nocache`` over plain without it;
- per pass and phase (``--phases``, on by default): host time before the forward, during it
  (until ``forward`` returns: dispatching) and after it (read-out, waiting on the device), the
  device time of the forward (CUDA events), and, from one more call counted apart, dispatched
  ops, kernel launches (CUDA's profiler) and host syncs per phase: where the rest goes;
- ``peak GiB``: peak GPU memory allocated during the white-box pass (weights included); the
  peak is reset, and the previous model's memory freed, before each model is built
  (``start_GiB``: what was still allocated then, 0 when nothing of the last model was left);
- ``white-box tok/s`` (0-shot and 5-shot): prompt tokens per second of that white-box pass, every
  token computed (no shared prefix); ``reproduce --plan-only`` turns the 0-shot one at batch 8
  (``0-shot_whitebox_tokens_per_s`` in ``gpu_check.json``) into FLOP/s;
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

    python benchmarks/gpu_check.py                       # the three models, batch 8, one GPU
    python benchmarks/gpu_check.py --models llama-3-8b --repeats 10
    python benchmarks/gpu_check.py --tiny                # the same code on tiny configs, CPU, a few seconds
    python benchmarks/gpu_check.py --out benchmarks/results/gpu_check.md

    # the engine-overhead GPU call (<= 7 minutes): batch 8 and 32, 0- and 5-shot, the three shapes
    python benchmarks/gpu_check.py --batches 8,32 --budget 420 --assets benchmarks/gpu_smoke_assets --out $OUT/gpu_check.md
    # then --batch-size auto's probe on the same shapes: benchmarks/batch_probe_check.py (its docstring)

The table goes to stdout (and ``--out`` as markdown plus a .json beside it; with several batch
sizes the first batch's rows go to ``--out`` and each other's to ``<out>_batch<N>.md/.json``, so
``gpu_check.json`` keeps the batch-8 rows ``reproduce/costs.py`` reads). ``--budget`` skips the
(model, batch) measurements that would not fit, recording them as skipped; ``--assets`` installs
``gpu_smoke.py``'s carried wheels where the image's transformers is not the pinned one.
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


def build(name: str, *, tiny: bool, device: str, dtype: torch.dtype, layers: int | None = None):
    """A LoadedModel of ``name``'s config with random weights, built on ``device`` in ``dtype``
    (``layers``: that many blocks instead of the config's)."""
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
    if layers is not None:
        values["num_hidden_layers"] = layers
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


class Phases:
    """Host time before, during and after the model's forward within one call, and the device time of
    the forward (CUDA events), from hooks on the base model (the first entry, the last exit)."""

    def __init__(self, model, cuda: bool):
        self.cuda, self.base = cuda, getattr(model, "base_model", model)
        self.t_in = self.t_out = None
        if cuda:
            self.e_in, self.e_out = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def _enter(self, *_):
        if self.t_in is None:
            self.t_in = time.perf_counter()
            if self.cuda:
                self.e_in.record()

    def _leave(self, *_):
        self.t_out = time.perf_counter()
        if self.cuda:
            self.e_out.record()

    def call(self, fn, sync) -> dict:
        self.t_in = self.t_out = None
        handles = [self.base.register_forward_pre_hook(self._enter), self.base.register_forward_hook(self._leave)]
        try:
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            t1 = time.perf_counter()
        finally:
            for h in handles:
                h.remove()
        out = {"total": t1 - t0, "before": self.t_in - t0, "forward": self.t_out - self.t_in, "after": t1 - self.t_out}
        if self.cuda:
            out["gpu_forward"] = self.e_in.elapsed_time(self.e_out) / 1e3
        return out


def interleaved(methods: dict, repeats: int, sync, phases: Phases) -> dict[str, dict[str, float]]:
    """Median seconds per phase of each method, the methods run once per round in a rotating order
    (one warm-up round first): none always runs first."""
    names = list(methods)
    for n in names:
        methods[n]()
    got: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(repeats):
        for n in names[r % len(names):] + names[:r % len(names)]:
            got[n].append(phases.call(methods[n], sync))
    return {n: {k: statistics.median(x[k] for x in runs) for k in runs[0]} for n, runs in got.items()}


def counted(fn, model, cuda: bool) -> dict:
    """Dispatched ops, host syncs and (CUDA) kernel launches of one call of ``fn``, per phase."""
    from dispatch_counts import PhaseCounter

    with PhaseCounter(model) as c:
        fn()
    out = {f"{k}_{phase}": v for phase, counts in c.phases.items() for k, v in counts.items()}
    if cuda:
        from torch.profiler import ProfilerActivity, profile, record_function

        base, state = getattr(model, "base_model", model), {}

        def enter(*_):
            if "range" not in state:
                state["range"] = record_function("gpu_check:forward")
                state["range"].__enter__()

        def leave(*_):
            state["last"] = time.perf_counter()

        handles = [base.register_forward_pre_hook(enter), base.register_forward_hook(leave)]
        try:
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                fn()
                if "range" in state:
                    state["range"].__exit__(None, None, None)
            torch.cuda.synchronize()
        finally:
            for h in handles:
                h.remove()
        events = prof.events()
        fwd = next((e for e in events if e.name == "gpu_check:forward"), None)
        launches = {"before": 0, "forward": 0, "after": 0}
        syncs = {"before": 0, "forward": 0, "after": 0}
        for e in events:
            name = e.name
            is_launch = "LaunchKernel" in name or name in ("cudaMemcpyAsync", "cudaMemsetAsync")
            is_sync = name in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")
            if not (is_launch or is_sync) or fwd is None:
                continue
            t = e.time_range.start
            phase = "before" if t < fwd.time_range.start else "after" if t > fwd.time_range.end else "forward"
            (launches if is_launch else syncs)[phase] += 1
        out.update({f"launches_{k}": v for k, v in launches.items()})
        out.update({f"cuda_syncs_{k}": v for k, v in syncs.items()})
    return out


def check(name: str, args, device: str, dtype: torch.dtype, batches: list[int] | None = None,
          deadline: float | None = None) -> list[dict]:
    """One row per batch size of ``batches`` (default ``[args.batch]``), the model built once."""
    from whitebox_eval.internals import Engine, batch_from_ids
    from whitebox_eval.internals.prefixes import PrefixCache
    from whitebox_eval.mcqa.scoring import SCORERS, score_prompts

    batches = batches or [args.batch]
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
    head: dict = {"model": name + (" (tiny)" if args.tiny else ""), "gpu": torch.cuda.get_device_name() if cuda else None,
                  "params_M": round(sum(p.numel() for p in lm.model.parameters()) / 1e6, 1),
                  "build_s": round(time.perf_counter() - t0, 1)}
    if cuda:
        head["start_GiB"] = round(start / 2**30, 2)
    vocab = lm.model.config.vocab_size
    phases = Phases(lm.model, cuda)
    rows = []
    with torch.no_grad():
        # 1. last-position logits: the engine against the model's own forward
        toks = prompts(batches[0], args.five_shot_tokens, 0, vocab, seed=1)
        ids = [t.input_ids[: args.five_shot_tokens - 7 * (k % 8)] for k, t in enumerate(toks)]  # left padding
        batch = batch_from_ids(ids, pad_id=0).to(device)
        own = lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids,
                       logits_to_keep=1).logits[:, -1].float()
        ours = engine.run(batch).logits.float()
        head["logits_max_abs_diff"] = float((ours - own).abs().max())
        head["logits_argmax_equal"] = bool((ours.argmax(-1) == own.argmax(-1)).all())
        head["logits_ok"] = head["logits_argmax_equal"] and head["logits_max_abs_diff"] <= 1e-3 * float(own.abs().max())
        if not head["logits_ok"]:  # recorded; the other measurements and models still run
            print(f"{name}: MISMATCH: the engine's logits are not the model's own", file=sys.stderr, flush=True)
        for size in batches:
            row = {**head, "batch": size}
            if deadline is not None and time.perf_counter() > deadline:
                row["skipped"] = "the --budget ran out"
                rows.append(row)
                continue
            # 2. the one-pass white-box scores against a plain forward, 0-shot and 5-shot lengths
            for label, length in (("0-shot", args.zero_shot_tokens), ("5-shot", args.five_shot_tokens)):
                toks = prompts(size, length, 0, vocab, seed=2)
                batch = batch_from_ids([t.input_ids for t in toks], pad_id=0).to(device)
                kw = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                          position_ids=batch.position_ids, logits_to_keep=1)
                methods = {"plain": lambda kw=kw: lm.model(**kw),
                           "plain_nocache": lambda kw=kw: lm.model(**kw, use_cache=False),
                           "whitebox": lambda toks=toks: score_prompts(engine, toks, 4, SCORERS)}
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                med = interleaved(methods, args.repeats, sync, phases)
                plain, nocache, white = (med[m]["total"] for m in ("plain", "plain_nocache", "whitebox"))
                row[f"{label}_tokens"] = length
                row[f"{label}_plain_ms"] = round(plain * 1e3, 2)
                row[f"{label}_plain_nocache_ms"] = round(nocache * 1e3, 2)
                row[f"{label}_whitebox_ms"] = round(white * 1e3, 2)
                row[f"{label}_overhead"] = round(white / plain, 3)
                row[f"{label}_overhead_nocache"] = round(white / nocache, 3)
                row[f"{label}_whitebox_tokens_per_s"] = round(size * length / white, 1)  # every token computed
                if cuda:
                    row[f"{label}_peak_GiB"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
                if args.phases:
                    for m, r in med.items():
                        for k, v in r.items():
                            if k != "total":
                                row[f"{label}_{m}_{k}_ms"] = round(v * 1e3, 3)
                        for k, v in counted(methods[m], lm.model, cuda).items():
                            row[f"{label}_{m}_{k}"] = v
            # 3. a 5-shot study: prompts sharing their demonstrations, every scorer, the prefix cached once
            shared = args.five_shot_tokens - args.zero_shot_tokens
            toks = prompts(args.study_items, args.five_shot_tokens, shared, vocab, seed=3)
            cache = PrefixCache(engine)

            def study():
                for i in range(0, len(toks), size):
                    chunk = toks[i:i + size]
                    prefix = cache.for_batch([t.input_ids for t in chunk], limit=shared)
                    score_prompts(engine, chunk, 4, SCORERS, prefix=prefix)

            study()  # warm-up; the prefix is then cached, as in every batch of a study after the first
            sync()
            t1 = time.perf_counter()
            study()
            sync()
            row["study_items"] = len(toks)
            row["study_tokens_per_s"] = round(len(toks) * args.five_shot_tokens / (time.perf_counter() - t1), 1)
            if cuda:
                row["peak_GiB"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
            rows.append(row)
    return rows  # the model is freed (and the peak reset) when the next check starts


COLUMNS = ["model", "batch", "params_M", "logits_ok", "logits_max_abs_diff",
           "0-shot_plain_ms", "0-shot_plain_nocache_ms", "0-shot_whitebox_ms", "0-shot_overhead", "0-shot_overhead_nocache",
           "0-shot_whitebox_tokens_per_s",
           "5-shot_plain_ms", "5-shot_plain_nocache_ms", "5-shot_whitebox_ms", "5-shot_overhead", "5-shot_overhead_nocache",
           "5-shot_whitebox_tokens_per_s", "start_GiB", "peak_GiB", "study_tokens_per_s", "skipped"]
PHASE_COLUMNS = ["before_ms", "forward_ms", "after_ms", "gpu_forward_ms", "ops_before", "ops_forward", "ops_after",
                 "launches_before", "launches_forward", "launches_after", "syncs_before", "syncs_forward", "syncs_after",
                 "cuda_syncs_before", "cuda_syncs_forward", "cuda_syncs_after"]


def table(rows: list[dict]) -> str:
    cols = [c for c in COLUMNS if any(c in r for r in rows)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def phase_table(rows: list[dict]) -> str:
    """Where each pass spends its time: one line per (model, batch, shots, pass)."""
    out = []
    for r in rows:
        for label in ("0-shot", "5-shot"):
            for m in ("plain", "plain_nocache", "whitebox"):
                cells = [r.get(f"{label}_{m}_{c}") for c in PHASE_COLUMNS]
                if any(c is not None for c in cells):
                    out.append(f"| {r['model']} | {r.get('batch', '')} | {label} | {m} | "
                               + " | ".join("" if c is None else str(c) for c in cells) + " |")
    if not out:
        return ""
    head = "| model | batch | shots | pass | " + " | ".join(PHASE_COLUMNS) + " |"
    return "\n".join([head, "|" + "---|" * (4 + len(PHASE_COLUMNS)), *out])


ESTIMATE_S = {"llama-3-8b": 50, "qwen2.5-7b": 45, "gemma-2-9b": 70}
"""Seconds one model takes at batch 8 and 32 on the H200 (build, the three passes at two lengths,
the counted calls, the study); a model that would pass --budget is skipped."""


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(CONFIGS), help="comma list of " + ", ".join(CONFIGS))
    ap.add_argument("--tiny", action="store_true", help="tiny configs of the same families, float32 on the CPU")
    ap.add_argument("--batch", type=int, default=8, help="prompts per pass (default 8)")
    ap.add_argument("--batches", default=None, help="comma list of batch sizes, each model built once (default: --batch)")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds per measurement, after one warm-up (default 5)")
    ap.add_argument("--zero-shot-tokens", type=int, default=72)
    ap.add_argument("--five-shot-tokens", type=int, default=410)
    ap.add_argument("--study-items", type=int, default=64)
    ap.add_argument("--no-phases", dest="phases", action="store_false", help="skip the per-phase times and counts")
    ap.add_argument("--budget", type=float, default=None, help="seconds; models that would not fit are skipped")
    ap.add_argument("--assets", type=Path, default=None, help="gpu_smoke.py's assets (pinned wheels), used where needed")
    ap.add_argument("--out", type=Path, default=None, help="markdown table here (and the rows as .json beside it)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    if args.assets is not None and not args.tiny:
        import gpu_smoke

        gpu_smoke.use_pinned_wheels(args.assets)
    batches = [int(b) for b in args.batches.split(",")] if args.batches else [args.batch]
    if args.tiny:
        device, dtype = "cpu", torch.float32
        args.repeats, args.zero_shot_tokens, args.five_shot_tokens, args.study_items = 1, 24, 64, 4
        batches = [2 if b == 8 else max(1, b // 8) + 2 for b in batches] if args.batches else [2]
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no GPU here: run with --tiny for the CPU check, or on a machine with one GPU")
        device, dtype = "cuda", torch.bfloat16
    rows = []
    deadline = None if args.budget is None else started + args.budget
    for name in args.models.split(","):
        if name not in CONFIGS:
            raise SystemExit(f"unknown model {name!r}; choose from {', '.join(CONFIGS)}")
        if deadline is not None and not args.tiny and time.perf_counter() + ESTIMATE_S[name] > deadline:
            rows += [{"model": name, "batch": b, "logits_ok": True, "skipped": f"would pass the {args.budget:.0f} s budget"}
                     for b in batches]
        else:
            rows += check(name, args, device, dtype, batches, deadline)
        for r in rows[-len(batches):]:
            print(json.dumps(r), flush=True)
    where = "CPU, float32, tiny configs" if args.tiny else f"{torch.cuda.get_device_name(0)}, bf16"
    for i, b in enumerate(batches):
        mine = [r for r in rows if r.get("batch") == b]
        text = (f"{where}; batch {b}, median of {args.repeats} interleaved rounds after a warm-up; "
                f"{time.perf_counter() - started:.0f} s in all\n\n{table(mine)}")
        phases = phase_table(mine)
        if phases:
            text += "\n\nPer pass and phase (ms: median host time; ops, launches, syncs: one counted call):\n\n" + phases
        print(text)
        if args.out:
            out = args.out if i == 0 else args.out.with_name(f"{args.out.stem}_batch{b}{args.out.suffix}")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(f"# benchmarks/gpu_check.py\n\n{text}\n", encoding="utf-8")
            out.with_suffix(".json").write_text(json.dumps(mine, indent=1) + "\n", encoding="utf-8")
        if i == 0 and not args.tiny and any(r.get("0-shot_whitebox_tokens_per_s") for r in mine):
            # the measured batch-8 rate reproduce/costs.py reads (package data)
            PACKAGE_DATA.write_text(json.dumps(mine, indent=1) + "\n", encoding="utf-8")
    return rows


if __name__ == "__main__":
    sys.exit(0 if all(r["logits_ok"] for r in main()) else 1)
