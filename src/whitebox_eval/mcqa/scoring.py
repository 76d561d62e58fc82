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
from whitebox_eval.internals import Capture, Engine, Prefix, batch_from_ids, logit_lens, to_device
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
    extra: Sequence[Capture] = (),
    on_trace=None,
) -> PromptScores:
    """Run one pass over ``toks`` and compute every requested scorer from it.

    ``extra``: more captures of the same pass (``--save-activations``), handed with the trace
    and the prefix the pass used to ``on_trace(trace, prefix)``; they change no score.

    With ``prefix`` (the cached demonstrations), only each prompt's tokens after it are
    computed; prompts that do not start with exactly the prefix tokens, or that would
    overflow a sliding window, fall back to the full pass for the whole batch.
    """
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
    b = len(toks)
    n_opts = [len(t.option_positions) for t in toks]
    valid = torch.tensor([[o < n for o in range(n_max)] for n in n_opts])
    # every option's representative tokens, flattened per item; weights[b, o, p] averages them
    groups = [t.representative_tokens() for t in toks]
    width = max(sum(len(g) for g in gs) for gs in groups)
    opt_pos, weights = [], [[0.0] * (n_max * width) for _ in toks]
    for i, gs in enumerate(groups):
        flat = [p for g in gs for p in g]
        start = 0
        for o, g in enumerate(gs):
            for j in range(start, start + len(g)):
                weights[i][o * width + j] = 1.0 / len(g)
            start += len(g)
        opt_pos.append(flat + [flat[-1]] * (width - len(flat)))
    answer_ids = torch.tensor([t.answer_ids + [t.answer_ids[-1]] * (n_max - len(t.answer_ids)) for t in toks])
    # the lens reads the union of the batch's answer ids once, then each item's columns
    lens_ids, lens_pick = torch.unique(answer_ids, return_inverse=True)
    # built on the host, uploaded in one copy per dtype before the forward (an upload after it waits
    # for the whole pass); where they are used: logits on the head's device, captures on the final norm's
    # (under a device map neither need be the embedding's, where the inputs went)
    host = [torch.tensor(weights).view(b, n_max, width), torch.tensor(opt_pos), answer_ids, lens_ids, lens_pick]
    weights_d, opt_d, answer_d, lens_ids_d, lens_pick_d = to_device(host, engine.output_device)
    captures = []
    if "qk" in scorers:
        captures += [Capture("q", "last"), Capture("k", opt_pos)]
    if "attention" in scorers:
        captures.append(Capture("attn", "last"))
    if "lens" in scorers:
        captures.append(Capture("resid", "last"))
    trace = engine.run(batch, [*captures, *extra], edits, prefix=prefix)
    if on_trace is not None:
        on_trace(trace, prefix)
    out: dict[str, torch.Tensor] = {"letter_logits": trace.logits.gather(1, answer_d.to(trace.logits.device)).float()}
    if "qk" in scorers:
        q = trace["q"][:, :, 0].float()  # [B, L, H, D]
        k = torch.einsum("bnp,blphd->blnhd", weights_d.to(q.device), trace["k"].float())  # representative key per option
        k = k.index_select(3, _kv_map(engine, q.device))  # [B, L, n, H, D]
        out["qk"] = torch.einsum("blhd,blnhd->blhn", q, k)
    if "attention" in scorers:
        rows = trace["attn"][:, :, :, 0]  # [B, L, H, S]
        idx = opt_d.to(rows.device)[:, None, None, :].expand(-1, rows.shape[1], rows.shape[2], -1)
        out["attention"] = torch.einsum("blhp,bnp->blhn", rows.gather(-1, idx).float(), weights_d.to(rows.device))
    if "lens" in scorers:
        resid = trace["resid"][:, :, 0]  # [B, L, d]
        with torch.no_grad():
            lens = logit_lens(engine, resid, lens_ids_d)  # [B, L, U]: one product for the whole batch
        out["lens"] = lens.gather(-1, lens_pick_d.to(lens.device)[:, None, :].expand(-1, lens.shape[1], -1))
    # every score back in one copy
    names = list(out)
    flat = torch.cat([out[k].reshape(b, -1).to(trace.logits.device, torch.float32) for k in names], dim=1).cpu()
    arrays: dict[str, np.ndarray] = {}
    at = 0
    for k in names:
        n = out[k][0].numel()
        x = flat[:, at:at + n].reshape(out[k].shape)
        at += n
        shape = [b] + [1] * (x.dim() - 2) + [n_max]
        arrays[k] = x.masked_fill(~valid.view(shape), float("-inf")).numpy()
    return PromptScores(**arrays)


def _kv_map(engine: Engine, device) -> torch.Tensor:
    """The GQA map (query head -> its key/value head) as an index on ``device``, made once per engine."""
    memo = engine.__dict__.setdefault("_kv_map", {})
    key = str(device)
    if key not in memo:
        memo[key] = torch.tensor(engine.arch.kv_head_map, device=device)
    return memo[key]


Request = tuple[list[int], list[int]]
"""(context token ids, continuation token ids): one lm-eval loglikelihood request."""


def continuation_logprobs(engine: Engine, groups: Sequence[Sequence[Request]], prefix: Prefix | None = None,
                          edits: Sequence[Edit] = ()) -> np.ndarray:
    """Summed log-probability of each continuation given its context (lm-eval's loglikelihood),
    flat over the groups' requests in order.

    ``edits`` act on every token of the packed rows: only edits of every position whose effect on a
    token depends on that token alone (heads, neurons, vectors, SAE features; not attention cells
    or ``last``) mean there what they mean in each request's own pass.

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
    # request r's tokens sum into slot r (padding into a last, dropped slot): built on the host and
    # uploaded before the forward, summed on the device, one copy back
    slot, r = [], 0
    for group in groups:
        row = []
        for _, x in group:
            row += [r] * len(x)
            r += 1
        slot.append(row + [-1] * (width - len(row)))
    n_req = r
    slots = torch.tensor(slot)
    slots[slots < 0] = n_req
    idx, slots = to_device([torch.tensor([t + [t[-1]] * (width - len(t)) for t in target]), slots], engine.output_device)
    trace = engine.run(packed.batch.to(engine.loaded.device), edits=edits,
                       logits=[p + [p[-1]] * (width - len(p)) for p in pos], prefix=prefix)
    logp = torch.log_softmax(trace.logits.float(), -1)  # [groups, width, V]
    tok_lp = logp.gather(-1, idx.to(logp.device).unsqueeze(-1)).squeeze(-1)  # [groups, width]
    sums = torch.zeros(n_req + 1, dtype=tok_lp.dtype, device=tok_lp.device)
    sums.index_add_(0, slots.to(tok_lp.device).view(-1), tok_lp.reshape(-1))
    return sums[:n_req].cpu().double().numpy()
