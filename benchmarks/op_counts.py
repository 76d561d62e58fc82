"""Dispatched aten ops of the engine's passes, counted on the CPU: the work a GPU launches.

At small batches a GPU forward is launch-bound: every dispatched op costs ~10.6 microseconds
of host time on the H200 whatever its size (``benchmarks/results/gpu_check.md``), so
the op count of a pass predicts its time, and the ratio of two counts the ratio of two times.
This script counts every op a pass dispatches (a ``TorchDispatchMode``) on tiny bf16 models
of gpu_check's three shapes (llama-3-8b, qwen2.5-7b, gemma-2-9b: the same families, modules
and attention paths, gemma2's softcap included), at two depths and two batch sizes, so that

    ops(pass) = per_layer * layers + per_pass

is read off exactly: ``per_layer`` from the two depths, ``per_pass`` what is left. The engine
is compared with its bare pass (``engine.run(batch)``, no capture) and with the plain HF forward
(gpu_check's, ``logits_to_keep=1``, HF's cache on as by default, and off). Host syncs
(``_local_scalar_dense``, ``nonzero``, ``item``, ``equal``) are counted inside the forward alone.

    python benchmarks/op_counts.py                       # engine table, every family, both gather paths
    python benchmarks/op_counts.py --suites              # each suite's main pass, ops per item
    python benchmarks/op_counts.py --json out.json

Also imported by ``tests/internals/test_op_counts.py`` (the budget: extra ops per layer over the
bare pass <= 10, extra per pass <= 150 and independent of the batch size, no extra host sync in
the forward). Runs against any checkout on ``PYTHONPATH`` (an older engine without ``registry``
is read through ``requests.CAPTURE_POINTS``), so the same script gives the before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

HERE = Path(__file__).resolve().parent
if not os.environ.get("PYTHONPATH"):  # this checkout's src, unless PYTHONPATH names another (a before)
    sys.path.insert(0, str(HERE.parent / "src"))
import whitebox_eval  # noqa: E402,F401  (imported first: gpu_check's own path insert then changes nothing)

sys.path.insert(0, str(HERE))
import gpu_check  # noqa: E402
from dispatch_counts import OpCounter  # noqa: E402

FAMILIES = {"llama": "llama-3-8b", "qwen2": "qwen2.5-7b", "gemma2": "gemma-2-9b"}
DEPTHS = (2, 4)
BATCHES = (2, 8)
TOKENS = 24  # prompt length of the tiny passes (rows 0-2 tokens shorter: left padding)
US_PER_OP = 10.6  # H200, batch 8, 0-shot: host time per dispatched op
FULL_DEPTH = {"llama": 32, "qwen2": 28, "gemma2": 42}
BUDGET_PER_LAYER = 10
BUDGET_PER_PASS = 150


def counted(fn: Callable[[], object], model=None) -> OpCounter:
    """Ops of one call of ``fn`` (after an uncounted warm-up call), without autograd."""
    with torch.no_grad():
        fn()
        with OpCounter(model) as c:
            fn()
    return c


_MODELS: dict = {}


def tiny(family: str, layers: int):
    """A tiny bf16 model of gpu_check's ``family`` shape with ``layers`` blocks (cached)."""
    key = (family, layers)
    if key not in _MODELS:
        _MODELS[key] = gpu_check.build(FAMILIES[family], tiny=True, device="cpu", dtype=torch.bfloat16, layers=layers)
    return _MODELS[key]


def engine_of(lm, keep: int | None = None):
    from whitebox_eval.internals import Engine

    eng = Engine(lm)
    if keep is not None:
        eng.keep_bytes = keep
    return eng


def batch_of(b: int, seed: int = 2):
    """A left-padded batch of ``b`` random prompts and each prompt's four option positions."""
    from whitebox_eval.internals import batch_from_ids

    toks = gpu_check.prompts(b, TOKENS, 0, 512, seed=seed)
    ids = [t.input_ids[: TOKENS - (i % 3)] for i, t in enumerate(toks)]
    opts = [[p - (i % 3) for p in t.option_positions] for i, t in enumerate(toks)]
    return batch_from_ids(ids, pad_id=0), opts, toks


