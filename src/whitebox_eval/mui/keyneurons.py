"""Key neurons and key features of one sample from a teacher-forced pass (paper 001 sec. 2.1, eq. 2-6, 13-15).

For a prompt ``x`` and response ``y = (y_1..y_n)``, the sequence ``x + y`` runs once
through the engine. Position alignment: the token ``y_j`` sits at position
``p_j = len(x) + j - 1`` (0-based ``j``), and it is *predicted* at position
``p_j - 1``. So the scored positions are ``len(x) - 1 .. len(x) + n - 2`` and
position ``p`` is scored against the token at ``p + 1`` (eq. 2's ``f(i, l, y_j | x + y_<j)``).

Scores (``KeyNeuronConfig.score``):

* ``contribution`` (eq. 2): activation at ``p`` times ``W_down[:, i] . W_U[y]``, with only
  the unembedding rows of the response tokens gathered (never ``d_ff x vocab``), via
  :func:`whitebox_eval.mui.neuron_scores.neuron_contribution_scores`.
* ``activation`` (eq. 13): the activation itself.
* ``ig`` (eq. 14): integrated gradients with a zero baseline, ``m`` steps (10). The
  activations of one layer at all scored positions are scaled together by
  ``alpha_k`` (patched into the pass) and ``F = sum_j log p(y_j)`` is differentiated;
  one layer at a time (Dai et al.) or, with ``ig_joint_layers``, all layers on one
  path (``m`` passes instead of ``m x n_layers``; path points share a pass as copies of
  the batch up to ``IG_TOKENS_PER_PASS`` tokens, and no weight gradient is computed).
  ``F`` sums over the response, so the
  gradient at ``p`` also carries ``a_p``'s effect on later tokens (the authors
  differentiate the whole response's loss too).
* ``sae`` (eq. 5): SAE feature activations at ``p``, read at each SAE's own hook (the residual
  stream, an MLP or attention output, ``hook_z``: :mod:`whitebox_eval.internals.hook_points`).

``response_level`` sums the token scores over the response (eq. 15) before
thresholding. Activations are the input of the down projection (``mlp_act`` =
``act(gate) * up`` for gated MLPs, the natural reading of eq. 2's ``sigma(W_in x)``
since that is what ``W_down`` multiplies); ``mlp_gate_act`` (``act(gate)`` alone) is what
the authors' code hooked. Thresholds are App. A.4's (:mod:`whitebox_eval.mui.thresholds`);
the default is the paper's eq. 8 / 10: per layer, all (response token, neuron) pairs of
the sample are pooled and the neurons of the top 1 per mille x ``d_ff`` pairs are kept
(``unit="pair"``; ``unit="neuron"`` ranks neurons by their best score and keeps exactly
``k`` per layer, which is not the paper's rule).

``score_token`` (where the authors' code departs from eq. 2): ``"next"`` (the paper)
scores position ``p`` against the token it predicts, ``y`` at ``p + 1``; ``"at"`` (the
authors' ``get_neuron.py``) scores the response positions themselves against the token
*at* ``p`` (``projection[:, input_ids]`` over ``prompt_index:prompt_end_index``).
Together with ``activation="mlp_gate_act"`` and ``unit="pair"`` this reproduces their code
(``mui --reference-code-compat``).

How far apart the two are (measured on SmolLM2-135M-Instruct, its 24 greedy
arithmetic-gen answers at the 1024-token budget, eq. 2 contribution scores): key-set
Jaccard, paper vs authors' code, per sample mean 0.12 (range 0.03-0.25) at the default
k = 1 per layer and 0.11 (0.08-0.15) at k = 15; changing only the scored token gives
0.21 / 0.28, only act(gate) 0.17 / 0.16. MUI: 0.571% (paper) vs 0.423% (authors) at
k = 1; 5.20% vs 3.79% at k = 15, where the unique-neuron rule would give 6.94%.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, Engine, Patch, Prefix, batch_from_ids
from whitebox_eval.internals.prefixes import MIN_UNMARKED_TOKENS, PrefixCache
from whitebox_eval.internals.attribution import frozen_parameters
from whitebox_eval.mui.neuron_scores import (
    DEFAULT_IG_STEPS,
    FinalNorm,
    activation_scores,
    integrated_gradient_scores,
    neuron_contribution_scores,
    riemann_alphas,
)
from whitebox_eval.sae.encoding import ReconstructionStats, sae_feature_scores
from whitebox_eval.sae.sets import SAESet, load_sae_set  # noqa: F401 (load_sae_set: the suite's one name for it)
from whitebox_eval.mui.thresholds import DEFAULT_SAE_TOPK, ThresholdMethod, Ties, Unit, key_mask

ScoreKind = Literal["contribution", "activation", "ig", "sae"]
ActivationPoint = Literal["mlp_act", "mlp_gate_act"]
ScoreToken = Literal["next", "at"]
SCORE_KINDS: tuple[str, ...] = ("contribution", "activation", "ig", "sae")


@dataclass(frozen=True)
class KeyNeuronConfig:
    """How a sample's key set is found: score, activation point, final norm, threshold."""

    score: ScoreKind = "contribution"
    activation: ActivationPoint = "mlp_act"
    final_norm: FinalNorm = "none"
    response_level: bool = False
    threshold: ThresholdMethod = "top_fraction"
    threshold_value: float | None = None
    unit: Unit = "pair"
    ties: Ties = "include"
    ig_steps: int = DEFAULT_IG_STEPS
    ig_joint_layers: bool = False
    chunk_size: int = 256
    score_token: ScoreToken = "next"

    def validate(self) -> KeyNeuronConfig:
        if self.score not in SCORE_KINDS:
            raise WhiteboxError(f"score must be one of {', '.join(SCORE_KINDS)}, got {self.score!r}")
        if self.activation not in ("mlp_act", "mlp_gate_act"):
            raise WhiteboxError(f"activation must be mlp_act or mlp_gate_act, got {self.activation!r}")
        if self.score == "ig" and self.activation != "mlp_act":
            raise WhiteboxError("integrated gradients patch the down projection's input: use --activation mlp_act with --score ig")
        if self.final_norm not in ("none", "weight", "full"):
            raise WhiteboxError(f"final_norm must be none, weight or full, got {self.final_norm!r}")
        if self.ig_steps < 1:
            raise WhiteboxError(f"ig_steps must be >= 1, got {self.ig_steps}")
        if self.score_token not in ("next", "at"):
            raise WhiteboxError(f"score_token must be next (eq. 2) or at (authors' code), got {self.score_token!r}")
        if self.score_token == "at" and self.score not in ("contribution", "activation"):
            raise WhiteboxError("scoring the token at p (authors' code) applies to --score contribution or activation only")
        return self


