"""``AddVector``: a vector added to a point at chosen positions (steering, one ``addcmul_``), or set
there (``replace``: a saved activation patched in); ``--edit steer:`` and ``--edit patch:``, the
vector read from a ``.pt``, ``.safetensors`` or ``.npy`` file when the spec is read."""

from __future__ import annotations

import math
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditKind, EditSpec, ModelSizes, check_layer, every_layer, is_number, number
from whitebox_eval.internals.hook_points import parse_hook, patch_alias
from whitebox_eval.internals.requests import PATCH_POINTS, AddVector

STEER_POINTS = ("resid_pre", "resid", "attn_out", "mlp_out", "mlp_act", "head_out")
VECTOR_FILES = (".pt", ".safetensors", ".npy")


def plan(plan, e: AddVector, layer: int) -> None:
    e = patch_alias(e, plan.arch)
    plan.site(e.point, layer).writes.append(steering(plan, e))


def steering(plan, e: AddVector):
    """The write of an :class:`AddVector`: one ``addcmul_`` (x + (coef at the rows) * vector)."""
    import torch
    from whitebox_eval.internals.edit_plan import row_factor, rows_of, trailing
    from whitebox_eval.internals.host_tensors import positions_key
    if e.point not in PATCH_POINTS:
        raise WhiteboxError(f"cannot add a vector at {e.point!r}; points: {', '.join(PATCH_POINTS)}")
    shape = trailing(plan.arch, e.point)
    vector = torch.as_tensor(e.vector).detach()
    if vector.numel() != math.prod(shape) or (vector.dim() != 1 and tuple(vector.shape) != shape):
        raise WhiteboxError(f"a steering vector at {e.point} of this model has {math.prod(shape)} values "
                            f"({' x '.join(map(str, shape))}); got shape {tuple(vector.shape)}")
    vec = plan.memo(("steer_vector", id(e.vector)),
                    lambda: plan.host(vector.cpu().to(torch.float32).reshape(shape)))
    factor = row_factor(plan, e.positions, e.coef, len(shape))
    if e.replace:  # x * (1 - rows) + (coef at the rows) * vector
        def make_keep():
            rows = rows_of(plan, e.positions)
            return plan.host(1.0 - rows.to(torch.float32).view(*rows.shape, *([1] * len(shape))))
        keep = plan.memo(("keep_rows", positions_key(e.positions), len(shape)), make_keep)

        def put(v, f=factor, vec=vec, keep=keep):
            v.mul_(keep.on(v.device)).addcmul_(f.on(v.device), vec.on(v.device))
        return put

    def steer(v, f=factor, vec=vec):
        v.addcmul_(f.on(v.device), vec.on(v.device))
    return steer


def parse(text: str, rest: str, last_only: bool) -> EditSpec:
    kind = text.partition(":")[0]
    point_text, sep, tail = rest.partition(":")
    if not sep:
        raise WhiteboxError(f"--edit {text}: {kind} needs POINT:LAYER:FILE ({kind}:resid:12:vector.pt)")
    hook = parse_hook(point_text)
    layer = hook.layer
    if layer is None:
        layer_text, sep, tail = tail.partition(":")
        if not sep or not layer_text.strip().isdecimal():
            raise WhiteboxError(f"--edit {text}: {kind} needs POINT:LAYER:FILE, the layer a whole number "
                                f"({kind}:resid:12:vector.pt), or a hook name with its layer ({kind}:blocks.12.hook_resid_post:v.pt)")
        layer = int(layer_text)
    if hook.point not in STEER_POINTS:
        raise WhiteboxError(f"--edit {text}: cannot {kind} at {point_text!r} ({hook.point}); points: {', '.join(STEER_POINTS)}")
    coef = 1.0
    head, star, coef_text = tail.rpartition("*")
    if star and is_number(coef_text):
        if kind == "patch":
            raise WhiteboxError(f"--edit {text}: patch sets the saved activation as it is; steer:...*COEF scales a vector")
        tail, coef = head, number(coef_text, text)
    path_text, _, name = tail.partition("#")
    return EditSpec(text, kind, layer=layer, value=coef, last_only=last_only, point=hook.point, source=tail,
                    vector=read_vector(path_text, name or None, text))


