"""Train a TopK SAE on one layer's residual stream (for feature MUI, paper 001 sec. 2.1.2, eq. 4-6, 9).

The bundled models have no public SAEs, so this makes one. Training text is real text
(:mod:`whitebox_eval.sae.text`: files cut into fixed-length chunks, deduplicated, the last
share of each file held out); only when no text is given does the model generate some from a
few seed prompts (the engine's decoder, :func:`whitebox_eval.internals.generation.generate`,
sampling at temperature 1), with a warning. Residuals leaving block ``layer`` (SAELens'
``hook_resid_post``) are collected with the forward stopped after that block
(``Engine.run(..., stop_after=layer)``), the first position of each sequence
(the attention sink) and padding left out, and cached on disk as float16 (float32 where a value
is beyond float16's range); then
:func:`whitebox_eval.sae.training.train_topk_sae` fits the SAE (auxiliary dead-feature loss) and
:func:`whitebox_eval.sae.fidelity.evaluate_fidelity` measures it on the held-out chunks.
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
from whitebox_eval.sae.encoding import SAE, reconstruction_mse
from whitebox_eval.sae.fidelity import evaluate_fidelity, fidelity_lines
from whitebox_eval.sae.files import save_sae
from whitebox_eval.sae.text import TextChunks, chunk_text, first_tokens
from whitebox_eval.runs.atomic import write_atomic
from whitebox_eval.runs.progress import progress
from whitebox_eval.runs.kept import NPY, kept, kept_path

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
        x = kept(cache_dir, stem, collect, kind=NPY, mmap=True)
        info.update(cached="collect_s" not in info, cache=str(kept_path(cache_dir, stem, NPY)))
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


# ---------------------------------------------------------------- training
def _rows(x, idx: torch.Tensor) -> torch.Tensor:
    """Rows ``idx`` of a tensor or (memory-mapped) array as float32."""
    if isinstance(x, torch.Tensor):
        return x[idx].float()
    return torch.from_numpy(np.asarray(x[np.sort(idx.numpy())], dtype=np.float32))


def _data_mean(x, chunk: int = 65536) -> torch.Tensor:
    total = torch.zeros(x.shape[1], dtype=torch.float64)
    for s in range(0, x.shape[0], chunk):
        part = x[s:s + chunk]
        total += (part.double() if isinstance(part, torch.Tensor) else torch.from_numpy(np.asarray(part, np.float64))).sum(0)
    return (total / x.shape[0]).float()


def _sparse_t(idx: torch.Tensor, vals: torch.Tensor, n_features: int) -> torch.Tensor:
    """``[n_features, B]`` sparse matrix with ``vals[t, j]`` at ``(idx[t, j], t)``."""
    b, k = idx.shape
    rows = torch.arange(b, device=idx.device).repeat_interleave(k)
    return torch.sparse_coo_tensor(torch.stack([idx.reshape(-1), rows]), vals.reshape(-1), (n_features, b),
                                   check_invariants=False)


def topk_sae_gradients(params: list[torch.Tensor], batch: torch.Tensor, mean: torch.Tensor, k: int,
                       dead: torch.Tensor | None, *, aux_k: int, aux_coef: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Write the gradients of one TopK training step into ``p.grad`` (see :func:`train_topk_sae`).

    ``params`` = ``[W_enc^T [F, d], b_enc, W_dec [F, d], b_dec]``; ``dead`` lists the dead
    features for the auxiliary loss (None or empty: no auxiliary loss). The loss is
    ``mean_t ||x_hat_t - x_t||^2 / ||x_t - mean||^2 + aux_coef * mean_t ||e_hat_t - e_t||^2 / ||e_t||^2``
    with ``e = x - x_hat`` held constant. Returns the selected feature ids ``[B, k]`` and which of
    them fired (pre-activation > 0).
    """
    w_enc_t, b_enc, w_dec, b_dec = params
    n_features, bsz = w_enc_t.shape[0], batch.shape[0]
    denom = ((batch - mean) ** 2).sum(-1)
    denom = denom.clamp_min(1e-3 * float(denom.mean()) + 1e-12)
    xc = batch - b_dec
    pre = torch.addmm(b_enc, xc, w_enc_t.T)  # [B, F]
    top = pre.topk(k, dim=-1)
    idx, pv = top.indices, top.values
    v = torch.relu(pv)
    rows = w_dec[idx]  # [B, k, d]
    err = torch.bmm(v.unsqueeze(1), rows).squeeze(1) + b_dec - batch
    g_r = (2.0 / bsz) * err / denom[:, None]
    g_pv = torch.bmm(rows, g_r.unsqueeze(-1)).squeeze(-1) * (pv > 0)
    w_dec.grad = torch.sparse.mm(_sparse_t(idx, v, n_features), g_r)
    w_enc_t.grad = torch.sparse.mm(_sparse_t(idx, g_pv, n_features), xc)
    b_enc.grad = torch.bincount(idx.reshape(-1), weights=g_pv.reshape(-1), minlength=n_features).to(b_enc.dtype)
    if aux_coef > 0 and dead is not None and dead.numel() > 0:
        target = -err  # x - x_hat, a constant
        pre_d = pre[:, dead]
        sel = pre_d.topk(min(aux_k, dead.numel()), dim=-1).indices
        mask = torch.zeros_like(pre_d).scatter_(-1, sel, 1.0) * (pre_d > 0)
        z = pre_d * mask
        dec_d = w_dec[dead]
        norm = (target ** 2).sum(-1).clamp_min(1e-12)
        g_e = (2.0 * aux_coef / bsz) * (z @ dec_d - target) / norm[:, None]
        g_z = (g_e @ dec_d.T) * mask  # [B, n_dead]
        w_dec.grad.index_add_(0, dead, z.T @ g_e)
        w_enc_t.grad.index_add_(0, dead, g_z.T @ xc)
        b_enc.grad.index_add_(0, dead, g_z.sum(0))
    b_dec.grad = g_r.sum(0) - b_enc.grad @ w_enc_t
    return idx, pv > 0


