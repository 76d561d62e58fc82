"""The capture plan: where one :class:`~whitebox_eval.internals.requests.Capture` is read in a pass.

A point on a module is read at its site (:mod:`.sites`); post-RoPE q/k and attention rows or
matrices inside the attention function (:mod:`.pass_attention`); positions become one
:class:`~whitebox_eval.internals.host_tensors.Pos` per pass, shared by every capture at them.
"""

from __future__ import annotations

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.hook_points import capture_alias
from whitebox_eval.internals.pass_plan import Plan
from whitebox_eval.internals.requests import CAPTURE_POINTS, Capture, Trace


def plan_capture(plan: Plan, c: Capture, trace: Trace, stop_after: int | None = None) -> None:
    """Plan one capture: its layers, positions and the sites or attention work that read it."""
    arch = plan.arch
    c = capture_alias(c, arch)  # SAELens / TransformerLens hook names (internals/hook_points.py)
    if c.point not in CAPTURE_POINTS:
        raise WhiteboxError(f"unknown capture point {c.point!r}; choose one of {', '.join(CAPTURE_POINTS)}")
    if c.key in trace.layers:
        raise WhiteboxError(f"two captures are named {c.key!r}; give one a distinct name=")
    wanted = c.layers if c.layers is not None or stop_after is None else range(stop_after + 1)
    layers = list(range(arch.n_layers)) if wanted is None else [arch.check_layer(int(l)) for l in wanted]
    if stop_after is not None and max(layers) > stop_after:
        raise WhiteboxError(f"capture {c.key!r} asks for layer {max(layers)} but the pass stops after block {stop_after}")
    trace.layers[c.key] = layers
    batch = plan.batch
    if c.point in ("attn_full", "attn_mean"):
        for l in layers:
            plan.attn[l].full.append((c.key, c.point == "attn_mean"))
        plan.captures.append((c, layers, "full", None))
        plan.plan_unpad(batch.seq_len)
        return
    if c.keep_grad and c.point in ("attn", "q_rot", "k_rot"):
        raise WhiteboxError(f"keep_grad is not available for {c.point!r}; use q/k/v, head_out, mlp_act or resid points")
    every = isinstance(c.positions, str) and c.positions == "all"
    if every:  # every computed column
        ppos = torch.arange(plan.past, batch.seq_len).expand(batch.size, -1)
        trace.positions[c.key] = ppos - batch.host_offsets.unsqueeze(1)
    else:
        last = c.positions is None or (isinstance(c.positions, str) and c.positions == "last")
        example = batch.positions(c.positions)  # (memoised for "last")
        ppos = batch.host_padded_positions("last") if last else batch.host_padded(example)
        trace.positions[c.key] = example - batch.prefix_len if batch.prefix_len else example
    ppos = plan.computed(ppos, f"capture {c.key!r}")
    rot = c.point in ("q_rot", "k_rot") and arch.family.positional == "rope"
    point = c.point[0] if c.point in ("q_rot", "k_rot") and not rot else c.point  # no rotary: post-RoPE == pre-RoPE
    if c.point == "attn":
        pos = plan.pos(ppos)
        for l in layers:
            plan.attn[l].rows[id(pos)] = pos
        plan.captures.append((c, layers, "rows", pos))
        plan.plan_unpad(plan.key_shift + plan.computed_len)
    elif rot:
        pos = plan.pos(ppos + (plan.key_shift if c.point == "k_rot" else 0))  # keys also hold a cache or prefix
        for l in layers:
            plan.attn[l].rot.append((c.key, c.point[0], pos))
        plan.captures.append((c, layers, "rot", pos))
    else:
        pos = None if every else plan.pos(ppos)
        for l in layers:
            site = plan.site(point, l)
            site.reads[id(pos)] = pos
            if c.keep_grad:
                site.grad_reads.append((c.key, pos))
        plan.captures.append((Capture(point, c.positions, c.layers, c.key, c.keep_grad), layers, "site", pos))
