"""One short GPU call that checks what the CPU tests can only simulate (fits a 10-minute call).

Steps (each timed; a failing step is recorded and the next one runs; exit status 1 if any failed):

1. ``engine_parity``: tiny random models of every family, CUDA float32 against CPU float32 (TF32
   off): every capture point and edit, packed scoring (``continuation_logprobs``), a cached prefix,
   cached generation under an edit (gemma3's 4-token sliding window binds);
2. ``bf16_attention_rows``: captured attention rows of a bf16 model against float32 on the CPU;
3. ``sdpa_backends``: each SDPA backend (flash, efficient, cuDNN) against the math one, unpadded
   and left-padded (a backend that refuses the inputs is reported, not failed);
4. ``device_split``: the last layer, final norm and head on the CPU, the rest on the GPU (what a
   device map does over two devices): mcqa scorers and cloze, SAE fidelity, MUI contribution
   and IG equal the unsplit model's; then accelerate's own dispatch with layers offloaded to the
   CPU and disk (read through its hooks): logit lens and MUI; and SAE training on the GPU
   against the CPU's (span's rollout on a GPU tensor runs in step 5);
5. ``suite_clis``: the suites' commands on a random-weight SmolLM2-135M-shaped bf16 checkpoint
   (its real tokenizer): mcqa 2-shot and cloze, span with rollout and fine-tuning, mui with IG,
   gar truth-heads, and a 2-rank torchrun of mcqa against one process (same results);
6. ``gpu_check_8b``: ``benchmarks/gpu_check.py`` at Llama-3-8B shapes (logits, overhead, peak).

GPU time, estimated from the steps on one H100 (process starts dominate): CUDA start and tiny
checks ~40 s (steps 1-4); six CLI runs of a 135M model, ~20-30 s each with the start of a process
that imports torch and initialises CUDA, and the 2-rank torchrun ~60 s: ~4 min; the 8B check
~1.5 min (random init on the GPU, 3 repeats); wheel install ~30 s. Total ~7 min; ``--budget``
(default 540 s) skips the steps that would not fit, recording them as skipped.

Prepare once, here (needs the bundled SmolLM2 and the network to PyPI)::

    python benchmarks/gpu_smoke.py --prepare benchmarks/gpu_smoke_assets

writes the SmolLM2 tokenizer and ``pip download``s the pinned wheels (this environment's
transformers, huggingface_hub, tokenizers, safetensors, accelerate, gguf and what they need, but
torch, numpy and CUDA's packages, which the image's torch brings; compiled ones for CPython
3.10-3.13) into ``wheels/`` there, with ``pins.txt`` and ``missing.txt``. The folder is
git-ignored: the device call carries it (``carry=["benchmarks/gpu_smoke_assets"]``, ~45 MB).
On the GPU machine::

    python benchmarks/gpu_smoke.py --assets benchmarks/gpu_smoke_assets --out $OUT

When the image's transformers is not the pinned one, the wheels are installed into
``<assets>/site`` (``pip --no-index --no-deps --target``) and the script starts again with that
folder first on ``PYTHONPATH`` (which the suites' processes inherit). ``--cpu`` runs every step
on the CPU at tiny sizes (CI, ``tests/test_gpu_smoke.py``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))  # tiny_models: the tests' tiny random models of every family

PINNED = ("transformers", "huggingface_hub", "tokenizers", "safetensors", "accelerate", "gguf")
SMOLLM2 = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, rope_theta=100000.0, rms_norm_eps=1e-5, max_position_embeddings=8192,
               tie_word_embeddings=True)
TINY_SMOLLM2 = dict(SMOLLM2, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2)


# ---------------------------------------------------------------- assets and the pinned wheels
def pinned_closure() -> list[str]:
    """``name==version`` of :data:`PINNED` and everything they need here, but torch, numpy and CUDA's
    own packages (the GPU image's torch brings those): what the carried wheels hold."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins, todo = {}, list(PINNED)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in pins or name in ("torch", "numpy", "triton") or name.startswith("nvidia-"):
            continue
        pins[name] = metadata.version(name)
        for text in metadata.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [f"{n}=={v}" for n, v in sorted(pins.items())]


def prepare(assets: Path) -> None:
    """The SmolLM2 tokenizer and the pinned wheels, for a GPU machine without either. Compiled
    wheels are also fetched for the other CPython versions an image may have (3.10-3.13, x86-64
    Linux), each where the index has it; ``missing.txt`` lists the ones it has not."""
    from whitebox_eval.models import load_model

    load_model("smollm2-135m", device="cpu").tokenizer.save_pretrained(assets / "tokenizer")
    pins, wheels = pinned_closure(), assets / "wheels"
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(wheels)]
    subprocess.run([*pip, *pins], check=True)  # this Python's wheels: all must exist
    compiled = sorted({w.name.split("-")[0] for w in wheels.glob("*.whl") if not w.name.endswith("-none-any.whl")})
    missing = []
    for py in ("3.10", "3.11", "3.12", "3.13"):
        for pin in pins:
            if pin.split("==")[0].replace("-", "_") in compiled and subprocess.run(
                    [*pip, "--python-version", py, "--platform", "manylinux_2_28_x86_64", "--platform",
                     "manylinux2014_x86_64", pin], capture_output=True).returncode:
                missing.append(f"{pin} for CPython {py}")
    (assets / "pins.txt").write_text("\n".join(pins) + "\n")
    (assets / "missing.txt").write_text("".join(m + "\n" for m in missing))


