"""Integrated-gradients attribution patching (EAP-IG, Hanna, Pezzelle & Belinkov 2024).

002 sec. 4 ranks heads and MLPs with "integrated gradients-based attribution
patching" and a KL-divergence metric. As in EAP-IG, the *input embeddings* walk
the straight path from the baseline input to the clean input in ``steps`` steps;
at each step the gradient of the metric is read at every component at once, and

    attribution(c) = (a_c(clean) - a_c(baseline)) . mean_k grad_c(baseline + (k - 1/2)/m (clean - baseline))

summed over the component's dimensions (head_dim for a head, nothing for a neuron)
and over token positions. The steps are the midpoints k = 1..m of the path (the
midpoint Riemann rule): with alpha = k/m the last step sits on the clean input, where
a KL-to-clean metric has zero gradient, and one of the m steps would be wasted. The baseline is a corrupted batch with the same token
layout, or zero embeddings. Points: any per-head point (``head_out`` = the head's
output, ``q``/``k``/``v`` = its query/key/value inputs) and ``mlp_act`` (neurons).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.batching import Batch
from whitebox_eval.internals.engine import Engine
from whitebox_eval.internals.requests import Capture

Metric = Callable[[torch.Tensor], torch.Tensor]
"""Maps last-position logits [B, vocab] to one value per example [B]."""

ATTRIBUTABLE = ("head_out", "q", "k", "v", "mlp_act", "resid")


@dataclass
class Attribution:
    """Per-component attributions: ``scores[point]`` is [B, L, H] for per-head points,
    [B, L, d_ff] for ``mlp_act``, [B, L, d_model] for ``resid``; ``per_position`` keeps
    the position axis too ([B, L, S, ...], padded coordinates) when asked."""

    scores: dict[str, torch.Tensor]
    layers: list[int]
    metric_clean: torch.Tensor
    metric_baseline: torch.Tensor
    per_position: dict[str, torch.Tensor] | None = None


@contextmanager
def frozen_parameters(model: torch.nn.Module) -> Iterator[None]:
    """Inside the block no parameter requires a gradient (restored after, even on error).

    A backward pass then reaches only the activations asked for: no weight gradient is
    computed or accumulated, and layers below the first one that needs a gradient build
    no graph at all.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        for p in params:
            p.requires_grad_(False)
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


def kl_divergence_metric(clean_logits: torch.Tensor) -> Metric:
    """KL(P_clean || P) at the last position, the metric of 002 sec. 4 (0 at the clean input)."""
    clean_logp = torch.log_softmax(clean_logits.detach().float(), -1)

    def metric(logits: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(logits.float(), -1)
        return (clean_logp.exp() * (clean_logp - logp)).sum(-1)

    return metric


def logit_difference_metric(good: Sequence[int], bad: Sequence[int]) -> Metric:
    """logit[good_i] - logit[bad_i] per example."""
    g = torch.as_tensor(list(good))
    b = torch.as_tensor(list(bad))

    def metric(logits: torch.Tensor) -> torch.Tensor:
        idx = torch.arange(logits.shape[0])
        return logits[idx, g.to(logits.device)] - logits[idx, b.to(logits.device)]

    return metric


def integrated_gradients(
    engine: Engine,
    batch: Batch,
    metric: Metric,
    *,
    points: Sequence[str] = ("head_out", "mlp_act"),
    layers: Sequence[int] | None = None,
    steps: int = 10,
    baseline: Batch | None = None,
    keep_positions: bool = False,
) -> Attribution:
    """EAP-IG attributions of ``metric`` to every component of ``points`` in ``layers``."""
    for p in points:
        if p not in ATTRIBUTABLE:
            raise WhiteboxError(f"cannot attribute to {p!r}; choose from {', '.join(ATTRIBUTABLE)}")
    if steps < 1:
        raise WhiteboxError("steps must be >= 1")
    if baseline is not None and baseline.input_ids.shape != batch.input_ids.shape:
        raise WhiteboxError(
            f"the baseline batch must have the clean batch's shape {tuple(batch.input_ids.shape)}, got "
            f"{tuple(baseline.input_ids.shape)}: corrupt prompts token-for-token (same length)"
        )
    layer_list = list(range(engine.arch.n_layers)) if layers is None else [engine.arch.check_layer(l) for l in layers]
    caps = [Capture(p, "all", layer_list) for p in points]
    embed = engine.arch.embed
    with torch.no_grad():
        e_clean = embed(batch.input_ids)
        e_base = embed(baseline.input_ids) if baseline is not None else torch.zeros_like(e_clean)
        clean = engine.run(batch, caps, inputs_embeds=e_clean)
        base = engine.run(batch, caps, inputs_embeds=e_base)
    grads = {p: torch.zeros_like(clean[p]) for p in points}
    with frozen_parameters(engine.model), torch.enable_grad():  # gradients reach the activations only, never the weights
        for k in range(1, steps + 1):
            alpha = (k - 0.5) / steps  # midpoints: no step on the clean input (module doc)
            e = (e_base + alpha * (e_clean - e_base)).detach().requires_grad_(True)
            trace = engine.run(batch, [Capture(p, "all", layer_list, keep_grad=True) for p in points], grad=True, inputs_embeds=e)
            torch.autograd.grad(metric(trace.logits).sum(), e)  # the keep_grad hooks record each component's gradient
            for p in points:
                grads[p] += trace.grad(p)
    scores, per_pos = {}, {}
    for p in points:
        contrib = (clean[p] - base[p]) * grads[p] / steps  # [B, L, S, ...]
        if p in ("head_out", "q", "k", "v"):
            contrib = contrib.sum(-1)  # over head_dim -> [B, L, S, H]
        per_pos[p] = contrib
        scores[p] = contrib.sum(2)
    return Attribution(
        scores=scores,
        layers=layer_list,
        metric_clean=metric(clean.logits).detach(),
        metric_baseline=metric(base.logits).detach(),
        per_position=per_pos if keep_positions else None,
    )