@dataclass
class Profile:
    """ops = per_layer * layers + per_pass, per batch size; host syncs inside the forward."""

    per_layer: dict[int, float] = field(default_factory=dict)
    per_pass: dict[int, float] = field(default_factory=dict)
    syncs: dict[int, dict[str, int]] = field(default_factory=dict)

    def minus(self, other: "Profile") -> "Profile":
        return Profile({b: self.per_layer[b] - other.per_layer[b] for b in self.per_layer},
                       {b: self.per_pass[b] - other.per_pass[b] for b in self.per_pass}, self.syncs)

    def at(self, layers: int, b: int) -> float:
        return self.per_layer[b] * layers + self.per_pass[b]


Scenario = Callable[[object, object, object, list, list], Callable[[], object]]
"""(loaded, engine, batch, option positions, prompts) -> the call to count."""


def profile(family: str, scenario: Scenario, *, keep: int | None = None, batches=BATCHES, depths=DEPTHS) -> Profile:
    out = Profile()
    for b in batches:
        counts = {}
        for layers in depths:
            lm = tiny(family, layers)
            eng = engine_of(lm, keep)
            batch, opts, toks = batch_of(b)
            c = counted(scenario(lm, eng, batch, opts, toks), lm.model)
            counts[layers] = c
        (l0, c0), (l1, c1) = sorted(counts.items())
        out.per_layer[b] = (c1.total - c0.total) / (l1 - l0)
        out.per_pass[b] = c0.total - l0 * out.per_layer[b]
        out.syncs[b] = dict(c1.forward_syncs)
    return out


# ---- scenarios -----------------------------------------------------------------------------

def plain(use_cache: bool | None = None) -> Scenario:
    def make(lm, eng, batch, opts, toks):
        kw = {} if use_cache is None else {"use_cache": use_cache}
        return lambda: lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                position_ids=batch.position_ids, logits_to_keep=1, **kw)
    return make


def bare(lm, eng, batch, opts, toks):
    return lambda: eng.run(batch)


def gpu_check_set(lm, eng, batch, opts, toks):
    """gpu_check's captures: q at the last token, k at the option positions, attention rows of the
    last token, the residual at the last token."""
    from whitebox_eval.internals import Capture

    caps = [Capture("q", "last"), Capture("k", opts), Capture("attn", "last"), Capture("resid", "last")]
    return lambda: eng.run(batch, caps)


def scorers(lm, eng, batch, opts, toks):
    """gpu_check's white-box pass itself: mcqa's four scorers (score_prompts)."""
    from whitebox_eval.mcqa.scoring import SCORERS, score_prompts

    short = [type(t)(t.input_ids[: TOKENS - (i % 3)], o, t.answer_ids, 0) for i, (t, o) in enumerate(zip(toks, opts))]
    return lambda: score_prompts(eng, short, 4, SCORERS)


def capture(point: str) -> Scenario:
    def make(lm, eng, batch, opts, toks):
        from whitebox_eval.internals import Capture

        c = Capture(point) if point in ("attn_full", "attn_mean") else Capture(point, opts)
        return lambda: eng.run(batch, [c])
    return make


def registry() -> dict[str, tuple]:
    """The engine's own list of capture points and edits (an engine before the per-pass rewrite had none:
    its points from requests, its edits as they were)."""
    from whitebox_eval.internals import engine as engine_mod
    from whitebox_eval.internals import requests

    if hasattr(engine_mod, "registry"):
        return engine_mod.registry()
    edits = tuple(getattr(requests, n) for n in ("ScaleHeads", "MaskNeurons", "EditAttention", "Patch"))
    return {"captures": tuple(requests.CAPTURE_POINTS), "patch_points": tuple(requests.PATCH_POINTS), "edits": edits,
            "attention_modes": ("add", "add_above", "force", "copy_head")}


_CELLS: dict = {}


def _cells(batch):
    """The last row of every example edited at three keys; one tensor per batch, shared by the edits of
    every layer as the suites share theirs (GAR's forced rows, AttentionSpan's reinforced ones)."""
    if id(batch) not in _CELLS:
        b, s = batch.size, batch.seq_len
        cells = torch.zeros(b, s, s, dtype=torch.bool)
        for i, n in enumerate(batch.lengths.tolist()):
            cells[i, n - 1, [0, 1, n - 2]] = True
        pattern = cells.float() * torch.arange(1.0, s + 1)
        _CELLS[id(batch)] = (batch, cells, pattern)
    return _CELLS[id(batch)][1:]