def use_pinned_wheels(assets: Path) -> None:
    """Install the carried wheels beside the image's packages and start again, where they differ."""
    pins = (assets / "pins.txt").read_text().split() if (assets / "pins.txt").is_file() else []
    wanted = dict(p.split("==") for p in pins if p.split("==")[0] in PINNED)
    have = {}
    for name in wanted:
        try:
            have[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            have[name] = None
    if all(have[n] == v for n, v in wanted.items()) or os.environ.get("WHITEBOX_SMOKE_PINNED"):
        return
    site = assets / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target", str(site),
                    "--find-links", str(assets / "wheels"), *pins], check=True)
    env = {**os.environ, "WHITEBOX_SMOKE_PINNED": "1",
           "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    print(f"pinned wheels installed ({', '.join(f'{n} {have[n]} -> {v}' for n, v in wanted.items() if have[n] != v)}); "
          "starting again", flush=True)
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


# ---------------------------------------------------------------- comparisons
def moved(lm, device: str, dtype=None):
    """A copy of ``lm`` on ``device`` (in ``dtype``), described afresh (its own modules)."""
    from whitebox_eval.models.architectures import Architecture

    out = copy.copy(lm)
    out.model = copy.deepcopy(lm.model).to(device, dtype)
    out.arch = Architecture.of(out.model)
    return out


def close(got, want, atol: float, rtol: float = 1e-4, what: str = "") -> float:
    """Largest absolute difference; raises AssertionError beyond the tolerance."""
    import numpy as np
    import torch

    g = got.detach().float().cpu() if isinstance(got, torch.Tensor) else torch.as_tensor(np.asarray(got, dtype=float))
    w = want.detach().float().cpu() if isinstance(want, torch.Tensor) else torch.as_tensor(np.asarray(want, dtype=float))
    torch.testing.assert_close(g, w.to(g.dtype), atol=atol, rtol=rtol, equal_nan=True, msg=lambda m: f"{what}: {m}")
    finite = torch.isfinite(w)
    return float((g - w)[finite].abs().max()) if finite.any() else 0.0


def _requests(arch, batch_size: int, seq: int):
    import torch

    from whitebox_eval.internals import Capture, EditAttention, MaskNeurons, Patch, ScaleHeads, cells_from_pairs

    points = ["q_proj", "k_proj", "q", "k", "v", "q_rot", "k_rot", "attn", "head_out", "mlp_act", "mlp_gate_act",
              "resid_pre", "resid"]
    captures = [Capture(p, "last") for p in points] + [Capture("attn_full", name="full"), Capture("attn_mean")]
    cells = cells_from_pairs(batch_size, seq, [[(seq - 1, 2)], [(4, 1)]])
    edits = [ScaleHeads(0, [1], 0.5), MaskNeurons(1, [3, 7]), EditAttention(1, [0], cells, mode="force"),
             EditAttention(0, [2], cells, mode="copy_head", source_head=3), EditAttention(2, [1], cells, mode="add", value=0.1),
             Patch("resid", 1, "last", torch.full((batch_size, 1, arch.d_model), 0.1))]
    return captures, edits


