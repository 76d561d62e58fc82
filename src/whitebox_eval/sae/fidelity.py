"""How faithfully an SAE describes the model: the field's fidelity measures (SAELens' evals,
SAEBench's core metrics) on a set of token sequences.

Positions: every real (non-padding) token of a sequence except its first. The first position
is the attention sink, whose residual norm is an outlier that dominates pooled variance;
padding is not text. The same rule holds for every figure, at training time (held-out text)
and at ``mui --score sae`` time (the task's prompt + response tokens):

- ``explained_variance`` (per token, SAELens' definition): mean over tokens of
  ``1 - ||x - x_hat||^2 / ||x - mean(x)||^2``, the mean taken over the evaluated tokens;
- ``explained_variance_pooled``: ``1 - sum ||x - x_hat||^2 / sum ||x - mean(x)||^2``;
- ``mse``: mean of ``(x - x_hat)^2`` over tokens and dimensions; ``l0``: mean active features;
- ``dead_fraction``: features never active on these tokens; ``dense_fraction``: features
  active on more than 10% of them (SAEBench);
- loss recovered: next-token cross-entropy (mean over the predictions made at the kept
  positions) clean, with the SAE's reconstruction spliced into its site at the kept positions
  (``ce_loss_sae``: the block's output for residual SAEs, the MLP-output or attention-output
  module's output, o_proj's or the down projection's input; a mid-block residual through the
  attention output), and with that site zeroed there (``ce_loss_zero``);
  ``delta_loss = ce_loss_sae - ce_loss_clean`` (nats) and
  ``ce_loss_score = (ce_loss_zero - ce_loss_sae) / (ce_loss_zero - ce_loss_clean)``.
"""

from __future__ import annotations

import math

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine, Replace, batch_from_ids
from whitebox_eval.sae.encoding import SAE
from whitebox_eval.runs.progress import progress

POSITIONS = "every real (non-padding) token except the first of each sequence (the attention-sink position)"
DENSE_DENSITY = 0.1
"""A feature active on more than this share of tokens counts as dense (SAEBench)."""

THRESHOLDS = {"explained_variance": 0.70, "delta_loss": 0.30, "ce_loss_score": 0.95, "dead_fraction": 0.50}
"""Below the first and third, above the second and fourth, the SAE describes the model poorly and
feature MUI from it is flagged. Released SAEs (Gemma Scope, Llama Scope) cost about a tenth of a
nat and recover well above 0.9 of the loss; the bundled-model target of ``train-sae`` is stricter
(per-token EV >= 0.80, delta loss <= 0.20, CE loss score >= 0.98, dead <= 5%). The dead share is
judged on running text only (``judge_dead``: held-out text at training time, ``sae-fidelity``),
and only where the tokens hold at least 10 activations per feature (``n_tokens * l0 >= 10 *
d_sae``). On a task's tokens it is reported, never judged: a narrow task uses few features, and
the share it uses is what feature MUI measures."""


def _spliced(lm, batch, layer: int, point: str, replace, edits_before=()):
    """Logits ``[B, S, vocab]`` (example coordinates) with the SAE's input site of ``layer`` replaced by
    ``replace(h)`` (``h``: the site's values in example coordinates; a ``replace`` that returns
    ``h`` only looks). The residual points are read at the block's output; the others at their
    own module (``Engine.run`` with a :class:`~whitebox_eval.internals.Replace` edit).
    ``edits_before``: the model's own edits (a study's ``--edit``), applied first at every site: the
    SAE reads and replaces what the edited model computes."""
    arch = lm.arch
    if point in ("resid", "resid_pre"):
        edits = [Replace("resid", hooked_block(layer, point), replace)]
    elif point in ("mlp_out", "attn_out", "mlp_act"):
        edits = [Replace(point, layer, replace)]
    elif point == "head_out":  # the engine's view is [.., heads, head_dim]; the SAE reads o_proj's input [.., heads * head_dim]
        def flat(h):
            x = h.flatten(-2)
            new = replace(x)
            return h if new is x else new.unflatten(-1, h.shape[-2:])

        edits = [Replace(point, layer, flat)]
    elif point == "resid_mid":  # resid_mid = resid_pre + attn_out: replacing it is replacing attn_out by r - resid_pre
        if arch.parallel_residual:
            raise WhiteboxError(f"{arch.family.name} has no residual between attention and MLP (parallel residual)")
        entering: dict[str, torch.Tensor] = {}

        def grab(x):
            entering["x"] = x
            return x

        edits = [Replace("resid_pre", layer, grab), Replace("attn_out", layer, lambda a: _shifted(replace, entering["x"], a))]
    else:
        raise WhiteboxError(f"loss recovered cannot splice an SAE at {point}")
    return batch.unpad(Engine(lm).run(batch, edits=[*edits_before, *edits], logits="all").logits, 1)


