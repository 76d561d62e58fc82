"""What the edit kinds share when planning a pass (:mod:`whitebox_eval.internals.edits`): the rows an
edit applies to, its factors and indices, built once per pass and positions on the host."""

from __future__ import annotations

import torch

from whitebox_eval.internals.batching import Positions
from whitebox_eval.internals.hook_points import point_width
from whitebox_eval.internals.host_tensors import Host, device_key, positions_key
from whitebox_eval.internals.pass_plan import Plan


def rows_of(plan: Plan, positions: Positions) -> torch.Tensor:
    """[B, S - past] bool on the host: which computed rows an edit applies to (None = all); once per
    pass and positions."""
    def make():
        batch = plan.batch
        b, s = batch.size, batch.seq_len
        if positions is None:
            return torch.ones(b, s - plan.past, dtype=torch.bool)
        mask = torch.zeros(b, s, dtype=torch.bool)
        mask.scatter_(1, batch.host_padded_positions(positions), True)
        return mask[:, plan.past:]
    return plan.memo(("rows", positions_key(positions)), make)


def row_factor(plan: Plan, positions: Positions, coef: float, dims: int) -> Host:
    """[B, S - past, 1...] float32 on the host: ``coef`` at the rows an edit applies to, 0 elsewhere
    (``dims`` trailing ones); once per pass, positions and coefficient."""
    def make():
        r = rows_of(plan, positions).to(torch.float32) * float(coef)
        return plan.host(r.view(*r.shape, *([1] * dims)))
    return plan.memo(("row_factor", positions_key(positions), float(coef), dims), make)


def padded_rows(plan: Plan, x: torch.Tensor) -> torch.Tensor:
    """Unpadded [B, Sq, Sk] cells or weights (host) -> the rows this pass computes, padded: [B, S - past, S].

    ``x`` may be smaller than the sequence (missing rows and columns are zero). Two gathers
    over a zero-padded copy, whatever the batch size."""
    batch = plan.batch
    b, s, past = batch.size, batch.seq_len, plan.past
    xp = torch.zeros(b, s + 1, s + 1, dtype=x.dtype)
    xp[:, :min(s, x.shape[1]), :min(s, x.shape[2])] = x[:, :s, :s]
    off = batch.host_offsets.unsqueeze(1)
    rows = torch.arange(past, s).unsqueeze(0) - off  # unpadded row of each computed padded row
    cols = torch.arange(s).unsqueeze(0) - off
    rows = torch.where(rows >= 0, rows, s)  # pads read the zero row / column
    cols = torch.where(cols >= 0, cols, s)
    out = xp.gather(1, rows[:, :, None].expand(b, s - past, s + 1))
    return out.gather(2, cols[:, None, :].expand(b, s - past, s))


def patch_rows(plan: Plan, positions: Positions):
    """(example index, position index, (example, computed row) on the host, positions' shape) of the
    rows a patch at ``positions`` writes (rows in a cache are not patched again): once per pass and
    positions, however many layers are patched there."""
    def make():
        ppos = plan.computed_or_cut(plan.batch.host_padded_positions(positions))
        b, p = (ppos >= 0).nonzero(as_tuple=True)
        return b, p, plan.host(torch.stack([b, ppos[b, p]])), tuple(ppos.shape)
    return plan.memo(("patch_rows", positions_key(positions)), make)


def scalar(value: float):
    """``value`` as a 0-dim tensor of a layer's dtype and device (made once per pass)."""
    memo: dict = {}

    def fill(v: torch.Tensor) -> torch.Tensor:
        key = (device_key(v.device), v.dtype)
        if key not in memo:
            memo[key] = torch.full((), value, dtype=v.dtype, device=v.device)
        return memo[key]

    return fill


def trailing(arch, point: str) -> tuple[int, ...]:
    """One token's shape at ``point``'s canonical view ([n heads, head_dim] for per-head points)."""
    heads = {"q_proj": arch.n_heads, "q": arch.n_heads, "head_out": arch.n_heads,
             "k_proj": arch.n_kv_heads, "k": arch.n_kv_heads, "v": arch.n_kv_heads}
    return (heads[point], arch.head_dim) if point in heads else (point_width(arch, point),)