def edit_scenarios() -> dict[str, Scenario]:
    """One scenario per edit kind and mode of the engine's registry, the edit applied in every layer.
    A kind without a scenario raises: a new edit must come with its count. Each kind declares its
    cases itself (``EditKind.op_cases``, ``internals/edit_registry.py``); the scenarios below serve an
    engine before the edit registry (a before)."""
    from whitebox_eval.internals import Capture

    try:
        from whitebox_eval.internals.edit_registry import kinds
    except ImportError:
        kinds = None
    if kinds is not None:
        return _declared_scenarios(kinds())
    reg = registry()
    out: dict[str, Scenario] = {}

    def every_layer(make_edit):
        def make(lm, eng, batch, opts, toks):
            edits = [make_edit(lm, eng, batch, opts, layer) for layer in range(lm.arch.n_layers)]
            return lambda: eng.run(batch, edits=edits)
        return make

    for kind in reg["edits"]:
        name = kind.__name__
        if name == "ScaleHeads":
            out["ScaleHeads"] = every_layer(lambda lm, e, b, o, l, kind=kind: kind(l, [0, 1], 0.5))
            out["ScaleHeads@last"] = every_layer(lambda lm, e, b, o, l, kind=kind: kind(l, [0, 1], 0.5, positions="last"))
        elif name == "MaskNeurons":
            out["MaskNeurons"] = every_layer(lambda lm, e, b, o, l, kind=kind: kind(l, [1, 5, 7]))
            out["MaskNeurons@options"] = every_layer(lambda lm, e, b, o, l, kind=kind: kind(l, [1, 5, 7], positions=o))
        elif name == "EditAttention":
            for mode in reg["attention_modes"]:
                for renorm in (False, True):
                    def make_edit(lm, e, b, o, l, mode=mode, renorm=renorm, kind=kind):
                        cells, pattern = _cells(b)
                        pattern = pattern if mode == "force" else None
                        return kind(l, [0, 2], cells, mode=mode, value=0.1, threshold=0.05, pattern=pattern,
                                    source_head=1 if mode == "copy_head" else None, renormalize=renorm)
                    out[f"EditAttention:{mode}{'+renorm' if renorm else ''}"] = every_layer(make_edit)
            from whitebox_eval.internals import requests

            if hasattr(requests, "CellRule"):  # --edit attn:: an equal rule in every layer (cells built once a pass)
                out["EditAttention:rule"] = every_layer(lambda lm, e, b, o, l, kind=kind, rule=requests.CellRule: kind(
                    l, [0, 2], rule("all", "prev"), mode="add", value=0.1))
        elif name == "Patch":
            for point in reg["patch_points"]:
                def make(lm, eng, batch, opts, toks, point=point, kind=kind):
                    values = eng.run(batch, [Capture(point, opts)])[point]  # [B, L, P, ...]
                    edits = [kind(point, l, opts, values[:, l]) for l in range(lm.arch.n_layers)]
                    return lambda: eng.run(batch, edits=edits)
                out[f"Patch:{point}"] = make
        elif name == "Replace":
            for point in reg["patch_points"]:
                def make(lm, eng, batch, opts, toks, point=point, kind=kind):
                    edits = [kind(point, l, lambda x: x * 0.5) for l in range(lm.arch.n_layers)]
                    return lambda: eng.run(batch, edits=edits)
                out[f"Replace:{point}"] = make
        elif name == "AddVector":
            for point in ("resid", "head_out", "mlp_act"):
                for positions in (None, "last"):
                    def make_edit(lm, e, b, o, l, point=point, positions=positions, kind=kind):
                        width = {"resid": lm.arch.d_model, "mlp_act": lm.arch.d_ff}.get(point, lm.arch.n_heads * lm.arch.head_dim)
                        return kind(point, l, torch.linspace(-1, 1, width), 0.5, positions)
                    out[f"AddVector:{point}{'@last' if positions else ''}"] = every_layer(make_edit)
            out["AddVector:resid+replace@last"] = every_layer(
                lambda lm, e, b, o, l, kind=kind: kind("resid", l, torch.linspace(-1, 1, lm.arch.d_model), 1.0, "last", True))
        elif name == "ClampFeature":
            for activation in ("relu", "jumprelu", "topk"):
                for positions in (None, "last"):
                    def make_edit(lm, e, b, o, l, activation=activation, positions=positions, kind=kind):
                        return kind("resid", l, _sae(lm.arch.d_model, activation), [1, 5, 7], value=2.0, positions=positions)
                    out[f"ClampFeature:{activation}{'@last' if positions else ''}"] = every_layer(make_edit)
        else:
            raise KeyError(f"no op-count scenario for the engine's edit {name}: add one to benchmarks/op_counts.py")
    return out