def _shifted(replace, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """attn_out such that resid_pre + attn_out = replace(resid_pre + attn_out); ``a`` itself when
    ``replace`` only looks (the clean pass stays the model's own)."""
    mid = x + a
    new = replace(mid)
    return a if new is mid else new - x


def hooked_block(layer: int, point: str) -> int:
    """The decoder block whose output is the SAE's input: ``resid`` (resid_post) reads block
    ``layer``, ``resid_pre`` reads block ``layer - 1``."""
    if point == "resid_pre":
        if layer < 1:
            raise WhiteboxError("a resid_pre SAE at layer 0 reads the embeddings; loss recovered is not supported there")
        return layer - 1
    return layer


def _batches(sequences: list[list[int]], batch_size: int, pad: int):
    for s in range(0, len(sequences), batch_size):
        part = sequences[s:s + batch_size]
        width = max(len(q) for q in part)
        ids = torch.full((len(part), width), pad, dtype=torch.long)
        mask = torch.zeros((len(part), width), dtype=torch.long)
        for i, q in enumerate(part):
            ids[i, :len(q)] = torch.tensor(q)
            mask[i, :len(q)] = 1
        yield ids, mask


def evaluate_fidelity(lm, sae: SAE, layer: int, sequences: list[list[int]], *, point: str = "resid",
                      batch_size: int = 8, judge_dead: bool = True, show_progress: bool | None = False,
                      edits=()) -> dict:
    """Every figure of the module docstring for one SAE on ``sequences`` (token id lists, right-padded
    here), with a warning when one is on the wrong side of :data:`THRESHOLDS` (the dead share only
    with ``judge_dead``, for running text). ``edits``: the model is the one under these engine edits
    (every pass, the clean one included)."""
    sequences = [list(q) for q in sequences if len(q) >= 2]
    if not sequences:
        raise WhiteboxError("SAE fidelity needs sequences of at least 2 tokens")
    if point in ("resid", "resid_pre"):
        hooked_block(layer, point)  # refused before any pass: a resid_pre SAE at layer 0
    elif point == "resid_mid" and lm.arch.parallel_residual:
        raise WhiteboxError(f"{lm.arch.family.name} has no residual between attention and MLP (parallel residual)")
    xs, sse, active, ce = [], [], torch.zeros(sae.d_sae, dtype=torch.long), {"clean": 0.0, "sae": 0.0, "zero": 0.0}
    n_pred = 0
    for ids, mask in progress(_batches(sequences, batch_size, lm.pad_id), total=math.ceil(len(sequences) / batch_size),
                              desc="SAE fidelity evaluation (batches)", enabled=show_progress):
        keep = mask.bool().clone()
        keep[:, 0] = False
        seen: dict[str, torch.Tensor] = {}

        def record(h, seen=seen):
            seen["h"] = h
            return h

        pred = keep[:, :-1] & mask[:, 1:].bool()  # kept positions that have a next token
        targets = ids[:, 1:][pred]
        n_pred += int(pred.sum())

        def nll(logits: torch.Tensor, pred=pred, targets=targets) -> float:
            # on the head's device: only the kept rows are normalised, never [B, S, V] copied to the host
            rows = logits[:, :-1][pred.to(logits.device)].float()
            lp = torch.log_softmax(rows, dim=-1)
            return float(-lp.gather(1, targets.to(lp.device)[:, None]).sum())

        batch = batch_from_ids([r[:n] for r, n in zip(ids.tolist(), mask.sum(1).tolist())], lm.pad_id).to(lm.device)
        ce["clean"] += nll(_spliced(lm, batch, layer, point, record, edits))
        h = seen["h"]  # on the hooked block's device (a device map puts it anywhere)
        keep_h = keep.to(h.device)
        sae = sae.to(h.device)
        x = h[keep_h].float()
        f = sae.encode(x)
        x_hat = sae.decode(f).float()
        xs.append(x.cpu())
        sse.append(((x - x_hat) ** 2).sum(-1).double().cpu())
        active += (f > 0).sum(0).cpu()
        recon = torch.zeros_like(h)
        recon[keep_h] = x_hat.to(h.dtype)
        where = keep_h[..., None]
        ce["sae"] += nll(_spliced(lm, batch, layer, point, lambda h, w=where, r=recon: torch.where(w, r, h), edits))
        ce["zero"] += nll(_spliced(lm, batch, layer, point, lambda h, w=where: torch.where(w, 0.0, h), edits))
    x = torch.cat(xs).double()
    sse_t = torch.cat(sse)
    centred = ((x - x.mean(0)) ** 2).sum(-1)
    n = int(x.shape[0])
    clean, with_sae, zero = (ce[k] / max(n_pred, 1) for k in ("clean", "sae", "zero"))
    density = active.double() / n
    out = {
        "n_sequences": len(sequences), "n_tokens": n, "n_predictions": n_pred, "positions": POSITIONS,
        "explained_variance": float((1 - sse_t / centred.clamp_min(1e-12)).mean()),
        "explained_variance_pooled": float(1 - sse_t.sum() / centred.sum()),
        "mse": float(sse_t.sum() / (n * sae.d_in)), "l0": float(active.sum() / n),
        "dead_fraction": float((active == 0).double().mean()), "n_dead": int((active == 0).sum()),
        "dense_fraction": float((density > DENSE_DENSITY).double().mean()), "d_sae": sae.d_sae,
        "ce_loss_clean": clean, "ce_loss_sae": with_sae, "ce_loss_zero": zero,
        "delta_loss": with_sae - clean,
        "ce_loss_score": (zero - with_sae) / (zero - clean) if zero != clean else float("nan"),
        "thresholds": dict(THRESHOLDS),
    }
    return judged(out, judge_dead=judge_dead)


def judged(fid: dict, *, judge_dead: bool = True) -> dict:
    """``fid`` with its ``warning`` set from :func:`poor_figures` (removed when nothing is poor), so
    figures read back from a file are judged by today's rule."""
    fid.pop("warning", None)
    problems = poor_figures(fid, judge_dead=judge_dead) if fid.get("n_tokens") else []
    if problems:
        fid["warning"] = "poor SAE: " + ", ".join(problems) + "; feature MUI from it describes the model unreliably"
    return fid


def poor_figures(fid: dict, *, judge_dead: bool = True) -> list[str]:
    """The figures of ``fid`` on the wrong side of :data:`THRESHOLDS` (the dead share only with ``judge_dead``)."""
    t, out = THRESHOLDS, []
    ev, dl, cs, dead = (fid.get(k, float("nan")) for k in ("explained_variance", "delta_loss", "ce_loss_score", "dead_fraction"))
    if not ev >= t["explained_variance"]:
        out.append(f"per-token explained variance {ev:.3f} < {t['explained_variance']}")
    if not dl <= t["delta_loss"]:
        out.append(f"delta loss {dl:.3f} nats > {t['delta_loss']}")
    if not cs >= t["ce_loss_score"]:
        out.append(f"CE loss score {cs:.3f} < {t['ce_loss_score']}")
    if judge_dead and dead > t["dead_fraction"] and fid.get("n_tokens", 0) * fid.get("l0", 0) >= 10 * fid.get("d_sae", 1):
        out.append(f"{100 * dead:.0f}% of features never active")  # only judged where each could fire ~10 times
    return out


def fidelity_lines(fid: dict) -> list[str]:
    """The figures as a small table for the terminal."""
    if not fid.get("n_tokens"):
        return ["no tokens evaluated"]
    def fmt(v, spec: str) -> str:
        return "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)

    return [
        f"  tokens {fid['n_tokens']} ({fid['n_sequences']} sequences; first position and padding left out)",
        (f"  explained variance  per token {fmt(fid['explained_variance'], '.3f')}   pooled "
         f"{fmt(fid['explained_variance_pooled'], '.3f')}   MSE {fmt(fid['mse'], '.4g')}   L0 {fmt(fid['l0'], '.1f')}"),
        (f"  next-token loss     clean {fid['ce_loss_clean']:.3f}   SAE {fid['ce_loss_sae']:.3f}   zeroed "
         f"{fid['ce_loss_zero']:.3f}   delta {fid['delta_loss']:+.3f} nats   CE loss score "
         f"{fmt(fid['ce_loss_score'], '.3f')}"),
        (f"  features            dead {100 * fid['dead_fraction']:.1f}% ({fid['n_dead']} of {fid['d_sae']})   "
         f"dense (>10% of tokens) {100 * fid['dense_fraction']:.1f}%"),
    ] + ([f"  WARNING: {fid['warning']}"] if "warning" in fid else [])
