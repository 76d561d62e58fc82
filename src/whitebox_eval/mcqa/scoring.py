"""Scorers fed by one engine pass per batch (000 sec. 4, eq. 3-4, 6).

From a single forward pass over a batch of MCQ prompts:

- letter logits at the last position over the option labels (baseline, 000 eq. 4);
- QK-scores: pre-RoPE query of the last token · pre-RoPE key of each option's
  representative token, for every layer and head through the GQA map (000 eq. 3);
- Attention-scores: the last token's post-softmax attention on those tokens;
- logit lens: the residual stream after every layer at the last position read through
  the final norm and the unembedding rows of the option labels only (000 App. F, eq. 6).

Options missing from an item (when items of one batch have different option counts)
score ``-inf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, Engine, Prefix, batch_from_ids, logit_lens
from whitebox_eval.internals.packing import pack
from whitebox_eval.internals.requests import Edit
from whitebox_eval.tasks.prompt_tokens import TokenizedPrompt

SCORERS = ("baseline", "qk", "attention", "lens")


@dataclass
class PromptScores:
    """Per-item scores of one batch; arrays over options are padded to ``n_max`` with -inf."""

    letter_logits: np.ndarray  # [B, n]
    qk: np.ndarray | None = None  # [B, L, H, n]
    attention: np.ndarray | None = None  # [B, L, H, n]
    lens: np.ndarray | None = None  # [B, L, n]

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: v for k, v in vars(self).items() if v is not None}


def score_prompts(
    engine: Engine,
    toks: Sequence[TokenizedPrompt],
    n_max: int,
    scorers: Sequence[str] = SCORERS,
    edits: Sequence[Edit] = (),
    prefix: Prefix | None = None,
) -> PromptScores:
    """Run one pass over ``toks`` and compute every requested scorer from it.

    With ``prefix`` (the cached demonstrations), only each prompt's tokens after it are
    computed; prompts that do not start with exactly the prefix tokens, or that would
    overflow a sliding window, fall back to the full pass for the whole batch.
    """
    arch = engine.arch
    device = engine.loaded.device
    pad = engine.loaded.pad_id
    if prefix is not None:
        p = prefix.length
        usable = all(t.input_ids[:p] == prefix.ids and len(t.input_ids) > p for t in toks)
        if not usable or not engine.prefix_fits(p, max(len(t.input_ids) for t in toks) - p):
            prefix = None
    if prefix is not None:
        batch = batch_from_ids([t.input_ids[prefix.length:] for t in toks], pad_id=pad).to(device)
    else:
        batch = batch_from_ids([t.input_ids for t in toks], pad_id=pad).to(device)
    n_opts = [len(t.option_positions) for t in toks]
    valid = torch.tensor([[o < n for o in range(n_max)] for n in n_opts])
    # every option's representative tokens, flattened per item; weights[b, o, p] averages them
    groups = [t.representative_tokens() for t in toks]
    width = max(sum(len(g) for g in gs) for gs in groups)
    opt_pos, weights = [], torch.zeros(len(toks), n_max, width)
    for b, gs in enumerate(groups):
        flat = [p for g in gs for p in g]
        start = 0
        for o, g in enumerate(gs):
            weights[b, o, start:start + len(g)] = 1.0 / len(g)
            start += len(g)
        opt_pos.append(flat + [flat[-1]] * (width - len(flat)))
    captures = []
    if "qk" in scorers:
        captures += [Capture("q", "last"), Capture("k", opt_pos)]
    if "attention" in scorers:
        captures.append(Capture("attn", "last"))
    if "lens" in scorers:
        captures.append(Capture("resid", "last"))
    trace = engine.run(batch, captures, edits, prefix=prefix)
    # built where they are used: logits come from the head's device, captures from the final norm's
    # (under a device map neither need be the embedding's, where the inputs went)
    answer_ids = torch.tensor([t.answer_ids + [t.answer_ids[-1]] * (n_max - len(t.answer_ids)) for t in toks])

    def masked(x: torch.Tensor) -> np.ndarray:
        shape = [x.shape[0]] + [1] * (x.dim() - 2) + [n_max]
        return x.float().cpu().masked_fill(~valid.view(shape), float("-inf")).numpy()

    out = PromptScores(letter_logits=masked(trace.logits.gather(1, answer_ids.to(trace.logits.device))))
    if "qk" in scorers:
        q = trace["q"][:, :, 0].float()  # [B, L, H, D]
        k = torch.einsum("bnp,blphd->blnhd", weights.to(q.device), trace["k"].float())  # representative key per option
        k = k[:, :, :, arch.kv_head_map]  # [B, L, n, H, D]
        out.qk = masked(torch.einsum("blhd,blnhd->blhn", q, k))
    if "attention" in scorers:
        rows = trace["attn"][:, :, :, 0]  # [B, L, H, S]
        idx = torch.tensor(opt_pos, device=rows.device)[:, None, None, :].expand(-1, rows.shape[1], rows.shape[2], -1)
        out.attention = masked(torch.einsum("blhp,bnp->blhn", rows.gather(-1, idx).float(), weights.to(rows.device)))
    if "lens" in scorers:
        resid = trace["resid"][:, :, 0]  # [B, L, d]
        with torch.no_grad():
            lens = torch.stack([logit_lens(engine, resid[i], answer_ids[i]) for i in range(len(toks))])  # on resid's device
        out.lens = masked(lens)
    return out


Request = tuple[list[int], list[int]]
"""(context token ids, continuation token ids): one lm-eval loglikelihood request."""


def continuation_logprobs(engine: Engine, groups: Sequence[Sequence[Request]], prefix: Prefix | None = None) -> np.ndarray:
    """Summed log-probability of each continuation given its context (lm-eval's loglikelihood),
    flat over the groups' requests in order.

    A group (one item's requests) is one packed row (:mod:`whitebox_eval.internals.packing`):
    what its requests share (the context of every choice; for one context per choice, the
    contexts' longest common token prefix) is computed once, then each request's own tokens,
    all but its last (lm-eval's ``(context + continuation)[:-1]``). With ``prefix`` (the
    cached tokens every context starts with, each context's last token after it) only the
    tokens after it are computed."""
    skip = prefix.length if prefix is not None else 0
    for group in groups:
        for c, x in group:
            if not x:
                raise WhiteboxError("a request has no continuation tokens: nothing to score")
            if len(c) <= skip or (skip and c[:skip] != prefix.ids):
                raise WhiteboxError("every context must start with the cached prefix and go on after it")
    packed = pack([[(c + x)[skip:-1] for c, x in group] for group in groups], pad_id=engine.loaded.pad_id)
    # continuation token j of request i is predicted at its sequence's position len(c) - 1 + j
    pos = [[skip + packed.where[g][i][len(c) - 1 - skip + j] for i, (c, x) in enumerate(group) for j in range(len(x))]
           for g, group in enumerate(groups)]
    target = [[t for _, x in group for t in x] for group in groups]
    width = max(len(p) for p in pos)
    trace = engine.run(packed.batch.to(engine.loaded.device), logits=[p + [p[-1]] * (width - len(p)) for p in pos],
                       prefix=prefix)
    logp = torch.log_softmax(trace.logits.float(), -1)  # [groups, width, V]
    idx = torch.tensor([t + [t[-1]] * (width - len(t)) for t in target], device=logp.device)
    tok_lp = logp.gather(-1, idx.unsqueeze(-1)).squeeze(-1).cpu()  # [groups, width]
    out = []
    for g, group in enumerate(groups):
        k = 0
        for _, x in group:
            out.append(float(tok_lp[g, k:k + len(x)].sum()))
            k += len(x)
    return np.array(out)
