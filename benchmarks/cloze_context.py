"""Each context computed once: the k-shot cloze settings against today's code and lm-eval itself.

Settings (the bundled SmolLM2-135M in float32 on the CPU, ``--prompt lm-eval``, the cloze,
demonstrations drawn per item by lm-eval's sampler, batch size 8 everywhere):

- ``hellaswag/10``: the first 40 items of the shared HellaSwag sample after its first 40 rows,
  which play the training split (as ``benchmarks/lm_eval_whole_files.py``);
- ``arc_challenge/25``: the first 25 ARC-Challenge items after the first 50 rows (the train split);
- ``winogrande/3``: ``--task lm-eval:winogrande`` 3-shot on the fixture rows
  (``tests/fixtures/lm_eval_tasks/data/winogrande``, 16 documents, one context per choice).

Arms, each a fresh process per setting, the model loaded before the clock starts:

- ``new``: this checkout's ``src``;
- ``before``: commit ``c700e6d``'s ``src`` (``git archive`` into a temporary folder; ``--before-src``:
  any checkout's ``src``), the same call;
- ``plain``: the limit the packed pass is measured against, outside the engine: the model loaded by
  plain ``transformers`` (``AutoModelForCausalLM``, its default attention), each distinct context of an
  item forwarded once with a key/value cache, the continuations that share it batched on the repeated
  cache, the unembedding applied only at the scored positions (:func:`plain_logprobs`). Its requests
  are the ``new`` arm's, tokenized as lm-eval's ``_encode_pair`` (the same contexts as lm-eval; the
  first round runs ``new`` first to log them); its clock holds the forwards alone. The ``new`` arm's
  row then adds ``packed`` (the packed pass alone: :func:`~whitebox_eval.mcqa.scoring.continuation_logprobs`
  and the shared prefixes it reads, with its phases: packing and index building on the host, the
  engine's forward, the log-softmax and sums), and ``packed / plain`` is the ratio the engine must
  keep near 1;
- ``lm-eval``: lm-eval 0.4.13's own HF backend, ``simple_evaluate`` (``log_samples`` on, to
  compare items) on the same documents, offline as ``benchmarks/lm_eval_fixtures.py`` runs it
  (``--lm-eval-python``: the Python that has lm-eval; default this one, the ``[lm-eval]`` extra).

Columns: ``computed``: input tokens of every forward call (pads, and each cached prefix's own
pass, included), counted by a hook on the token embedding; ``needed``: per document, the
distinct token prefixes of its requests' ``(context + continuation)[:-1]`` (nothing shared
across documents is counted: with per-item demonstrations they share nothing);
``wall s`` / ``cpu s``: the run, model loading excluded; ratios are measured in the same
invocation, one setting's arms back to back. acc / acc_norm per item: ours against lm-eval's
predictions from its own log-likelihoods.

    python benchmarks/cloze_context.py                       # every setting, every arm
    python benchmarks/cloze_context.py --only winogrande/3 --arms new,lm-eval
    python benchmarks/cloze_context.py --rounds 2            # each setting twice, arms interleaved
    python benchmarks/cloze_context.py --arms new,plain --rounds 3 --only hellaswag/10,arc_challenge/25

Writes ``benchmarks/results/cloze_context.md`` and ``.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE = "c700e6d"
SETTINGS = {"hellaswag/10": ("hellaswag", 10, 40), "arc_challenge/25": ("arc", 25, 25), "winogrande/3": ("winogrande", 3, 16)}
WINOGRANDE = REPO / "tests" / "fixtures" / "lm_eval_tasks" / "data" / "winogrande"
BATCH = 8


def needed_tokens(seqs: list[list[int]]) -> int:
    """Distinct prefixes (trie nodes) of ``seqs``: sorted, each adds what it does not share with the one before."""
    seqs = sorted(seqs)
    total, prev = 0, []
    for s in seqs:
        k = 0
        while k < min(len(s), len(prev)) and s[k] == prev[k]:
            k += 1
        total += len(s) - k
        prev = s
    return total


class TokenCounter:
    """Input tokens of every forward call of ``model`` (a hook on its token embedding)."""

    def __init__(self, model):
        self.n = 0
        model.get_input_embeddings().register_forward_pre_hook(self._count)

    def _count(self, module, args):
        self.n += int(args[0].numel())


def _clock():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), ru.ru_utime + ru.ru_stime


# ------------------------------------------------------------------ workers (one arm, one setting)

OP_GROUPS = {  # torch operators by what they do, for --profile's itemisation (first match wins)
    "attention (sdpa)": ("scaled_dot_product", "flash_attention", "_efficient_attention"),
    "matmul (linear)": ("addmm", "aten::mm", "bmm", "matmul", "linear"),
    "softmax / log-softmax": ("softmax",),
    "gather / index / mask": ("index", "gather", "masked", "nonzero", "where", "scatter"),
    "copy / cat / new tensors": ("copy", "cat", "stack", "pad", "clone", "contiguous", "_to_copy", "aten::to",
                                 "fill", "zero", "empty", "zeros", "ones", "full", "arange", "expand", "repeat"),
    "elementwise / norms": ("mul", "add", "sub", "div", "silu", "gelu", "rsqrt", "pow", "mean", "neg", "exp", "sum"),
}


def profiled(fn):
    """``fn()``, and with ``--profile`` its torch operators' self time (seconds) by operator name."""
    if not os.environ.get("CLOZE_PROFILE"):
        return fn(), None
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = fn()
    ops: dict[str, float] = {}
    for e in prof.key_averages():
        ops[e.key] = ops.get(e.key, 0.0) + e.self_cpu_time_total / 1e6
    return out, ops