def read_vector(path_text: str, name: str | None, spec: str):
    """One steering vector from a ``.pt``, ``.safetensors`` or ``.npy`` file, as a float32 [width] tensor."""
    import torch
    import numpy as np

    path = Path(path_text).expanduser()
    suffix = path.suffix.lower()
    if suffix not in VECTOR_FILES:
        raise WhiteboxError(f"--edit {spec}: the vector file {path_text!r} must end in .pt, .safetensors or .npy")
    if not path.is_file():
        raise WhiteboxError(f"--edit {spec}: no vector file {path}")
    try:
        if suffix == ".npy":
            got = torch.from_numpy(np.load(path, allow_pickle=False))
        elif suffix == ".pt":
            got = torch.load(path, map_location="cpu", weights_only=True)
        else:
            from safetensors.torch import load_file

            got = load_file(str(path))
    except Exception as error:  # noqa: BLE001 - any unreadable file is one line naming it
        raise WhiteboxError(f"--edit {spec}: cannot read {path}: {str(error).splitlines()[0] if str(error) else type(error).__name__}") from None
    if isinstance(got, dict):
        tensors = {k: v for k, v in got.items() if isinstance(v, torch.Tensor)}
        if name is None and len(tensors) != 1:
            raise WhiteboxError(f"--edit {spec}: {path.name} holds {len(tensors)} tensors ({', '.join(sorted(tensors)[:6])}); "
                                f"name one as {path_text}#NAME")
        if name is not None and name not in tensors:
            raise WhiteboxError(f"--edit {spec}: {path.name} has no tensor {name!r} (it has {', '.join(sorted(tensors)[:6])})")
        got = tensors[name] if name is not None else next(iter(tensors.values()))
    elif name is not None:
        raise WhiteboxError(f"--edit {spec}: {path.name} holds one tensor, not named ones: leave out #{name}")
    if not isinstance(got, torch.Tensor):
        raise WhiteboxError(f"--edit {spec}: {path.name} holds a {type(got).__name__}, not a tensor")
    if got.dim() == 2 and got.shape[0] == 1:
        got = got[0]
    if got.dim() != 1 or not (got.is_floating_point() or got.dtype in (torch.int32, torch.int64)):
        raise WhiteboxError(f"--edit {spec}: a steering vector is one token's values, [width]; {path.name} holds a "
                            f"{tuple(got.shape)} {str(got.dtype).removeprefix('torch.')} tensor")
    got = got.detach().to(torch.float32)
    if not bool(torch.isfinite(got).all()):
        raise WhiteboxError(f"--edit {spec}: the vector in {path.name} has non-finite values")
    return got


def build(spec: EditSpec, sizes: ModelSizes) -> list:
    check_layer(spec, spec.layer, sizes)
    want = sizes.widths().get(spec.point)
    if want is not None and spec.vector.numel() != want:
        raise WhiteboxError(f"--edit {spec.text}: the vector has {spec.vector.numel()} values, but {spec.point} of "
                            f"this model is {want} wide")
    return [AddVector(spec.point, spec.layer, spec.vector, spec.value, spec.positions, spec.kind == "patch")]


def op_cases() -> dict:
    import torch
    out = {}
    for point in ("resid", "head_out", "mlp_act"):
        for positions in (None, "last"):
            def make(lm, e, b, o, l, point=point, positions=positions):
                width = {"resid": lm.arch.d_model, "mlp_act": lm.arch.d_ff}.get(point, lm.arch.n_heads * lm.arch.head_dim)
                return AddVector(point, l, torch.linspace(-1, 1, width), 0.5, positions)
            out[f":{point}{'@last' if positions else ''}"] = every_layer(make)
    out[":resid+replace@last"] = every_layer(
        lambda lm, e, b, o, l: AddVector("resid", l, torch.linspace(-1, 1, lm.arch.d_model), 1.0, "last", True))
    return out


KIND = EditKind(AddVector, plan, {"steer": parse, "patch": parse}, build,
                "steer:POINT:LAYER:FILE[*COEF], patch:POINT:LAYER:FILE", op_cases)