@dataclass
class ScoredSequence:
    """Prompt and response token ids of one sample."""

    prompt_ids: list[int]
    response_ids: list[int]

    @property
    def ids(self) -> list[int]:
        return [*self.prompt_ids, *self.response_ids]


def predicting_positions(n_prompt: int, n_response: int) -> list[int]:
    """Positions whose next token is a response token: ``n_prompt - 1 .. n_prompt + n_response - 2``."""
    if n_prompt < 1:
        raise WhiteboxError("the prompt must have at least one token")
    if n_response < 1:
        raise WhiteboxError("the response is empty: nothing to score (did generation stop at once?)")
    return list(range(n_prompt - 1, n_prompt - 1 + n_response))


def scored_positions(n_prompt: int, n_response: int, score_token: ScoreToken = "next") -> list[int]:
    """Scored positions: those predicting response tokens (``"next"``, eq. 2), or the
    response tokens' own positions ``n_prompt .. n_prompt + n_response - 1`` (``"at"``,
    the authors' code)."""
    pos = predicting_positions(n_prompt, n_response)
    return [p + 1 for p in pos] if score_token == "at" else pos


@dataclass
class _Layout:
    batch: object
    positions: list[list[int]]  # [B][P], rows padded by repeating their last position
    lengths: list[int]  # scored positions per row
    targets: torch.Tensor  # [B, P] next-token ids (padding entries repeat the last)
    prefix: Prefix | None = None  # cached tokens every sequence starts with (the batch holds the rest)

    @property
    def valid(self) -> torch.Tensor:
        p = len(self.positions[0])
        return torch.arange(p)[None, :] < torch.tensor(self.lengths)[:, None]