def op_group(name: str) -> str:
    return next((g for g, keys in OP_GROUPS.items() if any(k in name for k in keys)), "other")

def plain_logprobs(model, requests: list[list[tuple[list[int], list[int]]]]) -> list[list[float]]:
    """lm-eval's loglikelihoods from a plain Hugging Face model, the cloze pass's limit: per item,
    each distinct context's tokens but its last forwarded once into a key/value cache; then every
    continuation that shares it in one right-padded batch on the repeated cache (the context's last
    token, then the continuation but its last); the unembedding only at the scored positions."""
    import torch
    from transformers import DynamicCache

    body, head = model.get_decoder(), model.get_output_embeddings()
    out = []
    with torch.inference_mode():
        for item in requests:
            by_context: dict[tuple, list[int]] = {}
            for r, (c, _) in enumerate(item):
                by_context.setdefault(tuple(c), []).append(r)
            ll = [0.0] * len(item)
            for c, rows in by_context.items():
                xs = [item[r][1] for r in rows]
                past, n, w = len(c) - 1, len(rows), max(len(x) for x in xs)
                cache = DynamicCache()
                if past:
                    body(input_ids=torch.tensor([list(c[:-1])]), past_key_values=cache, use_cache=True)
                    cache.batch_repeat_interleave(n)
                ids = torch.tensor([[c[-1]] + x[:-1] + [0] * (w - len(x)) for x in xs])
                mask = torch.tensor([[1] * (past + len(x)) + [0] * (w - len(x)) for x in xs])
                hidden = body(input_ids=ids, attention_mask=mask, past_key_values=cache if past else None,
                              use_cache=bool(past)).last_hidden_state
                scored = torch.tensor([[j < len(x) for j in range(w)] for x in xs])
                logp = torch.log_softmax(head(hidden[scored]).float(), -1)
                target = torch.tensor([t for x in xs for t in x])
                tok = logp.gather(-1, target[:, None]).squeeze(-1).double()
                k = 0
                for r, x in zip(rows, xs):
                    ll[r] = float(tok[k:k + len(x)].sum())
                    k += len(x)
            out.append(ll)
    return out


