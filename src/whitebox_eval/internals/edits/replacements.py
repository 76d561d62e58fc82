"""``Replace``: a point of one layer replaced by ``fn(x)`` of its values (SAE fidelity, a block's
output zeroed); the Python API's, no ``--edit`` spec."""

from __future__ import annotations

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditKind
from whitebox_eval.internals.requests import PATCH_POINTS, Replace


def plan(plan, e: Replace, layer: int) -> None:
    if e.point not in PATCH_POINTS:
        raise WhiteboxError(f"cannot replace {e.point!r}; replaceable points: {', '.join(PATCH_POINTS)}")
    plan.site(e.point, layer).writes.append(replacement(plan, e))


def replacement(plan, e: Replace):
    """The write of a :class:`Replace`: the computed tokens left-aligned, ``fn``, and back (the
    indices built once per pass, whatever the number of replaced layers)."""
    import torch
    from whitebox_eval.internals.host_tensors import device_key
    def make():
        batch = plan.batch
        pads = (batch.host_offsets - plan.past).clamp(min=0)  # pad columns among the computed ones
        if not bool((pads > 0).any()):
            return None
        sc = plan.computed_len
        j = torch.arange(sc).unsqueeze(0)
        return (plan.host((j + pads[:, None]).clamp(max=sc - 1)), plan.host(j + pads[:, None] < sc),
                plan.host((j - pads[:, None]).clamp(min=0)), plan.host(j >= pads[:, None]))

    where = plan.memo(("replace",), make)
    if where is None:
        def replace(v, fn=e.fn):
            v.copy_(fn(v))
        return replace

    def views(v):  # the four indices shaped for v [B, S, ...], made once per shape and device
        def make_views():
            shape = [v.shape[0], v.shape[1]] + [1] * (v.dim() - 2)
            ahead, valid, back, real = (h.on(v.device).view(shape) for h in where)
            return ahead.expand_as(v), valid, back.expand_as(v), real
        return plan.memo(("replace_views", tuple(v.shape), device_key(v.device)), make_views)

    def replace(v, fn=e.fn):
        ahead, valid, back, real = views(v)
        y = fn(v.gather(1, ahead) * valid).to(v.dtype)  # left-aligned, zero tail
        v.copy_(torch.where(real, y.gather(1, back), v))

    return replace


def op_cases() -> dict:
    def case(point):
        return lambda lm, eng, batch, opts: [Replace(point, l, lambda x: x * 0.5) for l in range(lm.arch.n_layers)]
    return {f":{point}": case(point) for point in PATCH_POINTS}


KIND = EditKind(Replace, plan, op_cases=op_cases)
