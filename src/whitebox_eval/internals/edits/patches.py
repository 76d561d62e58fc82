"""``Patch``: a point at chosen positions set to given values (e.g. captured in another run); the
Python API's patching (``--edit patch:`` writes an ``AddVector`` with ``replace``: :mod:`.steering`)."""

from __future__ import annotations

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditKind
from whitebox_eval.internals.hook_points import patch_alias
from whitebox_eval.internals.requests import PATCH_POINTS, Capture, Patch


def plan(plan, e: Patch, layer: int) -> None:
    import torch
    from whitebox_eval.internals.edit_plan import patch_rows
    from whitebox_eval.internals.host_tensors import device_key
    arch = plan.arch
    e = patch_alias(e, arch)
    if e.point not in PATCH_POINTS:
        raise WhiteboxError(f"cannot patch {e.point!r}; patchable points: {', '.join(PATCH_POINTS)}")
    b, p, at, shape = patch_rows(plan, e.positions)
    heads = None if e.heads is None else torch.as_tensor([arch.check_head(h) for h in e.heads], dtype=torch.long)
    values = e.values
    on_values = (lambda t: t) if values.device.type == "cpu" else (lambda t: t.to(values.device))
    picked = values[on_values(b), on_values(p)]  # [N, ...]: the values of the rows this pass computes
    if heads is not None:
        picked = picked[:, heads.to(picked.device)]
        at = plan.memo(("patch_heads", id(at), tuple(heads.tolist())),
                       lambda: plan.host(torch.stack([at.host[0][:, None].expand(-1, len(heads)),
                                                      at.host[1][:, None].expand(-1, len(heads)),
                                                      heads[None, :].expand(len(b), -1)])))
    memo: dict = {}

    def patch(v, at=at, picked=picked, shape=shape, memo=memo):
        want = (*shape, *v.shape[2:])
        if tuple(values.shape) != want:
            raise WhiteboxError(f"patch values for {e.point} must have shape {want}, got {tuple(values.shape)}")
        key = (device_key(v.device), v.dtype)
        if key not in memo:
            memo[key] = picked.to(v.device, v.dtype)
        v.index_put_(at.unbound(v.device), memo[key])

    plan.site(e.point, layer).writes.append(patch)


def op_cases() -> dict:
    def case(point):
        def make(lm, eng, batch, opts):
            values = eng.run(batch, [Capture(point, opts)])[point]  # [B, L, P, ...]
            return [Patch(point, l, opts, values[:, l]) for l in range(lm.arch.n_layers)]
        return make
    return {f":{point}": case(point) for point in PATCH_POINTS}


KIND = EditKind(Patch, plan, op_cases=op_cases)
