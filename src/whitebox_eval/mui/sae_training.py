"""Train a TopK SAE on one layer's residual stream (for feature MUI, paper 001 sec. 2.1.2, eq. 4-6, 9).

The bundled models have no public SAEs, so this makes one. Training text is real text
(:mod:`whitebox_eval.mui.sae_text`: files cut into fixed-length chunks, deduplicated, the last
share of each file held out); only when no text is given does the model generate some from a
few seed prompts (the engine's decoder, :func:`whitebox_eval.internals.generation.generate`,
sampling at temperature 1), with a warning. Residuals leaving block ``layer`` (SAELens'
``hook_resid_post``) are collected with the forward stopped after that block
(``Engine.run(..., stop_after=layer)``), the first position of each sequence
(the attention sink) and padding left out, and cached on disk as float16 (float32 where a value
is beyond float16's range); then
:func:`whitebox_eval.mui.sae.train_topk_sae` fits the SAE (auxiliary dead-feature loss) and
:func:`whitebox_eval.mui.sae_fidelity.evaluate_fidelity` measures it on the held-out chunks.
The SAE is saved in SAELens' layout with ``hook_name`` ``blocks.{layer}.hook_resid_post`` and
``hook_layer``, its held-out fidelity in ``fidelity.json`` beside it.
"""

from __future__ import annotations

import json
import math
import re
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, Engine, batch_from_ids
from whitebox_eval.internals.generation import generate
from whitebox_eval.mui.sae import train_topk_sae
from whitebox_eval.mui.sae_fidelity import evaluate_fidelity, fidelity_lines
from whitebox_eval.mui.sae_files import save_sae
from whitebox_eval.mui.sae_text import TextChunks, chunk_text, first_tokens
from whitebox_eval.runs.atomic import write_atomic
from whitebox_eval.runs.progress import progress
from whitebox_eval.runs.stages import NPY, stage, stage_path

FIDELITY_FILE = "fidelity.json"

SEED_PROMPTS: tuple[str, ...] = (
    "Question: What is the value of 417 + 382?\nAnswer:",
    "Question: What is the value of 36 * 12?\nAnswer:",
    'Question: Which of the following options corresponds to " garden "?\nA. garden\nB. pencil\nC. orange\nD. music\nAnswer:',
    "Question: Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?\nAnswer:",
    "Question: Which organ pumps blood through the human body?\nA. Lungs\nB. Heart\nC. Liver\nD. Kidney\nAnswer:",
    "Once upon a time, in a small village by the sea,",
    "The history of the printing press begins",
    "Photosynthesis is the process by which",
    "def fibonacci(n):\n",
    "The main causes of the French Revolution were",
    "In mathematics, a prime number is",
    "Here is a recipe for a simple tomato soup:",
)


@dataclass
class SAETrainingReport:
    """What was trained, on how much data, how fast, and how faithful it is on held-out text."""

    path: Path
    layer: int
    n_tokens: int
    d_in: int
    d_sae: int
    k: int
    initial_mse: float
    final_mse: float
    explained_variance: float  # per token, held-out (nan without held-out text)
    fidelity: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    source: str = "text"
    training: dict = field(default_factory=dict)  # fidelity.json's "training" record


def generated_sequences(lm, n_tokens: int, *, seed: int = 0, max_new_tokens: int = 64,
                        batch_size: int = 6) -> list[list[int]]:
    """Prompt + sampled continuation token ids from :data:`SEED_PROMPTS` until ``n_tokens`` are reached."""
    engine = Engine(lm)
    tok, pad = lm.tokenizer, lm.pad_id
    seqs: list[list[int]] = []
    total, round_no = 0, 0
    while total < n_tokens:
        for start in range(0, len(SEED_PROMPTS), batch_size):
            prompts = [tok(p)["input_ids"] for p in SEED_PROMPTS[start:start + batch_size]]
            gens = generate(engine, prompts, max_new_tokens=max_new_tokens, do_sample=True, temperature=1.0,
                            generator=torch.Generator().manual_seed(seed + 1000 * round_no + start))
            for p, g in zip(prompts, gens):
                real = [t for t in list(p) + g.ids if t != pad]  # SmolLM2's pad is its EOS: not trained on
                if len(real) >= 2:
                    seqs.append(real)
                    total += len(real) - 1
            if total >= n_tokens:
                break
        round_no += 1
    return seqs