def _declared_scenarios(kinds) -> dict[str, Scenario]:
    """Every edit kind's own op-count cases (``name -> (loaded, engine, batch, options) -> edits``)."""
    out: dict[str, Scenario] = {}
    for kind in kinds:
        if kind.op_cases is None:
            raise KeyError(f"no op-count case for the engine's edit {kind.name}: declare op_cases in its EditKind")
        for case, make_edits in kind.op_cases().items():
            def make(lm, eng, batch, opts, toks, make_edits=make_edits):
                edits = make_edits(lm, eng, batch, opts)
                return lambda: eng.run(batch, edits=edits)
            out[f"{kind.name}{case}"] = make
    return out


_SAES: dict = {}


def _sae(d_in: int, activation: str):
    """A random float32 SAE of 64 features reading a ``d_in``-wide point (one per shape: the engine
    slices its weights once, as a study's passes do)."""
    from whitebox_eval.sae.encoding import SAE

    key = (d_in, activation)
    if key not in _SAES:
        g = torch.Generator().manual_seed(7)
        extra = {"k": 8} if activation == "topk" else {"threshold": torch.full((64,), 0.01)} if activation == "jumprelu" else {}
        _SAES[key] = SAE(torch.randn(d_in, 64, generator=g), torch.randn(64, generator=g), torch.randn(64, d_in, generator=g),
                         torch.randn(d_in, generator=g), activation=activation, **extra)
    return _SAES[key]


def packed_cloze(lm, eng, batch, opts, toks):
    """The packed cloze pass (mcqa's cloze, lm-eval's loglikelihood): one row per item, the context
    once and four continuations under the packed mask; log-likelihoods of every continuation."""
    from whitebox_eval.mcqa.scoring import continuation_logprobs

    groups = _cloze_groups(batch.size)
    return lambda: continuation_logprobs(eng, groups)


def packed_plain(lm, eng, batch, opts, toks):
    """The plain HF forward of the same packed rows under the same explicit mask (SDPA booleans)."""
    from whitebox_eval.internals.packing import pack

    packed = pack([[(c + x)[:-1] for c, x in g] for g in _cloze_groups(batch.size)])
    pb = packed.batch
    m = pb.visible & pb.attention_mask.bool()[:, None, :]
    mask = m[:, None] if lm.model.config._attn_implementation.endswith("sdpa") else \
        torch.zeros(m[:, None].shape, dtype=lm.model.dtype).masked_fill(~m[:, None], torch.finfo(lm.model.dtype).min)
    return lambda: lm.model(input_ids=pb.input_ids, attention_mask=mask, position_ids=pb.position_ids, use_cache=False)


def _cloze_groups(b: int):
    g = torch.Generator().manual_seed(5)
    groups = []
    for i in range(b):
        ctx = torch.randint(3, 512, (14 - (i % 3),), generator=g).tolist()
        groups.append([(ctx, torch.randint(3, 512, (2 + k % 2,), generator=g).tolist()) for k in range(4)])
    return groups


# ---- suites: each one's main pass, ops per item --------------------------------------------

def suite_scenarios() -> dict[str, Callable[[int], tuple[Callable[[], object], object, int]]]:
    """name -> (batch size -> (the call, the model, items in it)). Tiny llama with SmolLM2's
    tokenizer and vocabulary where a suite needs text."""
    return {"mcqa (4 scorers)": _mcqa, "mcqa cloze (packed)": _mcqa_cloze, "formats (mcq)": _formats,
            "mui scoring": _mui, "span rollout": _span, "gar": _gar}


_TOK = {}


def _tokenizer():
    if "tok" not in _TOK:
        from transformers import AutoTokenizer

        from whitebox_eval.models.loading import resolve_source

        _TOK["tok"] = AutoTokenizer.from_pretrained(str(resolve_source("smollm2-135m")[0]))
    return _TOK["tok"]


