"""The ``sae`` suite's record: an SAE trained into its own run folder (paper 001's feature MUI
reads it); what :mod:`whitebox_eval.suites` lists."""

from __future__ import annotations

from whitebox_eval.runs.record import Mode, Suite


def work(cfg, mode: str) -> tuple[int, float]:
    """Residuals collected (one forward per training token, in chunks of ``context``) and the
    held-out evaluation (three forwards a chunk); a training step (the SAE's own matrix products)
    costs about a fifth of a chunk (20.8 steps/s against 1,157 tokens/s collected)."""
    chunks = int(cfg.tokens or 320_000) / cfg.context
    return 1, chunks + 3 * cfg.eval_tokens / cfg.context + 0.22 * cfg.steps


SUITE = Suite(
    "sae", "A TopK SAE trained on one layer's residual stream from real text, with its fidelity (paper 001).", None,
    {"train": Mode("whitebox_eval.sae.study:SAEConfig", "whitebox_eval.sae.study:run_sae")},
    work,
    rate=0.22,  # a chunk of 256 tokens through SmolLM2-135M on 2 cores (benchmarks/results/sae_training.md)
    tokens_per_unit=256,
    results=("ce_loss_score", "explained_variance", "l0", "mse"),
)
