"""A 4-bit load through ``--model-arg`` on one CUDA GPU: mcqa runs on it, and its QK-scores agree with
the bf16 model's (a GPU check: one device call of at most 2 minutes).

A random Llama-shaped model of 0.89B parameters (hidden 2048, 16 layers, 16 heads / 8 KV heads,
MLP 5632, vocabulary 32,000; nothing downloaded) is saved in bf16 with a byte-level BPE tokenizer
written here, then:

1. ``whitebox-eval mcqa --model FOLDER --model-arg load_in_4bit=true --model-arg
   bnb_4bit_compute_dtype=bfloat16 --task ssd`` runs (60 items, baseline and QK methods);
2. the QK-score of every head (pre-RoPE query of the last token . key of each option's
   representative token, what mcqa scores) on 16 prompts, from the 4-bit (NF4) and the bf16 load:
   per head the Pearson correlation over (prompt, option) scores and the relative error
   ``||qk_4bit - qk_bf16|| / ||qk_bf16||``.

Tolerance (stated before it ran; NF4 keeps ~4 bits of each weight, so q and k each carry a few
per cent of error on random Gaussian weights and their product about twice that): median head
correlation >= 0.95 and median relative error <= 0.25; the check exits 1 otherwise.

bitsandbytes: carried as a wheel trimmed to the one CUDA library the machine's torch needs
(``--trim-wheel WHEEL`` writes ``bitsandbytes-trimmed.whl`` beside it, keeping
``libbitsandbytes_cuda<torch.version.cuda>.so`` only), installed with ``pip install --no-deps`` on the
device before this script runs.

    python benchmarks/quantized_check.py --trim-wheel bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl --cuda 128
    python benchmarks/quantized_check.py --out benchmarks/results/quantized_check.json     # on the GPU
    python benchmarks/quantized_check.py --tiny    # the plumbing on a 2-layer model (still needs CUDA for 4-bit)

Status: prepared, not run (no GPU has been lent to run it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import zipfile
from pathlib import Path

MEDIAN_CORRELATION = 0.95
MEDIAN_RELATIVE_ERROR = 0.25


def trim_wheel(wheel: Path, cuda: str) -> Path:
    """A copy of the bitsandbytes wheel without the CUDA libraries other than ``cuda<cuda>``
    (the wheel's RECORD keeps listing them; pip installs what is there with --no-deps)."""
    out = wheel.with_name("bitsandbytes-trimmed.whl")
    keep = f"libbitsandbytes_cuda{cuda}"
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            name = Path(item.filename).name
            if name.startswith("libbitsandbytes_cuda") and not name.startswith(keep):
                continue
            dst.writestr(item, src.read(item.filename))
    return out


def write_model(folder: Path, tiny: bool) -> None:
    import torch
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    letters = " ".join("ABCDEFGHIJ")
    texts = [f"Question: which is {w}? A. {w} B. no C. yes D. maybe Answer: {letters}\n"
             for w in ("red", "blue", "a cat", "the sum", "two", "France", "water")]
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                     unk_token="<unk>")
    size = dict(hidden_size=256, intermediate_size=704, num_hidden_layers=2) if tiny else \
        dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=16)
    cfg = tf.LlamaConfig(vocab_size=32000, num_attention_heads=16, num_key_value_heads=8, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2, dtype="bfloat16", **size)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = tf.LlamaForCausalLM(cfg).to(torch.bfloat16)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters", flush=True)
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    del model
    torch.cuda.empty_cache()


def qk_scores(folder: Path, quantized: bool):
    """[prompts, layers, heads, options] QK-scores as mcqa computes them (pre-RoPE q at the last token, k at each option)."""
    import torch

    from whitebox_eval.internals import Capture, Engine
    from whitebox_eval.models import load_options as lo
    from whitebox_eval.models.loading import load_model

    args = {"load_in_4bit": True, "bnb_4bit_compute_dtype": "bfloat16"} if quantized else {}
    lm = load_model(str(folder), dtype="bfloat16", device="cuda", options=lo.LoadOptions(model_args=args))
    engine = Engine(lm)
    prompts = [f"Question: which is {w}? A. red B. no C. yes D. maybe Answer:" for w in
               ["red", "blue", "two", "water", "France", "a cat", "the sum", "green"] * 2]
    batch = engine.batch(prompts)
    lengths = [len(lm.tokenizer(p).input_ids) for p in prompts]
    options = [[n - 12, n - 9, n - 6, n - 3] for n in lengths]  # four positions inside the option list
    t = engine.run(batch, [Capture("q", "last"), Capture("k", options)])
    q, k = t["q"][:, :, 0], t["k"]  # [B, L, H, D], [B, L, P, Hkv, D]
    group = lm.arch.n_heads // lm.arch.n_kv_heads
    k = k.repeat_interleave(group, dim=3)  # [B, L, P, H, D]
    scores = torch.einsum("blhd,blphd->blhp", q.float(), k.float())
    del engine, lm
    torch.cuda.empty_cache()
    return scores


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trim-wheel", type=Path)
    ap.add_argument("--cuda", default="128", help="CUDA version digits of the library to keep (torch.version.cuda)")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.trim_wheel:
        print(trim_wheel(a.trim_wheel, a.cuda))
        return 0
    import torch

    from whitebox_eval.cli import main as cli

    start = time.perf_counter()
    report: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "llama-random"
        write_model(folder, a.tiny)
        t0 = time.perf_counter()
        try:
            cli(["mcqa", "--model", str(folder), "--model-arg", "load_in_4bit=true", "--model-arg",
                 "bnb_4bit_compute_dtype=bfloat16", "--device", "cuda", "--task", "ssd", "--limit", "60",
                 "--min-val-items", "10", "--methods", "baseline,qk", "--no-item-views", "--output", tmp, "--run-id", "q4"])
        except SystemExit as e:
            if e.code:
                raise
        results = json.loads((Path(tmp) / "q4" / "results.json").read_text())
        report["mcqa_4bit"] = {"seconds": round(time.perf_counter() - t0, 1), "n_evaluated": results["n_evaluated"],
                               "acc_baseline": results["headline"]["acc,baseline"]}
        quant, full = qk_scores(folder, True), qk_scores(folder, False)
    b, layers, heads, p = full.shape
    x, y = quant.permute(1, 2, 0, 3).reshape(layers * heads, -1), full.permute(1, 2, 0, 3).reshape(layers * heads, -1)
    xc, yc = x - x.mean(1, keepdim=True), y - y.mean(1, keepdim=True)
    corr = (xc * yc).sum(1) / (xc.norm(dim=1) * yc.norm(dim=1)).clamp_min(1e-12)
    rel = (x - y).norm(dim=1) / y.norm(dim=1).clamp_min(1e-12)
    report["qk_4bit_vs_bf16"] = {"heads": layers * heads, "median_correlation": float(corr.median()),
                                 "min_correlation": float(corr.min()), "median_relative_error": float(rel.median()),
                                 "max_relative_error": float(rel.max()),
                                 "tolerance": {"median_correlation_min": MEDIAN_CORRELATION,
                                               "median_relative_error_max": MEDIAN_RELATIVE_ERROR}}
    report["gpu"] = torch.cuda.get_device_name()
    report["seconds"] = round(time.perf_counter() - start, 1)
    ok = corr.median() >= MEDIAN_CORRELATION and rel.median() <= MEDIAN_RELATIVE_ERROR
    report["ok"] = bool(ok)
    print(json.dumps(report, indent=2))
    if a.out:
        a.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