def plain_arm(setting: str, requests_file: Path, model: str = "smollm2-135m") -> dict:
    """The ``plain`` arm: the ``new`` arm's logged requests scored by :func:`plain_logprobs`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sys.path.insert(0, str(REPO / "src"))
    from whitebox_eval.tasks.lm_eval import encode_request

    folder = os.environ["SMOLLM2_DIR"]
    tok = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    counter = TokenCounter(lm)
    logged = json.loads(requests_file.read_text(encoding="utf-8"))
    encode = lambda text: tok(text)["input_ids"]  # noqa: E731  (as needed_of: lm-eval adds no BOS here)
    tokens = []
    for item in logged:
        reqs = []
        for context, continuation in item["requests"]:
            c, (x,) = encode_request(encode, context, [continuation])
            reqs.append((c, x))
        tokens.append(reqs)
    t0, c0 = _clock()
    ll, ops = profiled(lambda: plain_logprobs(lm, tokens))
    t1, c1 = _clock()
    return {"seconds": t1 - t0, "cpu_seconds": c1 - c0, "computed": counter.n, "ops": ops,
            "items": [{**item, "loglik": l, **predictions(l, item["requests"])} for item, l in zip(logged, ll)]}


def predictions(ll: list[float], requests: list[list[str]]) -> dict:
    """acc's and acc_norm's choices from one item's log-likelihoods, as lm-eval decides them (the first
    maximum; acc_norm divides by the choice's characters, the continuation without its leading space
    delimiter); acc_norm only where the item's requests share one context (one context per choice,
    as winogrande's, has no acc_norm)."""
    import numpy as np

    acc = int(np.argmax(ll))
    if len({c for c, _ in requests}) > 1:
        return {"acc": acc}
    lengths = [float(len(x[1:] if x.startswith(" ") else x)) for _, x in requests]
    return {"acc": acc, "acc_norm": int(np.argmax(np.array(ll) / np.array(lengths)))}


class PhaseClock:
    """Wall and CPU seconds of the packed pass (``continuation_logprobs`` and the shared prefixes the
    cloze pass reads), split into the engine's forward (``Engine.run``), the host's packing and index
    building before it, and the log-softmax and sums after it."""

    def __init__(self):
        self.t = {"packed": [0.0, 0.0], "forward": [0.0, 0.0], "prefix": [0.0, 0.0]}

    def wrap(self, name: str, fn):
        def timed(*a, **k):
            t0, c0 = _clock()
            try:
                return fn(*a, **k)
            finally:
                t1, c1 = _clock()
                self.t[name][0] += t1 - t0
                self.t[name][1] += c1 - c0
        return timed

    def install(self, mcqa_study) -> None:
        from whitebox_eval.mcqa import scoring

        inner = scoring.continuation_logprobs
        outer = self

        def counted(engine, *a, **k):
            run = engine.run
            engine.run = outer.wrap("forward", run)
            try:
                return outer.wrap("packed", inner)(engine, *a, **k)
            finally:
                engine.run = run
        mcqa_study.continuation_logprobs = counted
        mcqa_study._Study.prefix_for = self.wrap("prefix", mcqa_study._Study.prefix_for)

    def phases(self) -> dict:
        (pw, pc), (fw, fc), (xw, xc) = self.t["packed"], self.t["forward"], self.t["prefix"]
        return {"packed_seconds": pw + xw, "packed_cpu_seconds": pc + xc, "prefix_cpu_seconds": xc,
                "forward_cpu_seconds": fc, "host_and_sums_cpu_seconds": pc - fc}