def step_engine_parity(device: str) -> str:
    """CUDA float32 against CPU float32, every family."""
    import torch
    from tiny_models import FAMILY_NAMES, tiny_loaded

    from whitebox_eval.internals import Engine, batch_from_ids
    from whitebox_eval.internals.generation import generate
    from whitebox_eval.mcqa.scoring import continuation_logprobs

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ids = [[5, 9, 17, 33, 2, 41, 7, 12, 20, 11, 30, 8], [3, 8, 21, 30, 11, 6, 40]]
    worst = {}
    for family in FAMILY_NAMES:
        cpu = tiny_loaded(family)
        gpu = moved(cpu, device)
        engines = Engine(cpu), Engine(gpu)
        batch = batch_from_ids(ids)
        captures, edits = _requests(cpu.arch, 2, 12)
        a, b = (e.run(batch.to(e.loaded.device), captures, edits, logits="all") for e in engines)
        d = close(b.logits, a.logits, 1e-4, what=f"{family} logits")
        for c in captures:
            d = max(d, close(b[c.key], a[c.key], 1e-4, what=f"{family} {c.key}"))
        groups = [[([5, 9, 17, 33], [2, 41]), ([5, 9, 17, 33], [7])], [([3, 8, 21], [30, 11, 6])]]
        d = max(d, close(continuation_logprobs(engines[1], groups), continuation_logprobs(engines[0], groups), 1e-4,
                         what=f"{family} packed"))
        demo = [5, 9, 17, 33, 2, 41, 7, 12]
        with_demo = [[(demo + [20, 11], [30]), (demo + [20, 11], [31, 4])], [(demo + [7], [9])]]
        for i, e in enumerate(engines):  # a cached prefix (packed: exact under any sliding window) = the whole pass
            whole = continuation_logprobs(e, with_demo)
            d = max(d, close(continuation_logprobs(e, with_demo, prefix=e.prefix(demo)), whole, 1e-4,
                             what=f"{family} prefix ({'cpu' if i == 0 else device})"))
        gen = [generate(e, ids, max_new_tokens=8, stop_ids=[], edits=[edits[0]]) for e in engines]
        assert [g.ids for g in gen[1]] == [g.ids for g in gen[0]], f"{family}: cached generation differs"
        worst[family] = d
    return "max |diff| " + ", ".join(f"{f} {v:.1e}" for f, v in worst.items())


def step_bf16_rows(device: str) -> str:
    import torch
    from tiny_models import tiny_loaded

    from whitebox_eval.internals import Capture, Engine, batch_from_ids

    cpu = tiny_loaded("llama")
    half = moved(cpu, device, torch.bfloat16)
    batch = batch_from_ids([[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21]])
    want = Engine(cpu).run(batch, [Capture("attn", [-1, -2])])["attn"]
    got = Engine(half).run(batch.to(device), [Capture("attn", [-1, -2])])["attn"]
    assert got.dtype == torch.float32  # handed out in float32 whatever the weights
    close(got.sum(-1), torch.ones_like(got.sum(-1)), 1e-5, 0, "bf16 rows sum")  # float32 softmax
    # bf16 weights move each weight by up to 2**-9 of itself: a few 1e-2 on a probability after 3 random layers
    return f"max |diff| {close(got, want, 6e-2, 0, 'bf16 rows'):.1e} (bf16 weights, float32 scores)"


def step_sdpa_backends(device: str) -> str:
    import torch

    from whitebox_eval.internals import batch_from_ids

    if not device.startswith("cuda"):
        return "skipped on the CPU (CUDA backends)"
    import transformers as tf
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)  # head_dim 64, as real models: every backend can take it
    model = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=64, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                               num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                               attn_implementation="sdpa")).to(device, torch.bfloat16).eval()
    out = []
    for label, ids in (("unpadded", [[5, 9, 17, 33, 2, 41, 7, 12]] * 2), ("left-padded", [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21]])):
        b = batch_from_ids(ids).to(device)

        def logits(backend):
            with torch.no_grad(), sdpa_kernel([backend]):
                return model(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=b.position_ids).logits

        ref = logits(SDPBackend.MATH)
        for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"):
            if not hasattr(SDPBackend, name):
                out.append(f"{label} {name}: not in this torch")
                continue
            try:
                got = logits(getattr(SDPBackend, name))
            except RuntimeError as e:  # e.g. flash attention takes no explicit mask
                out.append(f"{label} {name}: refused ({str(e).splitlines()[0][:60]})")
                continue
            real = b.attention_mask.bool()
            out.append(f"{label} {name}: {close(got[real], ref[real], 5e-2, 5e-2, name):.1e}")
    return "; ".join(out)