def block_output(lm, ids: torch.Tensor, mask: torch.Tensor, layer: int) -> torch.Tensor:
    """Residual leaving block ``layer``, [B, S, d_model] right-padded like ``ids`` and ``mask``: one
    engine pass that stops after the block (the blocks above are never run)."""
    lengths = [ids.shape[1]] * ids.shape[0] if mask is None else mask.sum(1).tolist()
    batch = batch_from_ids([r[:n] for r, n in zip(ids.tolist(), lengths)], lm.pad_id).to(lm.device)
    trace = Engine(lm).run(batch, [Capture("resid", "all", [layer])], logits=False, stop_after=layer)
    return batch.unpad(trace["resid"][:, 0], 1)


def collect_residuals(lm, layer: int, sequences: list[list[int]], *, batch_size: int = 16,
                      show_progress: bool | None = False) -> np.ndarray:
    """Residuals leaving block ``layer`` at every real position but the first, ``[n, d_model]``:
    float16 where every value fits its range (65,504), else float32 (Gemma-3's residual stream
    holds values beyond it, which float16 would turn into inf).

    The forward stops after block ``layer``; sequences are right-padded in batches (progress
    per batch, :mod:`whitebox_eval.runs.progress`).
    """
    rows = []
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))  # similar lengths share a batch
    for s in progress(range(0, len(order), batch_size), desc="SAE residual collection (batches)",
                      enabled=show_progress):
        part = [sequences[i] for i in order[s:s + batch_size]]
        width = max(len(q) for q in part)
        ids = torch.full((len(part), width), lm.pad_id, dtype=torch.long)
        mask = torch.zeros((len(part), width), dtype=torch.long)
        for i, q in enumerate(part):
            ids[i, :len(q)] = torch.tensor(q)
            mask[i, :len(q)] = 1
        h = block_output(lm, ids, mask, layer)
        keep = mask.bool().to(h.device)
        keep[:, 0] = False
        rows.append(h[keep].float().cpu().numpy())
    if not rows:
        raise WhiteboxError("no sequences to collect residuals from")
    # against a float (a float16 scalar would cast the max to float16: inf, and a warning)
    fits = max(float(np.abs(r).max(initial=0.0)) for r in rows) <= float(np.finfo(np.float16).max)
    return np.concatenate(rows, dtype=np.float16 if fits else np.float32)


def cached_residuals(lm, layer: int, chunks: TextChunks, cache_dir: str | Path | None, *,
                     batch_size: int = 16, show_progress: bool | None = None) -> tuple[np.ndarray, dict]:
    """Training residuals: the stage ``resid-<model>-L<layer>-<text fingerprint>.npy`` in
    ``cache_dir`` (memory-mapped; reused when this model, layer and text were collected before),
    or collected afresh without a ``cache_dir``."""
    info: dict = {"cached": False}

    def collect() -> np.ndarray:
        t0 = time.perf_counter()
        x = collect_residuals(lm, layer, chunks.train, batch_size=batch_size, show_progress=show_progress)
        secs = time.perf_counter() - t0
        info.update(collect_s=secs, collect_tokens_per_s=sum(len(c) for c in chunks.train) / secs)
        return x

    if cache_dir is None:
        x = collect()
    else:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(lm.spec))[-60:]
        stem = f"resid-{name}-L{layer}-{chunks.fingerprint()}"
        x = stage(cache_dir, stem, collect, kind=NPY, mmap=True)
        info.update(cached="collect_s" not in info, cache=str(stage_path(cache_dir, stem, NPY)))
    return x, {**info, "n_tokens": int(x.shape[0])}


def training_chunks(lm, text: list[str] | None, *, n_tokens: int | None, context: int, heldout: float,
                    seed: int) -> tuple[TextChunks, str]:
    """Chunks of the given text files, or (no text given) of model-generated text, with a warning."""
    if text:
        if any("gsm8k" in str(p).lower() for p in text):
            warnings.warn("a gsm8k file is in the SAE's training text: keep evaluation data out of training",
                          stacklevel=2)
        return chunk_text(lm.tokenizer, list(text), context=context, heldout=heldout, max_train_tokens=n_tokens), "text"
    warnings.warn("no --text given: training the SAE on model-generated text from a few seed prompts; an SAE "
                  "trained on it describes the model poorly on running text (give --text PATH)", stacklevel=2)
    budget = n_tokens or 8192
    seqs = generated_sequences(lm, math.ceil(budget / (1 - heldout)), seed=seed)
    n_held = round(heldout * len(seqs))
    return TextChunks(train=seqs[:len(seqs) - n_held], heldout=seqs[len(seqs) - n_held:]), "generated"


