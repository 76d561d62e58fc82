"""``MaskNeurons``: chosen MLP neurons (inputs of the down projection) set to a value; ``--edit neurons:``."""

from __future__ import annotations

import re

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditKind, EditSpec, ModelSizes, check_layer, every_layer, number
from whitebox_eval.internals.requests import MaskNeurons


def plan(plan, e: MaskNeurons, layer: int) -> None:
    import torch
    from whitebox_eval.internals.edit_plan import rows_of, scalar
    from whitebox_eval.internals.host_tensors import positions_key
    arch = plan.arch
    neurons = torch.as_tensor(list(e.neurons), dtype=torch.long)
    if len(neurons) and (neurons.min() < 0 or neurons.max() >= arch.d_ff):
        raise WhiteboxError(f"neuron index out of range: layer {layer} has {arch.d_ff} MLP neurons (0..{arch.d_ff - 1})")
    site = plan.site("mlp_act", layer)
    if e.positions is None:
        idx = plan.memo(("neurons", tuple(neurons.tolist())), lambda: plan.host(neurons))
        site.writes.append(lambda v, i=idx, x=e.value: v.index_fill_(-1, i.on(v.device), x))
        return

    def make_index():
        b, s = rows_of(plan, e.positions).nonzero(as_tuple=True)
        n = len(neurons)
        return plan.host(torch.stack([b[:, None].expand(-1, n), s[:, None].expand(-1, n),
                                      neurons[None, :].expand(len(b), -1)]))

    at = plan.memo(("neuron_rows", positions_key(e.positions), tuple(neurons.tolist())), make_index)
    fill = plan.memo(("fill", float(e.value)), lambda: scalar(e.value))
    site.writes.append(lambda v, at=at, fill=fill: v.index_put_(at.unbound(v.device), fill(v)))


def parse(text: str, rest: str, last_only: bool) -> EditSpec:
    layer_text, sep, units_text = rest.partition(":")
    if not sep or not layer_text.strip().isdecimal():
        raise WhiteboxError(f"--edit {text}: neurons needs LAYER:I,J[=VALUE] (neurons:5:10,20)")
    units_text, eq, value = units_text.partition("=")
    units = [u for u in re.split(r"[,\s]+", units_text) if u]
    if not units or not all(u.isdecimal() for u in units):
        raise WhiteboxError(f"--edit {text}: neuron indices are whole numbers, comma separated (neurons:5:10,20)")
    return EditSpec(text, "neurons", layer=int(layer_text), units=tuple(int(u) for u in units),
                    value=number(value, text) if eq else 0.0, last_only=last_only)


def build(spec: EditSpec, sizes: ModelSizes) -> list:
    check_layer(spec, spec.layer, sizes)
    bad = [u for u in spec.units if u >= sizes.d_ff]
    if bad:
        raise WhiteboxError(f"--edit {spec.text}: neuron {bad[0]} is outside layer {spec.layer}'s {sizes.d_ff} "
                            "MLP neurons (from 0)")
    return [MaskNeurons(spec.layer, spec.units, spec.value, spec.positions)]


def op_cases() -> dict:
    return {"": every_layer(lambda lm, e, b, o, l: MaskNeurons(l, [1, 5, 7])),
            "@options": every_layer(lambda lm, e, b, o, l: MaskNeurons(l, [1, 5, 7], positions=o))}


KIND = EditKind(MaskNeurons, plan, {"neurons": parse}, build, "neurons:LAYER:I,J[=VALUE]", op_cases)