def step_device_split(device: str, tmp: Path) -> str:
    import numpy as np
    import torch
    from accelerate import dispatch_model
    from accelerate.hooks import AlignDevicesHook, add_hook_to_module
    from tiny_models import tiny_loaded

    from whitebox_eval.internals import Engine, logit_lens
    from whitebox_eval.mcqa.scoring import continuation_logprobs, score_prompts
    from whitebox_eval.tasks.prompt_tokens import TokenizedPrompt
    from whitebox_eval.models.architectures import Architecture
    from whitebox_eval.mui import keyneurons as kn
    from whitebox_eval.sae.encoding import SAE
    from whitebox_eval.sae.fidelity import evaluate_fidelity

    cpu = tiny_loaded("llama")
    split = moved(cpu, device)
    for name in ("model.layers.2", "model.norm", "lm_head"):  # the second device: the CPU
        module = split.model.get_submodule(name).to("cpu")
        add_hook_to_module(module, AlignDevicesHook(execution_device="cpu", io_same_device=False))
    split.model.hf_device_map = {"model.embed_tokens": device, "model.layers.0": device, "model.layers.1": device,
                                 "model.layers.2": "cpu", "model.norm": "cpu", "lm_head": "cpu"}
    toks = [TokenizedPrompt([5, 9, 17, 33, 2, 41, 7, 12, 20], [2, 5, 7], [30, 31, 32], 0, [[2, 3], [5], [7]]),
            TokenizedPrompt([3, 8, 21, 30, 11, 6], [1, 3], [30, 31], 0)]
    groups = [[([5, 9, 17], [33, 2]), ([5, 9, 17], [41])], [([3, 8], [21, 30, 11])]]
    seqs = [kn.ScoredSequence([5, 9, 17, 33], [41, 7, 12]), kn.ScoredSequence([3, 8, 21], [30, 11])]
    torch.manual_seed(0)
    sae = SAE(torch.randn(32, 48) / 6, torch.zeros(48), torch.randn(48, 32) / 7, torch.zeros(32))
    ea, eb = Engine(cpu), Engine(split)
    want = score_prompts(ea, toks, 3).arrays()
    d = max(close(v, want[k], 1e-4, what=f"mcqa {k}") for k, v in score_prompts(eb, toks, 3).arrays().items())
    d = max(d, close(continuation_logprobs(eb, groups), continuation_logprobs(ea, groups), 1e-4, what="cloze"))
    fa, fb = (evaluate_fidelity(m, sae, 2, [[5, 9, 17, 33, 2, 41, 7], [3, 8, 21, 30]]) for m in (cpu, split))
    d = max(d, *(close(fb[k], fa[k], 1e-4, what=f"SAE {k}") for k in ("explained_variance", "ce_loss_sae", "ce_loss_clean")))
    for cfg in (kn.KeyNeuronConfig(score="contribution", final_norm="full"), kn.KeyNeuronConfig(score="ig", ig_steps=2)):
        for x, y in zip(kn.token_scores(eb, seqs, cfg), kn.token_scores(ea, seqs, cfg)):
            d = max(d, close(x, y, 1e-4, 1e-3, what=cfg.score))
    # accelerate's dispatch: layers and the head offloaded to the CPU and disk, run on the GPU
    off = copy.copy(cpu)
    main = 0 if device.startswith("cuda") else "cpu"
    off.model = dispatch_model(copy.deepcopy(cpu.model), offload_dir=str(tmp / "offload"), device_map={
        "model.embed_tokens": main, "model.rotary_emb": main, "model.layers.0": main, "model.layers.1": "cpu",
        "model.layers.2": "disk", "model.norm": "disk", "lm_head": "cpu"})
    off.arch = Architecture.of(off.model)
    resid = torch.randn(3, 32)
    with torch.no_grad():
        d = max(d, close(logit_lens(Engine(off), resid.to(off.device)), logit_lens(Engine(cpu), resid), 1e-4, what="lens"))
    cfg = kn.KeyNeuronConfig(score="contribution", final_norm="full")
    for x, y in zip(kn.token_scores(Engine(off), seqs, cfg), kn.token_scores(Engine(cpu), seqs, cfg)):
        d = max(d, close(x, y, 1e-4, 1e-3, what="offloaded MUI"))
    from whitebox_eval.sae.training import train_topk_sae

    x = torch.randn(512, 32)  # SAE training on the device draws the CPU run's batches
    a, b = (train_topk_sae(x, 48, 4, steps=20, batch_size=64, device=where) for where in ("cpu", device))
    d = max(d, close(b.w_dec, a.w_dec, 1e-3, 1e-3, what="SAE training"))
    assert np.isfinite(d)
    return f"max |diff| {d:.1e} (mcqa, cloze, SAE fidelity, MUI contribution and IG; offloaded lens and MUI; SAE training)"