def ours(setting: str, shared: Path, tmp: Path, model: str = "smollm2-135m") -> dict:
    """Our ``mcqa`` cloze run (whichever ``whitebox_eval`` is on PYTHONPATH), its packed pass timed by phase."""
    from whitebox_eval.mcqa import study as mcqa_study
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    clock = PhaseClock()
    clock.install(mcqa_study)
    from whitebox_eval.models import load_model

    sys.path.insert(0, str(REPO / "tests"))
    from lm_eval_whole_files_data import task_spec

    name, shots, n = SETTINGS[setting]
    loaded = load_model(model, dtype="float32")
    counter = TokenCounter(loaded.model)
    if name == "winogrande":
        cfg = MCQAConfig(model=model, task="lm-eval:winogrande", prompt="lm-eval", shots=shots, view="cloze",
                         lm_eval_data=str(WINOGRANDE), methods=("cloze",), uncertainty=False, batch_size=BATCH)
    else:
        cfg = MCQAConfig(model=model, task=task_spec(name, shots, shared, tmp), prompt="lm-eval", shots=shots,
                         limit=n, methods=("cloze",), uncertainty=False, batch_size=BATCH)
    t0, c0 = _clock()
    folder, ops = profiled(lambda: run_mcqa(cfg, tmp / "runs", run_id="r", loaded=loaded, show_progress=False))
    t1, c1 = _clock()
    samples = list(folder.read_samples())
    return {"seconds": t1 - t0, "cpu_seconds": c1 - c0, "computed": counter.n, **clock.phases(), "ops": ops,
            "items": [{"gold": s["gold"], "loglik": s["cloze_loglik"], "acc": s["pred_cloze"],
                       "acc_norm": s["pred_cloze_norm"], "requests": requests_of(s)} for s in samples]}


def requests_of(sample: dict) -> list[list[str]] | None:
    """The (context, continuation) requests a samples.jsonl line logs (``arguments``; older lines: one prompt)."""
    if "arguments" in sample:
        return [[a["arg_0"], a["arg_1"]] for a in sample["arguments"].values()]
    return None