def train_sae_for_model(
    lm, layer: int, output: str | Path, *, text: list[str] | None = None, n_tokens: int | None = None,
    context: int = 256, heldout: float = 0.05, d_sae: int = 4096, k: int = 32, steps: int = 2000,
    lr: float = 2e-3, batch_size: int = 512, seed: int = 0, aux_k: int | None = None, aux_coef: float = 1 / 32,
    dead_tokens: int = 10_240, cache_dir: str | Path | None = None, eval_tokens: int = 16384, collect_batch_size: int = 16,
    show_progress: bool | None = None,
) -> SAETrainingReport:
    """Collect residuals (cached), train a TopK SAE, save it (SAELens layout) and measure it on held-out text;
    each of the three reports its progress (a bar on a terminal, lines in a log)."""
    layer = lm.arch.check_layer(layer)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    chunks, source = training_chunks(lm, text, n_tokens=n_tokens, context=context, heldout=heldout, seed=seed)
    x, collect = cached_residuals(lm, layer, chunks, cache_dir, batch_size=collect_batch_size,
                                  show_progress=show_progress)
    if x.shape[0] < batch_size:
        raise WhiteboxError(f"{x.shape[0]} training tokens are fewer than the batch size ({batch_size})")
    t0 = time.perf_counter()
    sae = train_topk_sae(x, d_sae, k, steps=steps, lr=lr, seed=seed, batch_size=batch_size, aux_k=aux_k,
                         aux_coef=aux_coef, dead_tokens=dead_tokens, device=lm.device, show_progress=show_progress)
    train_s = time.perf_counter() - t0
    sae.metadata.update({"hook_name": f"blocks.{layer}.hook_resid_post", "hook_layer": layer,
                         "model_name": lm.spec, "n_training_tokens": int(x.shape[0]), "training_text": source,
                         "context_size": context})
    path = save_sae(sae, output)
    fid: dict = {}
    eval_s = 0.0
    if chunks.heldout:
        t0 = time.perf_counter()
        fid = evaluate_fidelity(lm, sae, layer, first_tokens(chunks.heldout, eval_tokens), show_progress=show_progress)
        eval_s = time.perf_counter() - t0
    timings = {**collect, "train_s": train_s, "train_steps_per_s": steps / train_s, "eval_s": eval_s,
               "total_s": time.perf_counter() - t_start, "process_cpu_s": time.process_time() - cpu_start}
    record = {"heldout": fid, "training": {
        "source": source, "sources": chunks.sources, "n_train_tokens": int(x.shape[0]),
        "n_heldout_tokens_evaluated": fid.get("n_tokens", 0), "context": context, "heldout_share": heldout,
        "n_duplicate_chunks": chunks.n_duplicate_chunks, "d_sae": d_sae, "k": k, "steps": steps, "lr": lr,
        "batch_size": batch_size, "aux_k": sae.metadata["aux_k"], "aux_coef": aux_coef,
        "dead_tokens": dead_tokens, "seed": seed,
        "final_dead_fraction_training": sae.metadata["final_dead_fraction"],
        "steps_with_aux_loss": sae.metadata["steps_with_aux_loss"]}, "timings": timings}
    write_atomic(Path(path) / FIDELITY_FILE, json.dumps(record, indent=2))
    return SAETrainingReport(path, layer, int(x.shape[0]), sae.d_in, sae.d_sae, k,
                             float(sae.metadata["initial_mse"]), float(sae.metadata["final_mse"]),
                             float(fid.get("explained_variance", float("nan"))), fid, timings, source,
                             record["training"])


def report_lines(rep: SAETrainingReport) -> list[str]:
    """What ``train-sae`` prints: sizes, speeds and the held-out fidelity table."""
    t = rep.timings
    lines = [(f"SAE layer {rep.layer}: {rep.d_in} -> {rep.d_sae} features, k={rep.k}, {rep.n_tokens} training tokens "
              f"({'real' if rep.source == 'text' else rep.source} text)")]
    if t.get("cached"):
        lines.append(f"residuals read from the cache {t['cache']}")
    else:
        lines.append(f"residuals collected in {t['collect_s']:.0f} s ({t['collect_tokens_per_s']:.0f} tokens/s, forward "
                     f"stopped after block {rep.layer})")
    lines.append(f"trained in {t['train_s']:.0f} s ({t['train_steps_per_s']:.2f} steps/s); held-out evaluation "
                 f"{t['eval_s']:.0f} s; whole run {t['total_s']:.0f} s wall, {t['process_cpu_s']:.0f} s CPU")
    tr = rep.training
    if tr:
        lines.append(f"dead in training (no activation in its last {tr['dead_tokens']} tokens): "
                     f"{100 * tr['final_dead_fraction_training']:.1f}%; the auxiliary loss ran on "
                     f"{tr['steps_with_aux_loss']} of {tr['steps']} steps")
    if rep.fidelity:
        lines += ["fidelity on held-out text:", *fidelity_lines(rep.fidelity)]
    else:
        lines.append("WARNING: no held-out text (--heldout 0): no fidelity figures")
    return lines
