"""``whitebox-eval mui train-sae`` and ``mui sae-fidelity``: SAEs for feature MUI (paper 001 eq. 4-6, 9),
trained on real text and measured with the field's fidelity figures (imports nothing heavy until run)."""

from __future__ import annotations

import click

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.bundled import MODEL_SPEC_HELP as MODEL_HELP
from whitebox_eval.command_options import dtype_option, model_load_options, resolved_dtype



@click.command("train-sae")
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@click.option("--layer", type=click.IntRange(min=0), required=True, help="block whose output residual stream (hook_resid_post) is encoded")
@click.option("--out", required=True, help="folder for cfg.json + sae_weights.safetensors (SAELens layout) and fidelity.json")
@click.option("--text", "text", multiple=True,
              help="training text: plain text, JSON lines (text field), JSON, CSV, or a folder of them, or "
              "hf:DATASET[:CONFIG][@SPLIT] when online (repeatable); without it the model generates text from a few "
              "seed prompts (poor SAEs; a warning says so)")
@click.option("--tokens", type=click.IntRange(min=1), default=None,
              help="at most this many training tokens (default: all of --text; 8192 generated without it)")
@click.option("--context", type=click.IntRange(min=2), default=256, show_default=True, help="tokens per training chunk")
@click.option("--heldout", type=click.FloatRange(0.0, 1.0, max_open=True), default=0.05, show_default=True,
              help="share of each file's chunks (its end) held out for the fidelity figures")
@click.option("--eval-tokens", type=click.IntRange(min=1), default=16384, show_default=True,
              help="held-out tokens the fidelity figures are measured on")
@click.option("--d-sae", type=click.IntRange(min=1), default=4096, show_default=True,
              help="number of features (4096 suits ~300k training tokens: larger dictionaries leave more features "
              "that never fire on held-out text)")
@click.option("--k", type=click.IntRange(min=1), default=32, show_default=True, help="active features per token (TopK)")
@click.option("--steps", type=click.IntRange(min=1), default=2000, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=512, show_default=True, help="tokens per training step")
@click.option("--lr", type=click.FloatRange(min=0.0, min_open=True), default=2e-3, show_default=True)
@click.option("--aux-k", type=click.IntRange(min=1), default=None, help="dead features in the auxiliary loss (default d_model/2)")
@click.option("--aux-coef", type=click.FloatRange(min=0.0), default=1 / 32, show_default=True,
              help="weight of the auxiliary dead-feature loss (Gao et al. 2024: 1/32; 0 turns it off)")
@click.option("--dead-window", type=click.IntRange(min=1), default=10_240, show_default=True,
              help="a feature not firing in this many training tokens is dead and joins the auxiliary loss; keep it "
              "no longer than --eval-tokens so features that would never fire on the held-out text are revived")
@click.option("--cache", default=None, help="folder caching collected residuals for reuse (default: OUT/../.residual-cache)")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch CPU threads (default: all cores)")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@model_load_options
@dtype_option
def train_sae(model, layer, out, text, tokens, context, heldout, eval_tokens, d_sae, k, steps, batch_size, lr, aux_k,
              aux_coef, dead_window, cache, threads, seed, dtype) -> None:
    """Train a TopK SAE on one layer's residual stream from real text, and measure its fidelity.

    \b
    Residuals are collected with the forward stopped after the hooked block and cached;
    the SAE keeps dead features alive with Gao et al.'s auxiliary loss; the fidelity
    figures (per-token and pooled explained variance, MSE, L0, dead/dense features, and
    next-token loss clean / with the reconstruction spliced in / with the layer zeroed)
    are measured on held-out chunks and written to OUT/fidelity.json.
    Use it for feature MUI: whitebox-eval mui --task ssd --score sae --sae OUT
    """
    import os
    from pathlib import Path

    import torch

    from whitebox_eval.models import load_model
    from whitebox_eval.sae.training import report_lines, train_sae_for_model

    torch.set_num_threads(threads or os.cpu_count() or 1)
    cache_dir = Path(cache) if cache else Path(out).resolve().parent / ".residual-cache"
    rep = train_sae_for_model(load_model(model, dtype=resolved_dtype(dtype, model)), layer, out, text=list(text) or None,
                              n_tokens=tokens, context=context, heldout=heldout, d_sae=d_sae, k=k, steps=steps, lr=lr,
                              batch_size=batch_size, seed=seed, aux_k=aux_k, aux_coef=aux_coef,
                              dead_tokens=dead_window, cache_dir=cache_dir,
                              eval_tokens=eval_tokens)
    for line in report_lines(rep):
        click.echo(line)
    click.echo(f"saved: {rep.path}")


@click.command("sae-fidelity")
@click.option("--model", default="smollm2-135m", show_default=True, help=MODEL_HELP)
@click.option("--sae", "sae_spec", required=True, help="[LAYER=|HOOK=]SOURCE: a folder or file, hf:ORG/REPO/PATH or saelens:RELEASE/SAE_ID (as mui --sae)")
@click.option("--text", "text", multiple=True, required=True, help="text files or folders (repeatable), read as train-sae reads them")
@click.option("--context", type=click.IntRange(min=2), default=256, show_default=True)
@click.option("--heldout", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=0.05, show_default=True,
              help="evaluate on the end of each file, the share train-sae holds out")
@click.option("--eval-tokens", type=click.IntRange(min=1), default=16384, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch CPU threads (default: all cores)")
@click.option("--json", "json_out", default=None, help="write the figures to this JSON file")
@model_load_options
@dtype_option
def sae_fidelity(model, sae_spec, text, context, heldout, eval_tokens, threads, json_out, dtype) -> None:
    """Fidelity figures of an existing SAE on the held-out chunks of --text (as train-sae reports them)."""
    import json
    import os
    from pathlib import Path

    import torch

    from whitebox_eval.models import load_model
    from whitebox_eval.sae.sets import load_sae_set
    from whitebox_eval.sae.fidelity import evaluate_fidelity, fidelity_lines
    from whitebox_eval.sae.text import chunk_text, first_tokens

    torch.set_num_threads(threads or os.cpu_count() or 1)
    lm = load_model(model, dtype=resolved_dtype(dtype, model))
    sae_set = load_sae_set([sae_spec], lm.arch)  # its hook and width checked against this model
    held = first_tokens(chunk_text(lm.tokenizer, list(text), context=context, heldout=heldout).heldout, eval_tokens)
    if not held:
        raise WhiteboxError("the held-out share of --text has no chunk; give more text or a larger --heldout")
    fid = evaluate_fidelity(lm, sae_set.saes[0], sae_set.layers[0], held, point=sae_set.point)
    click.echo(f"SAE {sae_set.paths[0]} (layer {sae_set.layers[0]}) on held-out text:")
    for line in fidelity_lines(fid):
        click.echo(line)
    if json_out:
        Path(json_out).write_text(json.dumps(fid, indent=2))