def _layout(engine: Engine, seqs: Sequence[ScoredSequence], score_token: ScoreToken = "next",
            prefixes: PrefixCache | None = None) -> _Layout:
    if not seqs:
        raise WhiteboxError("no sequences to score")
    pos = [scored_positions(len(s.prompt_ids), len(s.response_ids), score_token) for s in seqs]
    width = max(len(p) for p in pos)
    padded = [p + [p[-1]] * (width - len(p)) for p in pos]
    shift = 0 if score_token == "at" else 1
    targets = torch.tensor([[s.ids[q + shift] for q in row] for s, row in zip(seqs, padded)], dtype=torch.long)
    # prompts that share their beginning (a demonstration, a chat header): computed once, the scored positions after it
    prefix = None if prefixes is None else prefixes.for_batch(
        [s.ids for s in seqs], limit=min(len(s.prompt_ids) for s in seqs) - 1, min_tokens=MIN_UNMARKED_TOKENS)
    skip = prefix.length if prefix is not None else 0
    batch = batch_from_ids([s.ids[skip:] for s in seqs], pad_id=engine.loaded.pad_id).to(engine.loaded.device)
    return _Layout(batch, padded, [len(p) for p in pos], targets, prefix)


def final_norm_linearisation(arch) -> tuple[torch.Tensor, bool, float]:
    """(effective weight, centre?, eps) of the final norm, for ``final_norm='weight'/'full'``.

    Gemma's RMSNorm multiplies by ``1 + weight``; LayerNorm (GPT-2) centres first.
    """
    norm = arch.final_norm
    name = type(norm).__name__.lower()
    weight = arch.parameter(norm).detach().float()  # loaded if a device map offloaded the norm
    if "gemma" in name:
        weight = 1.0 + weight
    center = isinstance(norm, torch.nn.LayerNorm)
    eps = float(getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6)))
    return weight, center, eps


def _split(flat: torch.Tensor, lengths: Sequence[int]) -> list[torch.Tensor]:
    return list(torch.split(flat, list(lengths), dim=0))


def _contribution(engine: Engine, lay: _Layout, cfg: KeyNeuronConfig) -> list[torch.Tensor]:
    arch = engine.arch
    caps = [Capture(cfg.activation, lay.positions, name="act")]
    if cfg.final_norm == "full":
        caps.append(Capture("resid", lay.positions, [arch.n_layers - 1], name="final_resid"))
    with torch.no_grad():
        trace = engine.run(lay.batch, caps, logits=False, prefix=lay.prefix)
        valid = lay.valid.to(trace["act"].device)
        acts = trace["act"].permute(0, 2, 1, 3)[valid]  # [N, L, d_ff]
        targets = lay.targets.to(valid.device)[valid]  # [N]
        w_u = arch.unembed_weight().detach()
        u = w_u[targets.to(w_u.device)]  # [N, d_model] only
        norm_weight = norm_scale = None
        center = False
        if cfg.final_norm != "none":
            norm_weight, center, eps = final_norm_linearisation(arch)
            if cfg.final_norm == "full":
                h = trace["final_resid"][:, 0][valid].float()  # [N, d_model]
                if center:
                    h = h - h.mean(-1, keepdim=True)
                norm_scale = (h.pow(2).mean(-1) + eps).sqrt()
        out = torch.empty(acts.shape, dtype=torch.float32)
        for layer in range(arch.n_layers):
            out[:, layer] = neuron_contribution_scores(
                acts[:, layer], arch.down_proj_weight(layer).detach(), u, final_norm=cfg.final_norm,
                norm_weight=norm_weight, norm_scale=norm_scale, norm_center=center, chunk_size=cfg.chunk_size,
            ).cpu()
    return _split(out, lay.lengths)


def _activation(engine: Engine, lay: _Layout, cfg: KeyNeuronConfig) -> list[torch.Tensor]:
    with torch.no_grad():
        trace = engine.run(lay.batch, [Capture(cfg.activation, lay.positions, name="act")], logits=False, prefix=lay.prefix)
        valid = lay.valid.to(trace["act"].device)
        acts = trace["act"].permute(0, 2, 1, 3)[valid]  # [N, L, d_ff]
        flat = torch.stack([activation_scores(acts[:, l]) for l in range(acts.shape[1])], dim=1).cpu()
    return _split(flat, lay.lengths)


IG_TOKENS_PER_PASS = 2048
"""Token budget of one integrated-gradients pass when path points are batched together."""