# ---------------------------------------------------------------- the suites' commands
def checkpoint(folder: Path, tokenizer_dir: Path, *, tiny: bool) -> Path:
    """A random-weight SmolLM2-135M-shaped llama (bf16; tiny and float32 with ``tiny``) and the real tokenizer."""
    import torch
    import transformers as tf

    tok = tf.AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id, **(TINY_SMOLLM2 if tiny else SMOLLM2))
    model = tf.LlamaForCausalLM(cfg).to(torch.float32 if tiny else torch.bfloat16)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _hellaswag(path: Path) -> Path:
    rows = [{"ind": i, "activity_label": "Cooking", "ctx_a": f"A cook adds {i} eggs to a bowl.", "ctx_b": "she",
             "endings": ["whisks them.", "paints the wall.", f"sings {i} songs.", "drives away."], "label": "0"}
            for i in range(8)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def step_suite_clis(device: str, tmp: Path, tokenizer_dir: Path, tiny: bool) -> str:
    model = str(checkpoint(tmp / "smollm2-shaped", tokenizer_dir, tiny=tiny))
    out = str(tmp / "runs")
    runs = {
        "mcqa-2shot": ["mcqa", "--task", "ssd", "--shots", "2", "--limit", "24", "--min-val-items", "8", "--batch-size", "8"],
        "mcqa-cloze": ["mcqa", "--task", f"hellaswag={_hellaswag(tmp / 'hellaswag.jsonl')}", "--prompt", "lm-eval",
                       "--batch-size", "4"],
        "span": ["span", "--task", "string_reversal", "--split", "id", "--limit", "8", "--finetune", "8", "--batch-size", "4"],
        "mui-ig": ["mui", "--task", "arithmetic-gen", "--limit", "4", "--max-new-tokens", "6", "--score", "ig",
                   "--ig-steps", "4", "--batch-size", "2"],
        "gar-truth-heads": ["gar", "--mode", "truth-heads", "--limit", "6", "--batch-size", "4"],
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    top = ["--device", "cpu" if device == "cpu" else "cuda"]
    done, failed = [], []
    for name, args in runs.items():  # every command runs, so one GPU call reports every failure
        cmd = [sys.executable, "-m", "whitebox_eval", *top, *args, "--model", model, "--output", out, "--run-id", name]
        try:
            _run(cmd, env, name)
            config = (Path(out) / name / "config.yaml").read_text()
            assert f"device: {device if device == 'cpu' else 'cuda:0'}" in config, f"{name}: config.yaml placement"
            done.append(name)
        except AssertionError as e:
            failed.append(f"{name}: {str(e)[-700:]}")
    if failed:
        raise AssertionError(f"passed: {', '.join(done) or 'none'}; failed: " + " || ".join(failed))
    # torchrun: 2 ranks (sharing the one GPU here) against one process
    study = runs["mcqa-2shot"] + ["--model", model, "--output", out]
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "whitebox_eval",
          *top, *study,
          "--run-id", "two-ranks"], env, "torchrun")
    one, two = (json.loads((Path(out) / r / "results.json").read_text()) for r in ("mcqa-2shot", "two-ranks"))
    for key in ("date",):
        one.pop(key, None), two.pop(key, None)
    _same(one, two, "results.json")
    return ", ".join(done) + "; torchrun 2 ranks = 1 process"


def _run(cmd: list[str], env: dict, name: str) -> None:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{name} exited {done.returncode}: {done.stderr[-1500:]}")