def lm_eval_arm(setting: str, shared: Path, tmp: Path) -> dict:
    """lm-eval 0.4.13's own run of the same documents."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    from lm_eval_fixtures import TRAIN_ROWS, splits_of
    from lm_eval_parity import arc_rows, build_task, hellaswag_rows, local_source, write_jsonl

    name, shots, n = SETTINGS[setting]
    model_dir = os.environ["SMOLLM2_DIR"]
    data = tmp / "data"
    if name == "winogrande":
        files = {"train": str(WINOGRANDE / "train.jsonl"), "validation": str(WINOGRANDE / "validation.jsonl")}
        task_name, override = "winogrande", local_source(files, **splits_of(files))
    elif name == "hellaswag":
        rows, k = hellaswag_rows(shared / "hellaswag" / "hellaswag_val_sample.jsonl", None), TRAIN_ROWS["hellaswag"]
        task_name, override = "hellaswag", local_source({"train": write_jsonl(data / "train.jsonl", rows[:k]),
                                                         "validation": write_jsonl(data / "val.jsonl", rows[k:])})
    else:
        rows, k = arc_rows(shared / "arc" / "arc_challenge_sample.llmfoundry.jsonl", None), TRAIN_ROWS["arc_challenge"]
        task_name, override = "arc_challenge", local_source({"train": write_jsonl(data / "train.jsonl", rows[:k]),
                                                             "test": write_jsonl(data / "test.jsonl", rows[k:])},
                                                            validation_split=None)
    model_args = {"pretrained": model_dir, "dtype": "float32"}
    lm = HFLM(pretrained=model_dir, dtype="float32", device="cpu", batch_size=BATCH)
    counter = TokenCounter(lm.model)
    t0, c0 = _clock()  # lm-eval's task index and task as its CLI builds them, then the run
    tm = TaskManager(metadata=dict(model_args))
    task = build_task(tm, task_name, override)
    res = lm_eval.simple_evaluate(model=lm, tasks=[task], num_fewshot=shots, limit=n, log_samples=True, task_manager=tm)
    t1, c1 = _clock()
    items = []
    for s in sorted(res["samples"][task_name], key=lambda s: s["doc_id"]):
        ll = [float(r[0]) for r in s["filtered_resps"]]
        items.append({"doc_id": s["doc_id"], "loglik": ll, "requests": [list(a) for a in s["arguments"]],
                      "acc": float(s["acc"]), **({"acc_norm": float(s["acc_norm"])} if "acc_norm" in s else {})})
    return {"seconds": t1 - t0, "cpu_seconds": c1 - c0, "computed": counter.n, "items": items,
            "aggregate": {k: v for k, v in res["results"][task_name].items() if k.endswith(",none")}}


def worker(arm: str, setting: str, shared: Path, out: Path, model: str, requests: Path | None = None) -> None:
    if os.environ.get("CLOZE_ITEMS"):  # --items: the setting's first N items
        name, shots, _ = SETTINGS[setting]
        SETTINGS[setting] = (name, shots, int(os.environ["CLOZE_ITEMS"]))
    if os.environ.get("CLOZE_THREADS"):  # --threads: every arm's intra-op threads
        import torch

        torch.set_num_threads(int(os.environ["CLOZE_THREADS"]))
    with tempfile.TemporaryDirectory() as tmp:
        if arm == "plain":
            result = plain_arm(setting, requests, model)
        elif arm == "lm-eval":
            result = lm_eval_arm(setting, shared, Path(tmp))
        else:
            result = ours(setting, shared, Path(tmp), model)
    out.write_text(json.dumps(result), encoding="utf-8")


# ------------------------------------------------------------------ the driver

def needed_of(items: list[dict], model: str = "smollm2-135m") -> int:
    """Tokens needed by lm-eval's requests of every item, tokenized as lm-eval's ``_encode_pair`` does."""
    sys.path.insert(0, str(REPO / "src"))
    from whitebox_eval.models import load_model
    from whitebox_eval.tasks.lm_eval import encode_request

    tok = load_model(model, dtype="float32").tokenizer
    encode = lambda text: tok(text)["input_ids"]  # noqa: E731  (lm-eval adds no BOS with this tokenizer)
    total = 0
    for it in items:
        seqs = []
        for context, continuation in it["requests"]:
            c, (x,) = encode_request(encode, context, [continuation])
            seqs.append((c + x)[:-1])
        total += needed_tokens(seqs)
    return total


def run_arm(arm: str, setting: str, args, before_src: Path, requests: Path | None = None) -> dict:
    env = dict(os.environ)
    src = (args.before_src or before_src) if arm == "before" else REPO / "src"
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    python = args.lm_eval_python if arm == "lm-eval" else sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        load = os.getloadavg()[0]
        subprocess.run([python, __file__, "--worker", arm, "--setting", setting, "--datasets", str(args.datasets),
                        "--worker-out", str(out), "--model", args.model,
                        *(["--requests", str(requests)] if requests else [])], env=env, check=True)
        result = json.loads(out.read_text(encoding="utf-8"))
    result["load_before"], result["load_after"] = load, os.getloadavg()[0]
    packed = (f"  packed pass {result['packed_seconds']:.1f} s wall {result['packed_cpu_seconds']:.1f} s cpu"
              if "packed_seconds" in result else "")
    print(f"  {setting:17s} {arm:8s} {result['seconds']:8.1f} s wall {result['cpu_seconds']:8.1f} s cpu "
          f"{result['computed']:9d} tokens  (load {load:.1f} -> {result['load_after']:.1f}){packed}", flush=True)
    return result


def compare(arms: dict[str, dict]) -> dict:
    """Per-item agreement: every arm's log-likelihoods and acc / acc_norm predictions against lm-eval's."""
    import numpy as np

    out: dict = {}
    ref = arms.get("lm-eval")
    for arm, r in arms.items():
        if arm == "lm-eval" or ref is None:
            continue
        diff, diff_items = 0.0, {"acc": [], "acc_norm": []}
        metrics = [m for m in ("acc", "acc_norm") if m in ref["items"][0]]
        acc = {m: 0.0 for m in metrics}
        for i, (o, t) in enumerate(zip(r["items"], ref["items"])):
            ll = np.array(t["loglik"])
            diff = max(diff, float(np.abs(np.array(o["loglik"]) - ll).max()))
            for m in metrics:
                if m in t:
                    mine = float(int(o[m]) == int(o["gold"]))
                    acc[m] += mine
                    if mine != t[m]:
                        diff_items[m].append(i)
        n = len(r["items"])
        out[arm] = {"n": n, "n_lm_eval": len(ref["items"]), "max_abs_loglik_diff": diff,
                    **{m: v / n for m, v in acc.items()},
                    "acc_lm_eval": float(np.mean([t["acc"] for t in ref["items"]])),
                    "acc_norm_lm_eval": (float(np.mean([t["acc_norm"] for t in ref["items"]]))
                                         if "acc_norm" in ref["items"][0] else None),
                    "items_differing": diff_items,
                    "same_requests": all(o["requests"] in (None, t["requests"]) for o, t in zip(r["items"], ref["items"]))}
    plain = arms.get("plain")
    if plain is not None:
        for arm, r in arms.items():
            if arm in ("plain", "lm-eval"):
                continue
            worst = max(float(np.abs(np.array(o["loglik"]) - np.array(t["loglik"])).max())
                        for o, t in zip(r["items"], plain["items"]))
            out.setdefault(arm, {})["max_abs_loglik_diff_vs_plain"] = worst
    return out


def packed_table(rows: dict) -> list[str]:
    """The packed pass against the plain limit, per setting and round, with the median ratio of CPU
    seconds over rounds (HellaSwag and ARC summed per round as well)."""
    import numpy as np

    lines = ["", "## The packed pass against plain transformers with a KV cache", "",
             "CPU seconds of the forwards alone: `packed` is the new arm's packed pass (phases: the engine's "
             "forward, the host's packing/index building and the log-softmax and sums, the shared prefixes), "
             "`plain` is :func:`plain_logprobs` on the same requests.", "",
             "| setting | round | packed cpu s | forward | host + sums | prefixes | plain cpu s | packed / plain | "
             "max abs Δ loglik new vs plain |", "|---|---|---|---|---|---|---|---|---|"]
    summed: dict[int, list[float]] = {}
    for setting, r in rows.items():
        ratios = []
        for rnd, arms in enumerate(r["rounds"]):
            if "plain" not in arms or "new" not in arms:
                continue
            n, p = arms["new"], arms["plain"]
            ratio = n["packed_cpu_seconds"] / p["cpu_seconds"]
            ratios.append(ratio)
            if setting != "winogrande/3":
                acc = summed.setdefault(rnd, [0.0, 0.0])
                acc[0] += n["packed_cpu_seconds"]
                acc[1] += p["cpu_seconds"]
            diff = r["agreement"][rnd].get("new", {}).get("max_abs_loglik_diff_vs_plain")
            lines.append(f"| {setting} | {rnd + 1} | {n['packed_cpu_seconds']:.1f} | {n['forward_cpu_seconds']:.1f} | "
                         f"{n['host_and_sums_cpu_seconds']:.1f} | {n['prefix_cpu_seconds']:.1f} | {p['cpu_seconds']:.1f} | "
                         f"{ratio:.3f} | {'-' if diff is None else f'{diff:.1e}'} |")
        if ratios:
            lines.append(f"| {setting} | median | | | | | | **{float(np.median(ratios)):.3f}** | |")
    if summed:
        per = [a / b for a, b in summed.values()]
        lines.append(f"| hellaswag/10 + arc_challenge/25 | median of {len(per)} | "
                     f"{float(np.median([a for a, _ in summed.values()])):.1f} | | | | "
                     f"{float(np.median([b for _, b in summed.values()])):.1f} | **{float(np.median(per)):.3f}** | |")
    return lines


def ops_table(rows: dict) -> list[str]:
    """--profile: the new arm's and plain's operator self time by group, summed over rounds,
    and the operators whose difference is largest (the profiler's own cost included in both)."""
    new: dict[str, float] = {}
    plain: dict[str, float] = {}
    for r in rows.values():
        for arms in r["rounds"]:
            for arm, into in (("new", new), ("plain", plain)):
                for op, sec in ((arms.get(arm) or {}).get("ops") or {}).items():
                    into[op] = into.get(op, 0.0) + sec
    if not new or not plain:
        return []
    groups = {g: [0.0, 0.0] for g in [*OP_GROUPS, "other"]}
    for i, side in enumerate((new, plain)):
        for op, sec in side.items():
            groups[op_group(op)][i] += sec
    lines = ["", "## Where the time goes (--profile: torch operators' self time, seconds as the profiler clocks "
             "them: each operator's wall time, so a loaded machine inflates them all; compare the arms' shares)", "",
             "| operator group | new arm (whole run) | plain | new - plain |", "|---|---|---|---|"]
    lines += [f"| {g} | {a:.2f} | {b:.2f} | {a - b:+.2f} |" for g, (a, b) in groups.items()]
    a, b = sum(new.values()), sum(plain.values())
    lines += [f"| all operators | {a:.2f} | {b:.2f} | {a - b:+.2f} |", "",
              "| operator | new | plain | new - plain |", "|---|---|---|---|"]
    diff = sorted(set(new) | set(plain), key=lambda op: -abs(new.get(op, 0.0) - plain.get(op, 0.0)))[:12]
    lines += [f"| `{op}` | {new.get(op, 0.0):.2f} | {plain.get(op, 0.0):.2f} | {new.get(op, 0.0) - plain.get(op, 0.0):+.2f} |"
              for op in diff]
    return lines


def report(rows: dict, args, started: str) -> str:
    lines = ["# Each context computed once: k-shot cloze, tokens and time", "",
             f"Command: `python benchmarks/cloze_context.py {' '.join(sys.argv[1:])}` ({started}; SmolLM2-135M "
             f"float32, {os.cpu_count()} CPU cores, batch size {BATCH} in every arm; `before` = {args.before_src or 'commit ' + BEFORE}).", "",
             "| setting | arm | computed tokens | needed | computed / needed | wall s | cpu s | wall: before / arm, "
             "lm-eval / arm | acc / acc_norm | items differing from lm-eval (acc, acc_norm) | max abs Δ loglik vs lm-eval |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for setting, r in rows.items():
        for rnd, arms in enumerate(r["rounds"]):
            for arm, a in arms.items():
                ratios = " / ".join(f"{arms[o]['seconds'] / a['seconds']:.2f}" if o in arms and o != arm else "-"
                                    for o in ("before", "lm-eval"))
                c = r["agreement"][rnd].get(arm, {})
                if arm == "lm-eval":
                    agg = a["aggregate"]
                    accs = " / ".join(f"{agg[k]:.4f}" if k in agg else "-" for k in ("acc,none", "acc_norm,none"))
                    differing, worst = "-", "-"
                else:
                    accs = " / ".join(f"{c[m]:.4f}" if m in c else "-" for m in ("acc", "acc_norm"))
                    differing = (f"{len(c['items_differing']['acc'])}, {len(c['items_differing']['acc_norm'])}"
                                 if "items_differing" in c else "-")
                    worst = f"{c['max_abs_loglik_diff']:.1e}" if "max_abs_loglik_diff" in c else "-"
                lines.append(f"| {setting}{f' (round {rnd + 1})' if len(r['rounds']) > 1 else ''} | {arm} | "
                             f"{a['computed']} | {r['needed']} | {a['computed'] / r['needed']:.2f} | {a['seconds']:.1f} | "
                             f"{a['cpu_seconds']:.1f} | {ratios} | {accs} | {differing} | {worst} |")
    loads = [a[k] for r in rows.values() for arms in r["rounds"] for a in arms.values() for k in ("load_before", "load_after")]
    lines += ["", f"Load average (1 min) around the arms: {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores"
              + (" — other engineers' test runs shared the machine: wall-clock ratios are of arms run back to back, "
                 "CPU seconds are steadier" if max(loads) > (os.cpu_count() or 1) else "") + "."]
    if any("plain" in arms for r in rows.values() for arms in r["rounds"]):
        lines += packed_table(rows)
    lines += ops_table(rows)
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=Path, default=REPO.parent / "shared" / "datasets")
    ap.add_argument("--only", default=None, help="comma list of " + ", ".join(SETTINGS))
    ap.add_argument("--arms", default="before,new,lm-eval", help="comma list of before, new, plain, lm-eval")
    ap.add_argument("--before-src", type=Path, default=None,
                    help="the before arm's src folder (default: commit %s's, from git archive)" % BEFORE)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--items", type=int, default=None,
                    help="only each setting's first N items (a shorter run of the same contexts; winogrande: all)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch's intra-op threads in every arm (default: torch's own); 1 keeps CPU seconds "
                         "steady on a loaded machine, where idle threads spin")
    ap.add_argument("--profile", action="store_true",
                    help="itemise each arm's CPU seconds by torch operator (torch.profiler; slows every arm)")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="largest |log-likelihood| difference of the new arm from plain (default: %(default)s)")
    ap.add_argument("--lm-eval-python", default=sys.executable)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "cloze_context.md")
    ap.add_argument("--model", default="smollm2-135m", help="every arm's model (default: %(default)s)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--setting", help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--requests", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.setting, args.datasets, args.worker_out, args.model, args.requests)
        return
    started = time.strftime("%Y-%m-%d %H:%M")
    if args.items:
        os.environ["CLOZE_ITEMS"] = str(args.items)
    if args.threads:
        os.environ["CLOZE_THREADS"] = str(args.threads)
    if args.profile:
        os.environ["CLOZE_PROFILE"] = "1"
    arms = args.arms.split(",")
    if "plain" in arms and "new" not in arms:
        ap.error("the plain arm scores the new arm's requests: --arms must name new too")
    sys.path.insert(0, str(REPO / "src"))
    from whitebox_eval.models.loading import resolve_source

    os.environ["SMOLLM2_DIR"] = str(resolve_source(args.model)[0])  # lm-eval's pretrained= folder
    rows: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        before_src = Path(tmp) / "before"
        if "before" in arms and args.before_src is None:  # today's code, untouched: the commit's src tree
            before_src.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", BEFORE, "src"], check=True, capture_output=True)
            subprocess.run(["tar", "-x", "-C", str(before_src)], input=archive.stdout, check=True)
            before_src = before_src / "src"
        for setting in SETTINGS:
            if args.only and setting not in args.only.split(","):
                continue
            rounds, requests = [], None
            for rnd in range(args.rounds):
                order = arms if rnd % 2 == 0 else arms[::-1]  # alternate which arm runs first
                if requests is None and "plain" in order:  # the first round logs the requests plain reads
                    order = sorted(order, key=lambda a: a != "new")
                done = {}
                for arm in order:
                    done[arm] = run_arm(arm, setting, args, before_src, requests)
                    if arm == "new" and requests is None:
                        requests = Path(tmp) / f"requests-{setting.replace('/', '-')}.json"
                        requests.write_text(json.dumps([{"gold": it["gold"], "requests": it["requests"]}
                                                        for it in done[arm]["items"]]), encoding="utf-8")
                rounds.append(done)
            items = next(r["items"] for r in rounds[0].values() if r["items"][0].get("requests"))
            rows[setting] = {"rounds": rounds, "needed": needed_of(items, args.model), "agreement": [compare(r) for r in rounds]}
            print(json.dumps({setting: {"needed": rows[setting]["needed"], "agreement": rows[setting]["agreement"]}}),
                  flush=True)
    text = report(rows, args, started)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    slim = {s: {**r, "rounds": [{a: {k: v for k, v in x.items() if k != "items"} for a, x in rnd.items()}
                                for rnd in r["rounds"]]} for s, r in rows.items()}
    args.out.with_suffix(".json").write_text(json.dumps(slim, indent=1) + "\n", encoding="utf-8")
    worst = [a.get("new", {}).get("max_abs_loglik_diff_vs_plain") for r in rows.values() for a in r["agreement"]]
    worst = [w for w in worst if w is not None]
    if worst:
        print(f"log-likelihoods, new vs plain: largest |difference| {max(worst):.1e} (tolerance {args.tolerance:g})")
        if max(worst) > args.tolerance:
            sys.exit(f"the packed pass's log-likelihoods differ from plain transformers' by {max(worst):.1e}, "
                     f"over the tolerance {args.tolerance:g}")


if __name__ == "__main__":
    main()
