"""Train a small TopK SAE on one layer's residual stream (for feature MUI, paper 001 sec. 2.1.2, eq. 4-6, 9).

The bundled models have no public SAEs, so this makes one: the model generates text
from a few seed prompts (the engine's decoder, sampling at temperature 1 from one seeded
stream per batch, the draws of HF ``generate`` under ``torch.manual_seed``), one engine pass
captures the residual stream leaving block ``layer`` (SAELens' ``hook_resid_post``) at
every real token, and :func:`whitebox_eval.mui.sae.train_topk_sae` fits a TopK SAE to
it on the CPU. The result is saved in SAELens' on-disk layout with ``hook_name``
``blocks.{layer}.hook_resid_post`` and ``hook_layer``, so ``--score sae --sae PATH``
finds its layer by itself.

Choices (the paper trains none; Llama Scope / Gemma Scope are used there): seed
prompts mix the MUI tasks' question styles with generic text openings; 64 new tokens
per prompt; prompt tokens are kept in the training set too; the BOS position (a
residual-norm outlier) is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, Engine, batch_from_ids
from whitebox_eval.internals.generation import generate
from whitebox_eval.mui.sae import SAE, reconstruction_mse, train_topk_sae
from whitebox_eval.mui.sae_files import save_sae

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
    """What was trained, on how much data, and how well it reconstructs."""

    path: Path
    layer: int
    n_tokens: int
    d_in: int
    d_sae: int
    k: int
    initial_mse: float
    final_mse: float
    explained_variance: float


def collect_residuals(lm, layer: int, n_tokens: int, *, seed: int = 0, max_new_tokens: int = 64,
                      batch_size: int = 6) -> torch.Tensor:
    """Residual-stream vectors ``[n, d_model]`` leaving block ``layer`` on model-generated text."""
    engine = Engine(lm)
    layer = lm.arch.check_layer(layer)
    tok = lm.tokenizer
    pad = lm.pad_id
    rows: list[torch.Tensor] = []
    total, round_no = 0, 0
    while total < n_tokens:
        for start in range(0, len(SEED_PROMPTS), batch_size):
            prompts = [tok(p)["input_ids"] for p in SEED_PROMPTS[start:start + batch_size]]
            gens = generate(engine, prompts, max_new_tokens=max_new_tokens, do_sample=True, temperature=1.0,
                            generator=torch.Generator().manual_seed(seed + 1000 * round_no + start))
            seqs = []
            for p, g in zip(prompts, gens):
                real = list(p) + g.ids
                seqs.append([t for t in real if t != pad] or real[:1])  # pad tokens (SmolLM2's pad is its EOS) are not trained on
            b = batch_from_ids(seqs, pad_id=pad).to(lm.device)
            with torch.no_grad():
                x = engine.run(b, [Capture("resid", "all", [layer])], logits=False)["resid"][:, 0]  # [B, S, d]
            for i, s in enumerate(seqs):
                off = int(b.offsets[i])
                drop = 1 if getattr(tok, "bos_token_id", None) is not None and s[0] == tok.bos_token_id else 0
                rows.append(x[i, off + drop:].float().cpu())
            total = sum(r.shape[0] for r in rows)
            if total >= n_tokens:
                break
        round_no += 1
    return torch.cat(rows)[:n_tokens]


def train_sae_for_model(
    lm, layer: int, output: str | Path, *, n_tokens: int = 8192, d_sae: int = 2048, k: int = 32,
    steps: int = 2000, lr: float = 1e-3, batch_size: int = 256, seed: int = 0,
) -> SAETrainingReport:
    """Collect residuals, train a TopK SAE and save it (SAELens layout) under ``output``."""
    if n_tokens < batch_size:
        raise WhiteboxError(f"n_tokens ({n_tokens}) must be at least the batch size ({batch_size})")
    x = collect_residuals(lm, layer, n_tokens, seed=seed)
    sae: SAE = train_topk_sae(x, d_sae, k, steps=steps, lr=lr, seed=seed, batch_size=batch_size)
    layer = lm.arch.check_layer(layer)
    sae.metadata.update({"hook_name": f"blocks.{layer}.hook_resid_post", "hook_layer": layer,
                         "model_name": lm.spec, "n_training_tokens": int(x.shape[0])})
    path = save_sae(sae, output)
    var = float(((x - x.mean(0)) ** 2).mean())
    final = reconstruction_mse(sae, x)
    return SAETrainingReport(path, layer, int(x.shape[0]), sae.d_in, sae.d_sae, k,
                             float(sae.metadata["initial_mse"]), final, 1.0 - final / var if var > 0 else 0.0)