def _text_model(layers: int = 2):
    """A tiny llama with SmolLM2's vocabulary and tokenizer (bf16, random weights)."""
    key = ("text", layers)
    if key not in _MODELS:
        import transformers as tf

        from whitebox_eval.models.architectures import Architecture
        from whitebox_eval.models.loading import LoadedModel

        tok = _tokenizer()
        cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=96, num_hidden_layers=layers,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=16, attn_implementation="sdpa",
                             tie_word_embeddings=True)
        torch.manual_seed(0)
        model = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
        _MODELS[key] = LoadedModel(model=model, tokenizer=tok, arch=Architecture.of(model), spec="tiny-smollm2-vocab",
                                   source="random")
    return _MODELS[key]


def _mcqa(b: int):
    from whitebox_eval.mcqa.scoring import SCORERS, score_prompts

    lm = tiny("llama", 2)
    eng = engine_of(lm)
    _, opts, toks = batch_of(b)
    short = [type(t)(t.input_ids[: TOKENS - (i % 3)], o, t.answer_ids, 0) for i, (t, o) in enumerate(zip(toks, opts))]
    return (lambda: score_prompts(eng, short, 4, SCORERS)), lm.model, b


def _mcqa_cloze(b: int):
    from whitebox_eval.mcqa.scoring import continuation_logprobs

    lm = tiny("llama", 2)
    eng = engine_of(lm)
    groups = _cloze_groups(b)
    return (lambda: continuation_logprobs(eng, groups)), lm.model, b


def _items(n: int):
    from whitebox_eval.tasks.items import MCQItem

    return [MCQItem(id=f"q{i}", question=f"What is {i} plus {i + 2}?", options=[str(2 * i + 2), str(i), str(i + 7), "9"],
                    gold=0) for i in range(n)]


def _formats(b: int):
    """formats' MCQ pass over b questions: one pass (``mcq_probabilities_batch``), or one per question
    where there is no batched form (the engine before its per-pass rewrite)."""
    try:
        from whitebox_eval.formats import study as fs  # where formats lives now (it was in mcqa/)
    except ImportError:
        from whitebox_eval.mcqa import formats_study as fs
    from whitebox_eval.internals.prefixes import PrefixCache

    lm = _text_model()
    eng = engine_of(lm)
    items = _items(b + 2)
    demos, qs = items[:2], items[2:]
    prefixes = PrefixCache(eng)
    if hasattr(fs, "mcq_probabilities_batch"):
        return (lambda: fs.mcq_probabilities_batch(eng, qs, demos, prefixes)), lm.model, b
    return (lambda: [fs.mcq_probabilities(eng, it, demos, prefixes) for it in qs]), lm.model, b


def _mui(b: int):
    from whitebox_eval.mui.keyneurons import KeyNeuronConfig, ScoredSequence, token_scores

    lm = tiny("llama", 2)
    eng = engine_of(lm)
    g = torch.Generator().manual_seed(3)
    seqs = [ScoredSequence(torch.randint(3, 512, (12 - i % 3,), generator=g).tolist(),
                           torch.randint(3, 512, (6,), generator=g).tolist()) for i in range(b)]
    return (lambda: token_scores(eng, seqs, KeyNeuronConfig())), lm.model, b


def _span(b: int):
    from whitebox_eval.attentionspan.evaluation import teacher_forced_pass
    from whitebox_eval.attentionspan.examples import string_reversal_example
    from whitebox_eval.attentionspan.tokenization import tokenize_example

    lm = _text_model()
    eng = engine_of(lm)
    tok = [tokenize_example(string_reversal_example("abcdefgh"[: 5 + i % 3]), lm.tokenizer) for i in range(b)]
    return (lambda: teacher_forced_pass(eng, tok, rollout=True)), lm.model, b


def _gar(b: int):
    from whitebox_eval.gar.generator import generate_gar
    from whitebox_eval.gar.roles import encode_examples
    from whitebox_eval.gar.scoring import score_batch
    from whitebox_eval.gar.tasks import enumerate_tasks

    lm = _text_model()
    eng = engine_of(lm)
    examples = generate_gar(enumerate_tasks()[:1], seed=0)[:b]
    enc = encode_examples(examples, lm.tokenizer)
    return (lambda: score_batch(eng, enc)), lm.model, b