def _same(a, b, path: str) -> None:
    """Equal structures, floats to 1e-4 absolute and relative: each rank pads its own batches, so float32
    kernels see other shapes (a 16-nat log-likelihood moved by 2.5e-4 across ranks on a CPU CI machine)."""
    if isinstance(a, float) or isinstance(b, float):
        assert abs(a - b) <= 1e-4 * (1 + max(abs(a), abs(b))) or (a != a and b != b), f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def step_gpu_check(device: str, tmp: Path) -> str:
    args = ["--tiny", "--models", "llama-3-8b"] if device == "cpu" else ["--models", "llama-3-8b", "--repeats", "3",
                                                                          "--study-items", "32"]
    out = tmp / "gpu_check.md"
    _run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), *args, "--out", str(out)], dict(os.environ), "gpu_check")
    row = json.loads(out.with_suffix(".json").read_text())[0]
    return (f"logits_ok {row['logits_ok']}, 5-shot overhead {row['5-shot_overhead']}x, peak {row.get('peak_GiB', '-')} GiB, "
            f"{row['study_tokens_per_s']} study tok/s")


# ---------------------------------------------------------------- driver
ESTIMATE_S = {"engine_parity": 30, "bf16_attention_rows": 5, "sdpa_backends": 5, "device_split": 15,
              "suite_clis": 240, "gpu_check_8b": 90}
"""Seconds each step takes on one H100 (the estimate above); a step that would pass --budget is skipped."""


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="every step on the CPU at tiny sizes (CI)")
    ap.add_argument("--prepare", type=Path, help="write the assets (tokenizer, pinned wheels) here and stop")
    ap.add_argument("--assets", type=Path, default=REPO / "benchmarks" / "gpu_smoke_assets")
    ap.add_argument("--out", type=Path, help="gpu_smoke.md and gpu_smoke.json here")
    ap.add_argument("--budget", type=float, default=540.0, help="seconds; steps that would not fit are skipped")
    ap.add_argument("--steps", default=",".join(ESTIMATE_S), help="comma list of " + ", ".join(ESTIMATE_S))
    args = ap.parse_args(argv)
    if args.prepare:
        prepare(args.prepare)
        return []
    if not args.cpu:
        use_pinned_wheels(args.assets)
    import torch

    if not args.cpu and not torch.cuda.is_available():
        raise SystemExit("no GPU here: run with --cpu for the CPU check")
    device = "cpu" if args.cpu else "cuda"
    start, rows = time.perf_counter(), []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        tokenizer_dir = args.assets / "tokenizer"
        if args.cpu and not tokenizer_dir.is_dir():
            from whitebox_eval.models import load_model

            tokenizer_dir = tmp / "tokenizer"
            load_model("smollm2-135m", device="cpu").tokenizer.save_pretrained(tokenizer_dir)
        steps = {"engine_parity": lambda: step_engine_parity(device), "bf16_attention_rows": lambda: step_bf16_rows(device),
                 "sdpa_backends": lambda: step_sdpa_backends(device), "device_split": lambda: step_device_split(device, tmp),
                 "suite_clis": lambda: step_suite_clis(device, tmp, tokenizer_dir, args.cpu),
                 "gpu_check_8b": lambda: step_gpu_check(device, tmp)}
        for name in args.steps.split(","):
            t0 = time.perf_counter()
            if not args.cpu and t0 - start + ESTIMATE_S[name] > args.budget:
                rows.append({"step": name, "status": "skipped", "detail": f"would pass the {args.budget:.0f} s budget"})
            else:
                try:
                    rows.append({"step": name, "status": "ok", "detail": steps[name]()})
                except Exception as e:  # recorded; the next step runs
                    rows.append({"step": name, "status": "FAILED", "detail": f"{type(e).__name__}: {str(e)[:1500]}"})
            rows[-1]["seconds"] = round(time.perf_counter() - t0, 1)
            print(json.dumps(rows[-1]), flush=True)
    where = "CPU, tiny sizes" if args.cpu else f"{torch.cuda.get_device_name(0)}, transformers {metadata.version('transformers')}"
    text = (f"{where}; {time.perf_counter() - start:.0f} s in all\n\n| step | status | seconds | detail |\n|---|---|---|---|\n"
            + "\n".join(f"| {r['step']} | {r['status']} | {r['seconds']} | {r['detail']} |" for r in rows))
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_smoke.md").write_text(f"# benchmarks/gpu_smoke.py\n\n{text}\n", encoding="utf-8")
        (args.out / "gpu_smoke.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return rows


if __name__ == "__main__":
    sys.exit(0 if all(r["status"] != "FAILED" for r in main()) else 1)