def _repeat_batch(batch, c: int):
    """``c`` copies of a batch stacked along the batch axis (copy-major)."""
    if c == 1:
        return batch
    return type(batch)(batch.input_ids.repeat(c, 1), batch.attention_mask.repeat(c, 1), batch.position_ids.repeat(c, 1),
                       batch.lengths.repeat(c), batch.prefix_len)


def _integrated_gradients(engine: Engine, lay: _Layout, cfg: KeyNeuronConfig) -> list[torch.Tensor]:
    arch = engine.arch
    with torch.no_grad():
        clean = engine.run(lay.batch, [Capture("mlp_act", lay.positions, name="act")], logits=False,
                           prefix=lay.prefix)["act"]  # [B, L, P, F]
    targets = lay.targets.to(clean.device)
    valid = lay.valid.to(clean.device)
    alphas = riemann_alphas(cfg.ig_steps)
    groups = [list(range(arch.n_layers))] if cfg.ig_joint_layers else [[l] for l in range(arch.n_layers)]
    # eq. 14 needs only the mean gradient over the path: a running sum on the activations' device
    # (one [B, L, P, F] float32), never every step's gradient
    grad_sum = torch.zeros(clean.shape, dtype=torch.float32, device=clean.device)
    b = lay.batch.size
    # several path points ride in one pass as copies of the batch (rows never interact), up to
    # IG_TOKENS_PER_PASS tokens: never more than one unbatched pass when the batch alone is larger
    per_pass = max(1, min(cfg.ig_steps, IG_TOKENS_PER_PASS // (b * lay.batch.seq_len)))
    # the patched activations are the only leaves that need a gradient: weights are frozen for the call,
    # so no weight gradient is computed and layers below the patched ones build no graph
    with frozen_parameters(engine.model), torch.enable_grad():
        for start in range(0, cfg.ig_steps, per_pass):
            ks = list(range(start, min(start + per_pass, cfg.ig_steps)))
            c = len(ks)
            batch = _repeat_batch(lay.batch, c)
            alpha = alphas[ks].to(clean.device, clean.dtype).repeat_interleave(b).view(-1, 1, 1)  # [c*B, 1, 1]
            for group in groups:
                scaled = [(alpha * clean[:, l].repeat(c, 1, 1)).detach().requires_grad_(True) for l in group]  # [c*B, P, F]
                edits = [Patch("mlp_act", l, lay.positions * c, x) for l, x in zip(group, scaled)]
                trace = engine.run(batch, (), edits, logits=lay.positions * c, grad=True, prefix=lay.prefix)
                logp = torch.log_softmax(trace.logits.float(), dim=-1)  # [c*B, P, V]
                f = logp.gather(-1, targets.repeat(c, 1).unsqueeze(-1).to(logp.device)).squeeze(-1)[valid.repeat(c, 1).to(logp.device)].sum()
                for l, g in zip(group, torch.autograd.grad(f, scaled)):
                    grad_sum[:, l] += g.float().to(clean.device).view(c, b, *g.shape[1:]).sum(0)
    a = clean.float().permute(0, 2, 1, 3)[valid]  # [N, L, F]
    g = (grad_sum / cfg.ig_steps).permute(0, 2, 1, 3)[valid]  # the mean gradient, [N, L, F]
    n, L, F = a.shape
    flat = integrated_gradient_scores(a.reshape(n, L * F), g.reshape(1, n, L * F)).reshape(n, L, F).cpu()
    return _split(flat, lay.lengths)


def _sae(engine: Engine, lay: _Layout, sae_set: SAESet) -> list[torch.Tensor]:
    with torch.no_grad():
        trace = engine.run(lay.batch, [Capture(sae_set.point, lay.positions, sae_set.layers, name="x")], logits=False,
                           prefix=lay.prefix)
        valid = lay.valid.to(trace["x"].device)
        captured = trace["x"].flatten(3) if trace["x"].dim() == 5 else trace["x"]  # hook_z: heads concatenated
        x = captured.permute(0, 2, 1, 3)[valid].float()  # [N, L_sae, d_in], encoded where it was captured
        sae_set.saes = [s.to(x.device) for s in sae_set.saes]  # moved once: later batches find them there
        flat = torch.stack([sae_feature_scores(s, x[:, i]) for i, s in enumerate(sae_set.saes)], dim=1)
        if not sae_set.quality:
            sae_set.quality = [ReconstructionStats() for _ in sae_set.saes]
        for i, s in enumerate(sae_set.saes):
            sae_set.quality[i].update(s, x[:, i], flat[:, i])
    return _split(flat.cpu(), lay.lengths)


def token_scores(
    engine: Engine, seqs: Sequence[ScoredSequence], cfg: KeyNeuronConfig = KeyNeuronConfig(),
    sae_set: SAESet | None = None, prefixes: PrefixCache | None = None,
) -> list[torch.Tensor]:
    """Per-sample token-level scores ``[n_response_tokens, n_layers, width]`` from one batched pass.

    Row ``j`` of a sample's scores belongs to position ``len(prompt) - 1 + j``, which
    predicts response token ``j`` (with ``score_token="at"``: position ``len(prompt) + j``). ``width`` is ``d_ff`` (neurons) or ``d_sae`` (features,
    ``n_layers`` = the SAE layers). With ``prefixes``, the tokens the prompts of a batch
    share (a demonstration, a chat header) are computed once and kept for later batches.
    """
    cfg.validate()
    lay = _layout(engine, seqs, cfg.score_token, prefixes)
    if cfg.score == "contribution":
        return _contribution(engine, lay, cfg)
    if cfg.score == "activation":
        return _activation(engine, lay, cfg)
    if cfg.score == "ig":
        return _integrated_gradients(engine, lay, cfg)
    if sae_set is None:
        raise WhiteboxError("score 'sae' needs SAEs: pass --sae LAYER=PATH (train one with `mui train-sae`)")
    return _sae(engine, lay, sae_set)


def sample_key_mask(scores: torch.Tensor, cfg: KeyNeuronConfig = KeyNeuronConfig()) -> torch.Tensor:
    """A sample's key set ``N(t)`` (eq. 3 / 6) as a bool ``[n_layers, width]`` mask.

    ``response_level`` first sums the scores over the response (eq. 15). SAE features
    use top-50 per layer by default (eq. 9) and never count inactive (zero) features.
    """
    s = scores.sum(dim=0, keepdim=True) if cfg.response_level else scores
    if cfg.score == "sae":
        method, value = cfg.threshold, cfg.threshold_value
        if method == "top_fraction" and value is None:
            method, value = "topk", DEFAULT_SAE_TOPK
        return key_mask(s, method, value, unit=cfg.unit, ties=cfg.ties, min_score=0.0)
    return key_mask(s, cfg.threshold, cfg.threshold_value, unit=cfg.unit, ties=cfg.ties)


def key_masks(
    engine: Engine, seqs: Sequence[ScoredSequence], cfg: KeyNeuronConfig = KeyNeuronConfig(),
    sae_set: SAESet | None = None, prefixes: PrefixCache | None = None,
) -> list[torch.Tensor]:
    """Key sets of a batch of samples: :func:`token_scores` then :func:`sample_key_mask`."""
    return [sample_key_mask(s, cfg) for s in token_scores(engine, seqs, cfg, sae_set, prefixes)]


def layer_rankings(scores: torch.Tensor, k_max: int, *, response_level: bool = False, unit: Unit = "pair") -> torch.Tensor:
    """Each layer's ``k_max`` best entries of one sample, best first, as neuron indices ``[n_layers, k_max]``.

    ``unit="pair"`` (eq. 8 / 10, the paper's): the (response token, neuron) pairs of a
    layer are pooled and ranked; column ``r`` holds the neuron of the ``r``-th best pair,
    so a neuron can repeat, and the layer top-k key set for any ``k <= k_max`` is the set
    of neurons in the first ``k`` columns (at most ``k`` neurons; equal to
    ``layer_topk_mask(unit="pair", ties="index")``). ``unit="neuron"``: unique neurons
    ranked by their best score over the response (exactly ``k`` per layer). With
    ``response_level`` the scores are summed over the response first (eq. 15), so both
    units agree. Ties by lower index. Used by sec. 3.8 masking.
    """
    if response_level:
        scores = scores.sum(0, keepdim=True)
    n_pos, n_layers, width = scores.shape
    if unit == "neuron":
        s = scores.amax(0)  # [L, W]
    elif unit == "pair":
        s = scores.permute(1, 0, 2).reshape(n_layers, n_pos * width)  # position-major, as layer_topk_mask
    else:
        raise WhiteboxError(f"unit must be pair or neuron, got {unit!r}")
    k_max = min(k_max, s.shape[1])
    return torch.argsort(-s, dim=1, stable=True)[:, :k_max] % width
