"""``ScaleHeads``: chosen heads' outputs (the input of o_proj) times a factor; ``--edit ablate:`` and
``--edit scale:``."""

from __future__ import annotations

from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditKind, EditSpec, ModelSizes, every_layer, heads_by_layer, number
from whitebox_eval.internals.requests import ScaleHeads


def plan(plan, e: ScaleHeads, layer: int) -> None:
    import torch
    from whitebox_eval.internals.edit_plan import rows_of
    from whitebox_eval.internals.host_tensors import positions_key
    arch = plan.arch
    chosen = tuple(arch.check_head(h) for h in e.heads)

    def make_factor():
        heads = torch.zeros(arch.n_heads, dtype=torch.bool)
        heads[list(chosen)] = True
        at = rows_of(plan, e.positions)  # [B, S - past] bool, host
        # every head times 1, the chosen ones at the chosen rows times scale (float32: x * scale in
        # the model's dtype rounds as the scaled copy did; x * 1 is x)
        return plan.host(torch.where(at[:, :, None, None] & heads[None, None, :, None], float(e.scale), 1.0))

    factor = plan.memo(("scale", positions_key(e.positions), chosen, float(e.scale)), make_factor)
    plan.site("head_out", layer).writes.append(lambda v, f=factor: v.mul_(f.on(v.device)))


def parse(text: str, rest: str, last_only: bool) -> EditSpec:
    kind = text.partition(":")[0]
    heads_text, eq, factor = rest.partition("=")
    if kind == "scale" and not eq:
        raise WhiteboxError(f"--edit {text}: scale needs =FACTOR (scale:14.0,L17H1=0.5)")
    if kind == "ablate" and eq:
        raise WhiteboxError(f"--edit {text}: ablate takes no value (scale:HEADS=FACTOR scales)")
    heads = tuple(Head.parse_list(heads_text))
    return EditSpec(text, kind, heads=heads, value=number(factor, text) if eq else 0.0, last_only=last_only)


def build(spec: EditSpec, sizes: ModelSizes) -> list:
    return [ScaleHeads(layer, hs, spec.value, spec.positions) for layer, hs in heads_by_layer(spec, sizes)]


def op_cases() -> dict:
    return {"": every_layer(lambda lm, e, b, o, l: ScaleHeads(l, [0, 1], 0.5)),
            "@last": every_layer(lambda lm, e, b, o, l: ScaleHeads(l, [0, 1], 0.5, positions="last"))}


KIND = EditKind(ScaleHeads, plan, {"ablate": parse, "scale": parse}, build,
                "ablate:HEADS, scale:HEADS=FACTOR", op_cases)
