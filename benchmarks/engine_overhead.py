"""How much does reading a model's internals cost on top of a plain forward pass?

One run, on the bundled models, with batches of realistic multiple-choice prompts
(a passage, a question, options A-D plus the two uncertainty options
"E. I don't know." and "F. None of the above.", then "Answer:"), zero-shot and
5-shot. The option-representative token of each option is the newline that ends
its line, so every prompt has 6 option positions. Methods, all timed on the same
left-padded batches and interleaved round by round:

  plain          HF forward, last-position logits only (``logits_to_keep=1``, SDPA)
  engine         the engine with no captures (cost of its attention registration)
  engine (a)     pre-RoPE q of all heads at the last position + k at the 6 option
                 positions in every layer, and all heads' QK-scores (paper 000 eq. 3,
                 q . k per head through the GQA map ``arch.kv_head(h)``)
  engine (b)     (a) + post-softmax attention rows of the last position, all heads,
                 and the Attention-scores at the option positions
  hf eager+attn  HF forward with ``output_attentions=True`` under eager attention
                 (what one does without the engine; gives attention, not pre-RoPE q/k)
  tl (a)/(b)     the same captures with TransformerLens: ``run_with_cache`` with a
                 names filter on ``hook_q``/``hook_k`` (``hook_q_normed``/``hook_k_normed``
                 where the family has a q/k norm) [+ ``hook_pattern``]. TransformerLens 4
                 (the line that installs beside transformers 5) removed ``HookedTransformer``;
                 its replacement ``TransformerBridge.boot_transformers(hf_model=...)`` is used
  nnsight (a)/(b) the same captures with nnsight (``LanguageModel`` around the HF model,
                 saving only the sliced rows; (b) switches that copy to eager attention,
                 the only implementation that returns attention weights)

Peers are optional: a method whose library is not installed is skipped with a note.
Each peer wraps its own copy of the weights (TransformerLens replaces the attention
modules of the model it is given and switches it to eager attention, which would
change what the other rows measure).

Before timing, the script asserts on one padded prompt that the engine's QK-scores
equal a direct computation from the HF model's own pre-RoPE q/k (hidden states ->
input norm -> q_proj/k_proj -> q/k norm), that its attention rows equal HF eager
``output_attentions``, and that its logits equal the plain forward's: the benchmark
cannot be fast by being wrong. Peer outputs are compared with the engine's and the
agreement is reported (not asserted).

Timing: every round runs every method once over all batches, in an order that
rotates from round to round; a method's time per batch is the median over rounds.
Three more columns resist CPU contention from other processes: "paired" is the
median of the per-round ratios to plain, "min x" the ratio of the fastest rounds
(contention only ever adds time), "cpu x" the ratio of median process CPU time.

Memory is measured in the last (untimed) warm-up round: freed heap memory is
returned to the OS (``malloc_trim``), the high-water mark reset through
``/proc/self/clear_refs``, then "peak RSS" is the process ``VmHWM`` during the
method's calls (it includes every loaded copy of the weights) and "+RSS" that peak
minus the resident size just before: the method's transient memory, heap
fragmentation included (glibc's; ``MALLOC_MMAP_THRESHOLD_=1048576`` removes most of it).

    python benchmarks/engine_overhead.py                       # both models, 0- and 5-shot
    python benchmarks/engine_overhead.py --models smollm2-135m --shots 0 --repeats 7
    python benchmarks/engine_overhead.py --methods plain,engine_a,engine_b

Benchmarks print ratios measured in one run; they never assert wall-clock times.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import random
import re
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # bundled models: nothing to fetch; peers must not hang on the network
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from whitebox_eval.internals import Capture, Engine  # noqa: E402
from whitebox_eval.models import load_model  # noqa: E402

TARGET_B = 1.15  # the issue's target: (b) <= 1.15 x plain
HUB_NAMES = {"smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct", "gemma3-270m": "google/gemma-3-270m"}
N_OPTIONS = 6
ALL_METHODS = ["plain", "engine", "engine_a", "engine_b", "hf_eager_attn", "tl_a", "tl_b", "nnsight_a", "nnsight_b"]
LABELS = {
    "plain": "plain forward (logits_to_keep=1)",
    "engine": "engine, no captures",
    "engine_a": "(a) engine: q,k + QK-scores",
    "engine_b": "(b) engine: (a) + attn rows",
    "hf_eager_attn": "HF eager, output_attentions",
    "tl_a": "(c) TransformerLens (a)",
    "tl_b": "(c) TransformerLens (b)",
    "nnsight_a": "(c) nnsight (a)",
    "nnsight_b": "(c) nnsight (b)",
}

# ------------------------------------------------------------------ prompts

NAMES = ["Amara Okafor", "Lukas Brandt", "Mei Tanaka", "Diego Alvarez", "Priya Raman", "Oskar Lind", "Fatima Haddad",
         "Tomasz Nowak", "Ingrid Solberg", "Kwame Mensah", "Elena Petrova", "Rafael Costa", "Hana Kim", "Jonas Weber",
         "Leila Farahani", "Mateo Rossi", "Sofia Lindqvist", "Arjun Mehta", "Chloe Dubois", "Yusuf Demir"]
CITIES = ["Lisbon", "Krakow", "Osaka", "Nairobi", "Montreal", "Valparaiso", "Tallinn", "Porto", "Hanoi", "Bergen",
          "Cordoba", "Tbilisi", "Adelaide", "Leipzig", "Accra", "Lyon", "Cusco", "Izmir", "Gdansk", "Dundee"]
FIELDS = ["marine biology", "civil engineering", "medieval history", "applied mathematics", "organic chemistry",
          "architecture", "economics", "linguistics", "astronomy", "geology", "music theory", "philosophy"]
JOBS = ["bridge inspector", "museum curator", "software tester", "ferry captain", "piano tuner", "bakery owner",
        "translator", "surveyor", "beekeeper", "lighthouse keeper", "radio presenter", "glassblower"]
PRODUCTS = ["wooden toys", "solar lanterns", "bicycle frames", "hand-made paper", "ceramic tiles", "rain jackets",
            "garden tools", "board games", "kayaks", "clocks", "telescopes", "violins"]
HOBBIES = ["restoring old radios", "long-distance swimming", "growing orchids", "chess problems", "bird photography",
           "rock climbing", "writing crossword puzzles", "collecting maps", "amateur astronomy", "baking sourdough"]
WEATHER = ["rainy", "windy", "mild", "foggy", "cold", "sunny", "humid"]
MONTHS = ["January", "March", "April", "June", "August", "October", "November"]


@dataclass
class MCQ:
    passage: str
    question: str
    options: list[str]  # A-D; E and F are the fixed uncertainty options
    gold: int


def make_mcq(rng: random.Random, n_sentences: int) -> MCQ:
    """A reading-comprehension item about a fictional person, its passage ``n_sentences`` long."""
    a, b = rng.sample(NAMES, 2)
    city, city2, city3, city4 = rng.sample(CITIES, 4)
    field_, job, product, hobby = rng.choice(FIELDS), rng.choice(JOBS), rng.choice(PRODUCTS), rng.choice(HOBBIES)
    year = rng.randint(1950, 1995)
    founded = year + rng.randint(25, 30)
    first = a.split()[0]
    facts = [
        f"{a} was born in {city} in {year}.",
        f"After finishing school, {first} studied {field_} at the university of {city2} for {rng.randint(3, 7)} years.",
        f"{first} later worked as a {job} in {city3}, where {first} met {b}.",
        f"In {founded}, {first} and {b} founded a small company that made {product}.",
        f"The company had {rng.randint(12, 480)} employees by {founded + rng.randint(3, 9)} and opened an office in {city4}.",
        f"{b.split()[0]} is known for {hobby} and once won a regional prize for it.",
        f"The weather in {city3} is usually {rng.choice(WEATHER)} in {rng.choice(MONTHS)}, which {first} never liked.",
        f"Friends say that {first} still visits {city} every {rng.choice(MONTHS)} to see the old neighbourhood.",
    ]
    passage = " ".join(facts[: max(1, min(n_sentences, len(facts)))])
    kind = rng.choice(["born", "studied", "product"] if n_sentences >= 4 else ["born", "studied"] if n_sentences >= 2 else ["born"])
    if kind == "born":
        question, right, pool = f"In which city was {a} born?", city, [c for c in CITIES if c != city]
    elif kind == "studied":
        question, right, pool = f"What did {first} study at university?", field_, [f for f in FIELDS if f != field_]
    else:
        question, right, pool = f"What did the company founded by {first} and {b} make?", product, [p for p in PRODUCTS if p != product]
    options = rng.sample(pool, 3)
    gold = rng.randrange(4)
    options.insert(gold, right)
    return MCQ(passage, question, options, gold)


def render(item: MCQ, answer: bool) -> tuple[str, list[int]]:
    """The item as text, and the character index of the newline ending each option line (A-F)."""
    head = f"Passage: {item.passage}\nQuestion: {item.question}\n"
    text, ends = head, []
    for letter, opt in zip("ABCDEF", [*item.options, "I don't know.", "None of the above."]):
        opt = opt if opt.endswith(".") else opt[0].upper() + opt[1:] + "."
        text += f"{letter}. {opt}"
        ends.append(len(text))
        text += "\n"
    text += "Answer:"
    if answer:
        text += f" {'ABCD'[item.gold]}\n\n"
    return text, ends


INSTRUCTION = "The following are multiple choice questions. Answer with the letter of the correct option.\n\n"


def build_prompts(tokenizer, n: int, shots: int, seed: int) -> tuple[list[str], list[list[int]], list[int]]:
    """``n`` prompts (each with ``shots`` identical demonstrations), their 6 option positions
    (unpadded token indices of the option-ending newlines) and their token counts."""
    rng = random.Random(seed)
    demo_rng = random.Random(seed + 10_000)
    prefix = INSTRUCTION + "".join(render(make_mcq(demo_rng, demo_rng.randint(1, 2)), answer=True)[0] for _ in range(shots))
    texts, positions, lengths = [], [], []
    for _ in range(n):
        body, ends = render(make_mcq(rng, rng.randint(3, 8)), answer=False)
        text = prefix + body
        enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        offsets = enc["offset_mapping"]
        pos = []
        for e in ends:
            c = len(prefix) + e  # the "\n" character ending this option line
            hits = [i for i, (s, t) in enumerate(offsets) if s <= c < t]
            if len(hits) != 1:
                raise RuntimeError(f"could not find the single token holding the newline at char {c}: {hits}")
            pos.append(hits[0])
        assert len(set(pos)) == N_OPTIONS and pos == sorted(pos), pos
        texts.append(text)
        positions.append(pos)
        lengths.append(len(enc["input_ids"]))
    return texts, positions, lengths


# ------------------------------------------------------------------ measurement helpers


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_mib() -> float:
    with open("/proc/self/status") as f:
        m = re.search(r"VmHWM:\s+(\d+) kB", f.read())
    return int(m.group(1)) / 1024 if m else float("nan")


def set_attn(model, name: str) -> None:
    """Point every config of ``model`` at attention implementation ``name`` (read at each forward)."""
    for cfg in {id(c): c for c in [model.config, *(m.config for m in model.modules() if hasattr(m, "config"))]}.values():
        cfg._attn_implementation = name


@contextlib.contextmanager
def attn_impl(model, name: str):
    old = model.config._attn_implementation
    set_attn(model, name)
    try:
        yield
    finally:
        set_attn(model, old)


def qk_scores(q: torch.Tensor, k: torch.Tensor, kv_index: torch.Tensor) -> torch.Tensor:
    """Paper 000 eq. 3 for every head: q [B, L, H, D] . k [B, L, O, Hkv, D] through the GQA map -> [B, L, H, O]."""
    return torch.einsum("blhd,blohd->blho", q, k[:, :, :, kv_index])


def version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


@dataclass
class Prepared:
    """One batch in every form the methods take (built before timing)."""

    batch: object  # whitebox_eval Batch
    positions: list[list[int]]  # unpadded option positions
    padded_pos: torch.Tensor  # [B, 6] padded option positions
    opt_pos: torch.Tensor  # [B, 6] unpadded, as a tensor
    n_tokens: int  # real (non-pad) tokens


@dataclass
class Result:
    logits: torch.Tensor
    qk: torch.Tensor | None = None  # [B, L, H, 6]
    attn: torch.Tensor | None = None  # [B, L, H, 6] attention of the last position to the options


@dataclass
class MethodStats:
    times: list[float] = field(default_factory=list)  # wall seconds per batch, one per round
    cpu: list[float] = field(default_factory=list)  # process CPU seconds per batch, one per round


# ------------------------------------------------------------------ methods


def family_parts(arch) -> tuple[str, str, Callable[[torch.Tensor, int], torch.Tensor]]:
    """Module names (relative to the attention module) holding pre-RoPE q and k, and a
    function turning their output into [B, S, heads, D] (mirrors the engine's hook sites)."""
    fam, D = arch.family, arch.head_dim
    if fam.q_norm is None:
        return fam.q_proj, fam.k_proj, lambda t, n: t.unflatten(-1, (n, D))
    layout = fam.qk_norm_layout
    if layout == "bshd":
        return fam.q_norm, fam.k_norm, lambda t, n: t
    if layout == "bhsd":
        return fam.q_norm, fam.k_norm, lambda t, n: t.transpose(1, 2)
    return fam.q_norm, fam.k_norm, lambda t, n: t.unflatten(-1, (n, D))


def make_methods(name: str, lm, eng: Engine, wanted: list[str], notes: list[str]) -> tuple[dict[str, Callable[[Prepared], Result]], list]:
    """The callables to time for one model (peers get their own copy of the weights)."""
    arch, model = lm.arch, lm.model
    kv_index = torch.tensor(arch.kv_head_map)
    L, H, Hkv = arch.n_layers, arch.n_heads, arch.n_kv_heads
    keep: list = []  # peer objects kept alive
    methods: dict[str, Callable[[Prepared], Result]] = {}

    def plain(p: Prepared) -> Result:
        b = p.batch
        with attn_impl(model, "sdpa"):
            out = model(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=b.position_ids,
                        logits_to_keep=1, use_cache=False)
        return Result(out.logits[:, -1])

    def engine_none(p: Prepared) -> Result:
        return Result(eng.run(p.batch).logits)

    def engine_a(p: Prepared) -> Result:
        tr = eng.run(p.batch, captures=[Capture("q", "last"), Capture("k", p.positions)])
        return Result(tr.logits, qk=qk_scores(tr["q"][:, :, 0], tr["k"], kv_index))

    def engine_b(p: Prepared) -> Result:
        tr = eng.run(p.batch, captures=[Capture("q", "last"), Capture("k", p.positions), Capture("attn", "last")])
        rows = tr["attn"][:, :, :, 0]  # [B, L, H, S] keys in unpadded coordinates
        att = rows.gather(-1, p.opt_pos[:, None, None, :].expand(-1, L, H, -1))
        return Result(tr.logits, qk=qk_scores(tr["q"][:, :, 0], tr["k"], kv_index), attn=att)

    def hf_eager_attn(p: Prepared) -> Result:
        b = p.batch
        with attn_impl(model, "eager"):
            out = model(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=b.position_ids,
                        logits_to_keep=1, use_cache=False, output_attentions=True)
        rows = torch.stack([a[:, :, -1] for a in out.attentions], 1)  # [B, L, H, S] padded
        att = rows.gather(-1, p.padded_pos[:, None, None, :].expand(-1, L, H, -1))
        return Result(out.logits[:, -1], attn=att)

    methods.update(plain=plain, engine=engine_none, engine_a=engine_a, engine_b=engine_b, hf_eager_attn=hf_eager_attn)

    # ---- TransformerLens
    if any(m.startswith("tl_") for m in wanted):
        if version("transformer-lens") is None:
            notes.append("TransformerLens not installed (pip install transformer-lens): tl rows skipped")
        else:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    from transformer_lens.model_bridge import TransformerBridge

                    tl_lm = load_model(name, attn_implementation="eager")
                    bridge = TransformerBridge.boot_transformers(HUB_NAMES[name], hf_model=tl_lm.model, tokenizer=tl_lm.tokenizer, device="cpu")
                keep.append(bridge)
                notes.append(
                    f"TransformerLens {version('transformer-lens')}: HookedTransformer was removed in 4.0, so the rows use "
                    "its replacement TransformerBridge.boot_transformers(hf_model=<own copy>), which forces eager attention; "
                    "run_with_cache(names_filter=...) caches every position, then we slice"
                )

                # pre-RoPE q/k: hook_q/hook_k [B, S, H, D]; with a q/k norm (gemma3) they are the raw
                # projections and the normed ones are hook_q_normed/hook_k_normed [B, H, S, D]
                if arch.family.q_norm is None:
                    q_hook, k_hook, tl_view = "attn.hook_q", "attn.hook_k", (lambda t: t)
                else:
                    q_hook, k_hook, tl_view = "attn.hook_q_normed", "attn.hook_k_normed", (lambda t: t.transpose(1, 2))
                missing = [h for h in (q_hook, k_hook, "attn.hook_pattern") if f"blocks.0.{h}" not in bridge.hook_dict]
                if missing:
                    raise RuntimeError(f"hook points {missing} not found")
                notes.append(f"TransformerLens hooks: {q_hook}, {k_hook}, attn.hook_pattern")

                def tl_run(p: Prepared, pattern: bool) -> Result:
                    b = p.batch
                    suffixes = (q_hook, k_hook, "attn.hook_pattern") if pattern else (q_hook, k_hook)
                    logits, cache = bridge.run_with_cache(
                        b.input_ids, attention_mask=b.attention_mask, position_ids=b.position_ids,
                        names_filter=lambda n: n.endswith(suffixes), logits_to_keep=1, use_cache=False)
                    bi = torch.arange(b.size)[:, None]
                    q = torch.stack([tl_view(cache[f"blocks.{l}.{q_hook}"])[:, -1] for l in range(L)], 1)
                    k = torch.stack([tl_view(cache[f"blocks.{l}.{k_hook}"])[bi, p.padded_pos] for l in range(L)], 1)
                    res = Result(logits[:, -1], qk=qk_scores(q, k, kv_index))
                    if pattern:
                        rows = torch.stack([cache[f"blocks.{l}.attn.hook_pattern"][:, :, -1] for l in range(L)], 1)
                        res.attn = rows.gather(-1, p.padded_pos[:, None, None, :].expand(-1, L, H, -1))
                    return res

                methods["tl_a"] = lambda p: tl_run(p, False)
                methods["tl_b"] = lambda p: tl_run(p, True)
            except Exception as e:  # a peer failing must not sink the benchmark
                notes.append(f"TransformerLens failed to wrap {name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")

    # ---- nnsight
    if any(m.startswith("nnsight_") for m in wanted):
        if version("nnsight") is None:
            notes.append("nnsight not installed (pip install nnsight): nnsight rows skipped")
        else:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    from nnsight import LanguageModel

                    nn_lm = load_model(name)  # SDPA; switched to eager for (b), which needs the weights
                    nn_model = LanguageModel(nn_lm.model, tokenizer=nn_lm.tokenizer)
                keep.append(nn_model)
                q_name, k_name, nn_view = family_parts(arch)
                fam = arch.family
                notes.append(f"nnsight {version('nnsight')}: LanguageModel(<own copy>); (a) under SDPA, (b) under eager "
                             "(attention weights come only from eager); saves only the sliced rows")

                def envoy(path: str, root):
                    for part in path.split("."):
                        root = getattr(root, part)
                    return root

                def nn_run(p: Prepared, pattern: bool) -> Result:
                    b = p.batch
                    bi = torch.arange(b.size)[:, None]
                    qs, ks, rows = [], [], []
                    ctx = attn_impl(nn_lm.model, "eager") if pattern else contextlib.nullcontext()
                    with ctx, warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        with nn_model.trace({"input_ids": b.input_ids, "attention_mask": b.attention_mask,
                                             "position_ids": b.position_ids}, logits_to_keep=1, use_cache=False):
                            layers = envoy(fam.layers, nn_model)
                            for l in range(L):
                                attn = envoy(fam.attention, layers[l])
                                qs.append(nn_view(envoy(q_name, attn).output, H)[:, -1].save())
                                ks.append(nn_view(envoy(k_name, attn).output, Hkv)[bi, p.padded_pos].save())
                                if pattern:
                                    rows.append(attn.output[1][:, :, -1].save())
                            logits = nn_model.output.logits[:, -1].save()
                    res = Result(logits, qk=qk_scores(torch.stack(qs, 1), torch.stack(ks, 1), kv_index))
                    if pattern:
                        res.attn = torch.stack(rows, 1).gather(-1, p.padded_pos[:, None, None, :].expand(-1, L, H, -1))
                    return res

                methods["nnsight_a"] = lambda p: nn_run(p, False)
                methods["nnsight_b"] = lambda p: nn_run(p, True)
            except Exception as e:
                notes.append(f"nnsight failed to wrap {name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return {m: methods[m] for m in wanted if m in methods}, keep


# ------------------------------------------------------------------ correctness


def direct_qk_and_attn(lm, text: str, positions: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """QK-scores [L, H, 6], last-row attention [L, H, S] and last logits of one prompt, straight
    from the HF eager model: hidden states entering each block -> input norm -> q_proj/k_proj ->
    q/k norm (pre-RoPE), no engine involved."""
    model, arch = lm.model, lm.arch
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.no_grad(), attn_impl(model, "eager"):
        out = model(input_ids=ids, output_hidden_states=True, output_attentions=True, use_cache=False)
        scores = []
        for l in range(arch.n_layers):
            block, attn = arch.blocks[l], arch.attention(l)
            x = block.input_layernorm(out.hidden_states[l])
            q = attn.q_proj(x).unflatten(-1, (arch.n_heads, arch.head_dim))
            k = attn.k_proj(x).unflatten(-1, (arch.n_kv_heads, arch.head_dim))
            if arch.family.q_norm is not None:  # RMS norms over head_dim: the layout does not matter
                q, k = attn.q_norm(q), attn.k_norm(k)
            q_last, k_opt = q[0, -1], k[0, positions]  # [H, D], [6, Hkv, D]
            scores.append(torch.stack([k_opt[:, arch.kv_head(h)] @ q_last[h] for h in range(arch.n_heads)]))
        attn_rows = torch.stack([a[0, :, -1] for a in out.attentions])
    return torch.stack(scores), attn_rows, out.logits[0, -1]


def verify(lm, eng: Engine, methods, prepared: Prepared, texts: list[str]) -> dict:
    """Assert the engine against the direct computation on the most padded prompt of the batch."""
    b = prepared.batch
    i = int(b.lengths.argmin())
    n = int(b.lengths[i])
    ref_qk, ref_attn, ref_logits = direct_qk_and_attn(lm, texts[i], prepared.positions[i])
    with torch.no_grad():
        ra, rb, rp = methods["engine_a"](prepared), methods["engine_b"](prepared), methods["plain"](prepared)
        rows = eng.run(b, captures=[Capture("attn", "last")])["attn"][i, :, :, 0, :n]  # [L, H, n], unpadded keys
    scale = ref_qk.abs().max().item()
    err_qk = (ra.qk[i] - ref_qk).abs().max().item()
    assert err_qk <= 1e-3 * scale + 1e-4, f"engine QK-scores differ from the direct computation: max |diff| {err_qk:.3g} (scale {scale:.3g})"
    assert torch.equal(ra.qk, rb.qk), "(a) and (b) give different QK-scores"
    err_attn = (rows - ref_attn).abs().max().item()
    assert err_attn <= 1e-4, f"engine attention rows differ from HF eager output_attentions: max |diff| {err_attn:.3g}"
    err_opt = (rb.attn[i] - ref_attn[:, :, prepared.positions[i]]).abs().max().item()
    assert err_opt <= 1e-4, f"engine Attention-scores at the options differ from HF eager: max |diff| {err_opt:.3g}"
    err_logits = (ra.logits - rp.logits).abs().max().item()
    assert err_logits <= 1e-3, f"engine logits differ from the plain forward: max |diff| {err_logits:.3g}"
    err_ref_logits = (rp.logits[i] - ref_logits).abs().max().item()
    return {"prompt_index": i, "prompt_tokens": n, "pad_tokens": int(b.seq_len - n), "qk_max_abs_diff": err_qk,
            "qk_scale": scale, "attn_row_max_abs_diff": err_attn, "engine_vs_plain_logits_max_abs_diff": err_logits,
            "plain_padded_vs_unpadded_eager_logits_max_abs_diff": err_ref_logits}


def agreement(ref: Result, other: Result) -> str:
    """Max relative difference of a peer's QK-/attention-scores and logits from the engine's (b)."""
    parts = []
    for what in ("qk", "attn", "logits"):
        a, b = getattr(ref, what), getattr(other, what)
        if a is None or b is None:
            continue
        rel = ((a - b).abs().max() / a.abs().max().clamp_min(1e-12)).item()
        parts.append(f"{what} {rel:.0e}")
    return ", ".join(parts)


# ------------------------------------------------------------------ main


def prime(eng: Engine, methods) -> None:
    """One call of every method on a tiny batch: first touches of each copy of the weights and
    lazy set-up happen here, not in the memory-measuring or timed rounds."""
    texts = ["one two three four five six seven eight nine ten", "one two three four five six seven eight"]
    batch = eng.batch(texts)
    pos = [[1, 2, 3, 4, 5, 6]] * 2
    opt = torch.tensor(pos)
    p = Prepared(batch, pos, batch.padded(opt), opt, int(batch.lengths.sum()))
    with torch.no_grad():
        for fn in methods.values():
            fn(p)


def malloc_trim() -> None:
    """Give freed heap memory back to the OS, so that the next peak RSS is the method's own."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


def run_config(lm, eng, methods, prepared: list[Prepared], texts_per_batch, args) -> dict:
    n_tokens = sum(p.n_tokens for p in prepared)
    nb = len(prepared)
    print("  verifying the engine on the most padded prompt of batch 1 ...", flush=True)
    check = verify(lm, eng, methods, prepared[0], texts_per_batch[0])
    print(f"  ok: QK-scores max |diff| {check['qk_max_abs_diff']:.1e} (scores up to {check['qk_scale']:.0f}), "
          f"attention rows {check['attn_row_max_abs_diff']:.1e}, logits engine vs plain {check['engine_vs_plain_logits_max_abs_diff']:.1e}")
    order = list(methods)
    have_peak = reset_peak()
    memory: dict[str, tuple[float, float]] = {}
    first: dict[str, Result] = {}
    for w in range(max(args.warmup, 1)):  # the last warm-up round also measures memory and agreement
        last = w == max(args.warmup, 1) - 1
        for m in order:
            if last:
                gc.collect()
                malloc_trim()
                before = rss_mib()
                reset_peak()
            with torch.no_grad():
                for j, p in enumerate(prepared):
                    r = methods[m](p)
                    if last and j == 0:
                        first[m] = r
            if last:
                peak = peak_mib() if have_peak else float("nan")
                memory[m] = (peak, peak - before)
    agree = {m: agreement(first["engine_b"], first[m]) for m in order if m not in ("plain", "engine", "engine_a", "engine_b")}
    del first
    stats = {m: MethodStats() for m in order}
    for r in range(args.repeats):
        rot = order[r % len(order):] + order[: r % len(order)]  # interleave, rotating who goes first
        for m in rot:
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            with torch.no_grad():
                for p in prepared:
                    methods[m](p)
            stats[m].times.append((time.perf_counter() - t0) / nb)
            stats[m].cpu.append((time.process_time() - c0) / nb)
    base = statistics.median(stats["plain"].times)
    base_cpu = statistics.median(stats["plain"].cpu)
    rows = {}
    for m in order:
        med, cpu = statistics.median(stats[m].times), statistics.median(stats[m].cpu)
        rows[m] = {
            "label": LABELS[m],
            "median_ms_per_batch": med * 1e3,
            "ratio_vs_plain": med / base,
            "paired_ratio_vs_plain": statistics.median(t / b for t, b in zip(stats[m].times, stats["plain"].times)),
            "min_ratio_vs_plain": min(stats[m].times) / min(stats["plain"].times),
            "cpu_ratio_vs_plain": cpu / base_cpu,
            "tokens_per_s": n_tokens / nb / med,
            "peak_rss_mib": memory[m][0],
            "extra_rss_mib": memory[m][1],
            "wall_ms_per_round": [t * 1e3 for t in stats[m].times],
            "cpu_ms_per_round": [t * 1e3 for t in stats[m].cpu],
            "agreement_with_engine_b": agree.get(m),
        }
    return {"verification": check, "methods": rows, "n_batches": nb, "real_tokens": n_tokens,
            "padded_tokens": sum(p.batch.size * p.batch.seq_len for p in prepared)}


def print_table(title: str, res: dict) -> None:
    print(f"\n{title}")
    hdr = (f"  {'method':<32} {'ms/batch':>9} {'x plain':>8} {'paired':>7} {'min x':>6} {'cpu x':>6} {'tok/s':>7} "
           f"{'peak RSS':>9} {'+RSS':>6}  agreement with (b), max rel. diff")
    print(hdr)
    print("  " + "-" * (len(hdr) + 4))
    for m, r in res["methods"].items():
        print(f"  {r['label']:<32} {r['median_ms_per_batch']:9.0f} {r['ratio_vs_plain']:8.2f} {r['paired_ratio_vs_plain']:7.2f} "
              f"{r['min_ratio_vs_plain']:6.2f} {r['cpu_ratio_vs_plain']:6.2f} {r['tokens_per_s']:7.0f} {r['peak_rss_mib']:8.0f}M {r['extra_rss_mib']:5.0f}M  "
              f"{r['agreement_with_engine_b'] or ''}")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="engine_overhead.py",
        description=(
            "Time the whitebox engine against a plain forward pass (= 1.00), HF eager attention "
            "output and peers (TransformerLens, nnsight, when installed) on batches of multiple-choice "
            "prompts with 6 options (A-D, 'E. I don't know.', 'F. None of the above.'). Prints, per model "
            "and shot count, the median ms per batch, the ratio to plain, tokens/s and peak RSS, and "
            "writes everything to a JSON file. Correctness of the engine's QK-scores and attention rows "
            "is asserted against a direct computation before timing."
        ),
        epilog=(
            "Methods (--methods): plain, engine (no captures), engine_a ((a): pre-RoPE q at the last "
            "position + k at the 6 option positions, all layers, and all heads' QK-scores), engine_b ((b): "
            "(a) + last-position attention rows), hf_eager_attn (HF output_attentions=True under eager), "
            "tl_a, tl_b (TransformerLens), nnsight_a, nnsight_b. Target from the issue: (b) <= 1.15 x plain. "
            "Time per batch is the median over --repeats rounds (all methods interleaved in each round, "
            "after --warmup rounds) of the round's time divided by the number of batches. 'paired' is the "
            "median of per-round ratios, 'min x' the ratio of the fastest rounds and 'cpu x' the ratio of "
            "median process CPU time, all steadier when other processes compete for the CPU; raise --repeats "
            "when they disagree. A default run takes "
            "about 5 minutes on 2 idle CPU cores (TransformerLens and nnsight rows included)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--models", default="smollm2-135m,gemma3-270m",
                    help="comma-separated bundled names or any spec load_model accepts (default: %(default)s); "
                         "peers need a known hub name, so they run on the bundled models only")
    ap.add_argument("--batch-size", type=int, default=4, help="prompts per batch, left-padded (default: %(default)s)")
    ap.add_argument("--n-prompts", type=int, default=4,
                    help="prompts per (model, shots) configuration, split into batches of --batch-size; "
                         "each timed round runs them all (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed rounds; every method runs once per round, in rotating order (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed rounds before timing, at least 1: the last one measures memory and the peers' "
                         "agreement with the engine (default: %(default)s)")
    ap.add_argument("--shots", default="0,5",
                    help="comma-separated demonstration counts: 0 gives ~100-250-token prompts, 5 prepends 5 "
                         "answered demonstrations, identical for every prompt (default: %(default)s)")
    ap.add_argument("--methods", default=",".join(ALL_METHODS),
                    help="comma-separated subset of the methods listed below; plain, engine_a and engine_b always run "
                         "(they anchor the ratios and the correctness check) (default: all)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the prompt generator (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    ap.add_argument("--out", default="benchmarks/results/engine_overhead.json",
                    help="JSON file for all numbers, folder created if needed (default: %(default)s)")
    args = ap.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.shots = [int(s) for s in args.shots.split(",") if s.strip()]
    wanted = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in wanted if m not in ALL_METHODS]
    if bad:
        ap.error(f"unknown method(s) {bad}; choose from {', '.join(ALL_METHODS)}")
    args.methods = [m for m in ALL_METHODS if m in wanted or m in ("plain", "engine_a", "engine_b")]
    if args.batch_size < 1 or args.n_prompts < 1 or args.repeats < 1:
        ap.error("--batch-size, --n-prompts and --repeats must be positive")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t_start = time.time()
    env = {
        "python": platform.python_version(), "torch": torch.__version__, "transformers": version("transformers"),
        "transformer_lens": version("transformer-lens"), "nnsight": version("nnsight"),
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(), "machine": platform.machine(),
        "processor": _cpu_name(),
    }
    print(f"torch {env['torch']}, transformers {env['transformers']}, {env['torch_threads']} threads on {env['cpu_count']} CPUs "
          f"({env['processor']}); TransformerLens {env['transformer_lens'] or 'not installed'}, nnsight {env['nnsight'] or 'not installed'}")
    report = {"config": {k: v for k, v in vars(args).items()}, "environment": env, "target_b_ratio": TARGET_B, "results": {}}
    summary = []
    for name in args.models:
        print(f"\n=== {name}: loading ...", flush=True)
        t0 = time.time()
        try:
            lm = load_model(name)
        except Exception as e:  # e.g. a bundled model whose weights package is not installed
            print(f"  skipped: {type(e).__name__}: {e}")
            report["results"][name] = {"skipped": f"{type(e).__name__}: {e}"}
            continue
        eng = Engine(lm)
        notes: list[str] = []
        wanted = [m for m in args.methods if not (m.startswith(("tl_", "nnsight_")) and name not in HUB_NAMES)]
        if len(wanted) < len(args.methods):
            notes.append(f"peers skipped: no hub name known for {name}")
        methods, keep = make_methods(name, lm, eng, wanted, notes)
        prime(eng, methods)
        a = lm.arch
        print(f"  {a.family.name}: {a.n_layers} layers x {a.n_heads} heads ({a.n_kv_heads} kv), head_dim {a.head_dim}; "
              f"loaded in {time.time() - t0:.0f} s")
        for note in notes:
            print(f"  note: {note}")
        report["results"][name] = {"arch": a.describe(), "notes": notes, "shots": {}}
        for shots in args.shots:
            texts, positions, lengths = build_prompts(lm.tokenizer, args.n_prompts, shots, args.seed)
            prepared, texts_per_batch = [], []
            for s in range(0, len(texts), args.batch_size):
                bt, bp = texts[s:s + args.batch_size], positions[s:s + args.batch_size]
                batch = eng.batch(bt)
                ids = [lm.tokenizer(t)["input_ids"] for t in bt]
                for j, row in enumerate(ids):  # the positions were found on exactly these tokens
                    assert batch.input_ids[j, batch.seq_len - len(row):].tolist() == row
                opt = torch.tensor(bp)
                prepared.append(Prepared(batch, bp, batch.padded(opt), opt, int(batch.lengths.sum())))
                texts_per_batch.append(bt)
            load = os.getloadavg()
            print(f"\n--- {name}, {shots}-shot: {len(texts)} prompts of {min(lengths)}-{max(lengths)} tokens "
                  f"(median {statistics.median(lengths):.0f}), {len(prepared)} batch(es) of <= {args.batch_size}; "
                  f"load average {load[0]:.1f}", flush=True)
            if load[0] > (os.cpu_count() or 1):
                print(f"  warning: the load average exceeds the {os.cpu_count()} CPUs: other processes compete; trust "
                      "'paired', 'min x' and 'cpu x' more than the medians, or raise --repeats")
            res = run_config(lm, eng, methods, prepared, texts_per_batch, args)
            res["load_average_before_after"] = [load[0], os.getloadavg()[0]]
            res["prompt_tokens"] = {"min": min(lengths), "max": max(lengths), "median": statistics.median(lengths)}
            report["results"][name]["shots"][str(shots)] = res
            print_table(f"{name}, {shots}-shot, batch {args.batch_size}, {args.repeats} rounds (median ms per batch; "
                        f"plain = 1.00)", res)
            rb = res["methods"]["engine_b"]["ratio_vs_plain"]
            summary.append((name, shots, rb, res["methods"]["engine_b"]["paired_ratio_vs_plain"],
                            res["methods"]["engine_b"]["min_ratio_vs_plain"]))
            write_report(report, args.out)  # after every configuration: an interrupted run keeps what it measured
        del methods, keep, eng, lm
        gc.collect()
    print("\nTarget (b) <= %.2f x plain:" % TARGET_B)
    for name, shots, rb, paired, rmin in summary:
        print(f"  {name:<14} {shots}-shot: (b) = {rb:.2f} x plain (paired {paired:.2f}, fastest rounds {rmin:.2f}): "
              f"{'meets' if rb <= TARGET_B else 'MISSES'} the target")
    report["summary"] = [{"model": n, "shots": s, "engine_b_ratio": r, "engine_b_paired_ratio": p, "engine_b_min_ratio": mn,
                          "meets_target": r <= TARGET_B} for n, s, r, p, mn in summary]
    report["elapsed_s"] = time.time() - t_start
    write_report(report, args.out)
    print(f"\nwrote {args.out} ({report['elapsed_s']:.0f} s in all)")
    return 0


def write_report(report: dict, path: str) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".partial")
    tmp.write_text(json.dumps(report, indent=2))
    tmp.replace(out)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
        return m.group(1).strip() if m else platform.processor()
    except OSError:
        return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