def train_topk_sae(
    activations,
    n_features: int,
    k: int,
    steps: int = 1000,
    lr: float = 1e-3,
    seed: int = 0,
    *,
    batch_size: int = 256,
    aux_k: int | None = None,
    aux_coef: float = 1 / 32,
    dead_tokens: int = 10_240,
    lr_decay: float = 0.2,
    init: SAE | None = None,
    device: torch.device | str = "cpu",
    show_progress: bool | None = False,
) -> SAE:
    """Train a TopK SAE (Gao et al., 2024, "Scaling and evaluating sparse autoencoders";
    the Llama Scope architecture of paper 001 App. A.5).

    ``activations`` is ``[n, d]`` (a tensor, or a float16/float32 array such as a memory-mapped
    residual cache). Adam on the reconstruction error of each token normalised by the token's
    centred squared norm ``||x - mean||^2`` (so the loss is one minus the per-token explained
    variance), plus Gao et al.'s auxiliary loss: the ``aux_k`` largest pre-activations among
    dead features (no activation in the last ``dead_tokens`` training tokens, rounded up to whole
    batches) reconstruct the residual error ``e = x - x_hat`` (a constant target), normalised by
    ``||e||^2`` and weighted ``aux_coef`` (1/32 there; ``aux_k`` default ``d / 2``). Gao et al.
    count a feature dead after 10M tokens without firing; a window no longer than the text the
    SAE is judged on (here 10,240 tokens) also revives the rare features that would never fire
    on a held-out evaluation of that size. Init: ``b_dec`` = data mean,
    unit-norm random decoder rows, ``W_enc = W_dec^T``; decoder rows are renormalised after every
    step; the learning rate decays linearly to 0 over the last ``lr_decay`` share of the steps.
    Gradients are written out by hand: only the ``k`` selected features of a token (and the
    auxiliary ones) carry gradient, so a step costs about one dense encoder product.
    ``metadata`` records the dead share at the end (``final_dead_fraction``) and the MSE before
    and after training on up to 8,192 of the tokens. ``init`` continues from an SAE's weights.
    ``device``: where the weights and each step's batch live (the activations stay on the host and
    are drawn there with the same seeded generator, so a GPU draws the same batches). The SAE is
    returned on the CPU. ``show_progress``: progress per step (:mod:`whitebox_eval.runs.progress`;
    off by default).
    """
    if activations.ndim != 2 or activations.shape[0] < 1:
        raise WhiteboxError(f"activations must be [n, d] with n >= 1, got shape {tuple(activations.shape)}")
    if not 1 <= k <= n_features:
        raise WhiteboxError(f"need 1 <= k <= n_features, got k={k}, n_features={n_features}")
    if steps < 1 or lr <= 0 or batch_size < 1 or dead_tokens < 1 or aux_coef < 0 or not 0 <= lr_decay <= 1:
        raise WhiteboxError("steps, batch_size and dead_tokens must be >= 1, lr > 0, aux_coef >= 0, lr_decay in [0, 1]")
    x = activations.detach().float().cpu() if isinstance(activations, torch.Tensor) else activations
    n, d = x.shape
    aux_k = max(1, min(n_features, aux_k if aux_k is not None else d // 2))
    drawn = min(batch_size, n)  # tokens per step
    dead_steps = math.ceil(dead_tokens / drawn)
    gen = torch.Generator().manual_seed(seed)
    mean = _data_mean(x).to(device)
    w_dec = torch.randn(n_features, d, generator=gen)
    w_dec = w_dec / w_dec.norm(dim=1, keepdim=True)
    w_enc_t, b_enc, b_dec = w_dec.clone(), torch.zeros(n_features), mean.clone()  # W_enc^T: one row per feature
    if init is not None:
        if (init.d_in, init.d_sae) != (d, n_features):
            raise WhiteboxError(f"init SAE is {init.d_in} -> {init.d_sae}, expected {d} -> {n_features}")
        w_enc_t, b_enc = init.w_enc.detach().float().T.contiguous(), init.b_enc.detach().float().clone()
        w_dec, b_dec = init.w_dec.detach().float().clone(), init.b_dec.detach().float().clone()
    params = [w_enc_t, b_enc, w_dec, b_dec] = [p.to(device) for p in (w_enc_t, b_enc, w_dec, b_dec)]
    try:
        opt = torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError):  # no fused Adam for this build / device
        opt = torch.optim.Adam(params, lr=lr)
    decay_from = int(steps * (1 - lr_decay))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 1.0 if s < decay_from else max(0.0, (steps - s) / max(1, steps - decay_from)))
    last_fired = torch.zeros(n_features, dtype=torch.long, device=device)
    sample = _rows(x, torch.randperm(n, generator=gen)[:8192]).to(device)

    def build() -> SAE:
        return SAE(w_enc_t.T.contiguous(), b_enc.clone(), w_dec.clone(), b_dec.clone(), activation="topk", k=k)

    initial = reconstruction_mse(build(), sample)
    aux_steps = 0
    for step in progress(range(1, steps + 1), desc="SAE training (steps)", enabled=show_progress):
        batch = _rows(x, torch.randint(0, n, (drawn,), generator=gen)).to(device)
        dead = torch.nonzero(step - 1 - last_fired > dead_steps).flatten() if aux_coef > 0 else None
        idx, fired = topk_sae_gradients(params, batch, mean, k, dead, aux_k=aux_k, aux_coef=aux_coef)
        last_fired[idx[fired]] = step
        aux_steps += int(dead is not None and dead.numel() > 0)
        opt.step()
        sched.step()
        w_dec /= w_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)
    trained = build().to("cpu")
    trained.metadata.update({
        "trainer": "whitebox_eval.sae.training.train_topk_sae", "steps": steps, "lr": lr, "seed": seed,
        "batch_size": batch_size, "aux_k": aux_k, "aux_coef": aux_coef, "dead_tokens": dead_tokens,
        "dead_steps": dead_steps, "lr_decay": lr_decay, "n_training_vectors": int(n), "initial_mse": initial,
        "final_mse": reconstruction_mse(trained, sample.cpu()), "steps_with_aux_loss": aux_steps,
        "final_dead_fraction": float((steps - last_fired > dead_steps).float().mean()),
    })
    return trained