def suite_counts(batches=(2, 8)) -> dict[str, dict[int, float]]:
    out = {}
    for name, make in suite_scenarios().items():
        out[name] = {}
        for b in batches:
            fn, model, items = make(b)
            c = counted(fn, model)
            out[name][b] = {"ops": c.total, "per_item": c.total / items, "syncs": c.ops["_local_scalar_dense"]
                            + c.ops["nonzero"] + c.ops["item"] + c.ops["equal"]}
    return out


# ---- the report --------------------------------------------------------------------------

def engine_table(families=tuple(FAMILIES), keeps=(None, 0)) -> dict:
    """Per family: plain, bare, gpu_check's set and the scorers, per layer and per pass, per path."""
    rows = {}
    for fam in families:
        base = profile(fam, bare)
        rows[fam] = {"plain": vars(profile(fam, plain())), "plain_no_cache": vars(profile(fam, plain(False))),
                     "bare": vars(base)}
        for keep in keeps:
            tag = "refs" if keep is None else "per-layer"
            try:
                rows[fam][f"gpu_check set ({tag})"] = vars(profile(fam, gpu_check_set, keep=keep))
                rows[fam][f"scorers ({tag})"] = vars(profile(fam, scorers, keep=keep))
            except Exception as e:  # an engine without keep_bytes: one path
                rows[fam][f"gpu_check set ({tag})"] = {"error": repr(e)}
    return rows


def predicted(rows: dict) -> dict:
    """White-box (the scorers' pass) over plain at gpu_check's full depths, batch 8: the op ratio."""
    out = {}
    for fam, r in rows.items():
        L = FULL_DEPTH[fam]
        p = r["plain"]
        plain_ops = p["per_layer"][8] * L + p["per_pass"][8]
        for key in [k for k in r if k.startswith("scorers")]:
            s = r[key]
            wb = s["per_layer"][8] * L + s["per_pass"][8]
            out.setdefault(fam, {})[key] = {"plain_ops": plain_ops, "whitebox_ops": wb, "ratio": round(wb / plain_ops, 3),
                                            "plain_ms": round(plain_ops * US_PER_OP / 1e3, 1),
                                            "whitebox_ms": round(wb * US_PER_OP / 1e3, 1)}
    return out


def _fmt(rows: dict) -> str:
    lines = ["| family | pass | per layer (B=2, 8) | per pass (B=2, 8) | syncs in forward (B=8) |", "|---|---|---|---|---|"]
    for fam, r in rows.items():
        for name, p in r.items():
            if "error" in p:
                lines.append(f"| {fam} | {name} | {p['error']} | | |")
                continue
            pl = ", ".join(f"{p['per_layer'][b]:g}" for b in BATCHES)
            pp = ", ".join(f"{p['per_pass'][b]:g}" for b in BATCHES)
            lines.append(f"| {fam} | {name} | {pl} | {pp} | {p['syncs'].get(8, {})} |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suites", action="store_true", help="each suite's main pass, ops per item, instead")
    ap.add_argument("--kinds", action="store_true", help="also every capture kind and edit, extra ops over bare")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    print(f"whitebox_eval from {Path(whitebox_eval.__file__).parent}", flush=True)
    out: dict = {"source": str(Path(whitebox_eval.__file__).parent)}
    if args.suites:
        out["suites"] = suite_counts()
        print("| suite | ops per item (B=2) | ops per item (B=8) | host reads (B=8) |\n|---|---|---|---|")
        for name, r in out["suites"].items():
            print(f"| {name} | {r[2]['per_item']:.0f} | {r[8]['per_item']:.0f} | {r[8]['syncs']} |")
    else:
        fams = args.families.split(",")
        out["engine"] = engine_table(fams)
        print(_fmt(out["engine"]))
        out["predicted"] = predicted(out["engine"])
        print(json.dumps(out["predicted"], indent=1))
        if args.kinds:
            out["kinds"] = {}
            for fam in fams:
                base = profile(fam, bare)
                for keep in (None, 0):
                    for name, sc in [*((f"capture:{p}", capture(p)) for p in registry()["captures"]),
                                     *edit_scenarios().items(), ("packed cloze", packed_cloze)]:
                        ref = profile(fam, packed_plain) if name == "packed cloze" else base
                        d = profile(fam, sc, keep=keep).minus(ref)
                        out["kinds"].setdefault(fam, {})[f"{name} ({'refs' if keep is None else 'per-layer'})"] = vars(d)
                        print(fam, name, "refs" if keep is None else "per-layer", d.per_layer, d.per_pass, flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
