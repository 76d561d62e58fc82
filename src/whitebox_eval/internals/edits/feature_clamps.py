"""``ClampFeature``: SAE features at a point clamped to a value or scaled, ``x + (f' - f) W_dec`` with
the SAE's error term kept; ``--edit sae:``, its SAE read through the loader a study hands over
(``whitebox_eval.sae.feature_edits``). The features' weights are sliced once per engine."""

from __future__ import annotations

import math
import re

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditKind, EditSpec, ModelSizes, check_layer, every_layer, number
from whitebox_eval.internals.hook_points import patch_alias
from whitebox_eval.internals.requests import PATCH_POINTS, ClampFeature


def plan(plan, e: ClampFeature, layer: int) -> None:
    e = patch_alias(e, plan.arch)
    plan.site(e.point, layer).writes.append(feature_clamp(plan, e, layer))


def feature_clamp(plan, e: ClampFeature, layer: int):
    """The write of a :class:`ClampFeature`: the chosen features encoded (ReLU / JumpReLU: only
    their encoder columns; TopK: the whole encoding, which decides who is in the top k), the
    change ``f' - f`` at the edited rows, and ``x += (f' - f) W_dec[features]``, in the SAE's
    float32. The weights are sliced once per engine, SAE, features and device."""
    import torch
    from whitebox_eval.internals.edit_plan import rows_of, trailing
    from whitebox_eval.internals.host_tensors import positions_key
    if e.point not in PATCH_POINTS:
        raise WhiteboxError(f"cannot edit SAE features at {e.point!r}; points: {', '.join(PATCH_POINTS)}")
    sae = e.sae
    width = math.prod(trailing(plan.arch, e.point))
    if int(sae.w_enc.shape[0]) != width:
        raise WhiteboxError(f"the SAE reads {int(sae.w_enc.shape[0])} values per token, but {e.point} of layer "
                            f"{layer} is {width} wide: an SAE of another model or hook")
    d_sae = int(sae.w_enc.shape[1])
    feats = tuple(int(f) for f in e.features)
    if not feats or min(feats) < 0 or max(feats) >= d_sae:
        raise WhiteboxError(f"SAE feature out of range: this SAE has {d_sae} features (0..{d_sae - 1}); got {list(feats)}")
    if (e.value is None) == (e.scale is None):
        raise WhiteboxError("an SAE feature edit takes exactly one of value= (clamp) or scale=")
    device = next(plan.arch.blocks[layer].parameters()).device
    w = sae_slices(plan.engine, sae, feats, device)
    value, scale = e.value, e.scale
    # the change f' - f is value - f (clamp) or (scale - 1) f; rows outside the edit add nothing
    base = plan.memo(("scalar_host", float(value if value is not None else 0.0)),
                     lambda: plan.host(torch.tensor(float(value if value is not None else 0.0))))
    times = -1.0 if value is not None else float(scale) - 1.0
    rows = None if e.positions is None else plan.memo(
        ("clamp_rows", positions_key(e.positions)),
        lambda: plan.host(rows_of(plan, e.positions).to(torch.float32).reshape(-1, 1)))

    def clamp(v, w=w, rows=rows):
        x = v.reshape(-1, width)  # a view of the clone the hook writes to
        xf = x if x.dtype == torch.float32 else x.float()
        if w["k"] is not None:  # TopK: in the top k when at least the k-th largest pre-activation
            full = torch.addmm(w["b_all"], xf, w["W_all"])  # with k zero columns: the k-th is max(k-th, 0)
            kth = full.kthvalue(w["d_sae"] + 1, dim=-1, keepdim=True).values
            pre = full.index_select(-1, w["index"])
            change = torch.addcmul(base.on(v.device), pre, pre >= kth, value=times)  # f = pre * [pre >= kth]
        else:
            pre = torch.addmm(w["b"], xf, w["W"])
            if w["threshold"] is not None:  # JumpReLU: relu(pre) * [pre > t] = pre * [pre > max(t, 0)]
                change = torch.addcmul(base.on(v.device), pre, pre > w["threshold"], value=times)
            else:
                f = torch.relu(pre)
                change = (value - f) if value is not None else f * times
        delta = change.mm(w["W_dec"])
        if x.data_ptr() != v.data_ptr() or not (x.is_contiguous() and v.is_contiguous()):
            x, delta = v, delta.view(v.shape)
        if rows is None:
            x.add_(delta)
        else:
            x.addcmul_(delta, rows.on(v.device) if x is not v else rows.on(v.device).view(*v.shape[:2], *([1] * (v.dim() - 2))))
    return clamp


def sae_slices(engine, sae, feats: tuple[int, ...], device) -> dict:
    """The SAE's weights for these features on ``device`` in float32 (kept on the engine: a study's
    passes slice them once)."""
    import torch
    from whitebox_eval.internals.host_tensors import device_key
    key = (id(sae), feats, device_key(device))
    got = engine._sae_cache.get(key)
    if got is not None and got["of"] is sae:
        return got
    with torch.no_grad():
        s = float(sae.norm_scaling_factor) if getattr(sae, "norm_scaling_factor", None) is not None else 1.0
        activation = getattr(sae, "activation", "relu")

        def folded(w_enc, b_enc):  # (s x - b_dec) W + b_enc = x (s W) + (b_enc - b_dec W)
            w_enc, b = w_enc.float(), b_enc.float()
            if getattr(sae, "apply_b_dec_to_input", True):
                b = b - sae.b_dec.float() @ w_enc
            return (w_enc * s).to(device), b.to(device)

        idx = torch.as_tensor(feats, dtype=torch.long, device=sae.w_enc.device)
        W, b = folded(sae.w_enc.index_select(1, idx), sae.b_enc.index_select(0, idx))
        threshold = getattr(sae, "threshold", None)
        got = {"of": sae, "W": W, "b": b, "index": idx.to(device), "k": None, "d_sae": int(sae.w_enc.shape[1]),
               "threshold": None if threshold is None or activation != "jumprelu"
               else threshold.float().index_select(0, idx).clamp(min=0).to(device),
               "W_dec": (sae.w_dec.float().index_select(0, idx) / s).to(device)}
        if activation == "topk":
            got["k"] = int(sae.k)
            zeros = sae.w_enc.new_zeros(sae.w_enc.shape[0], int(sae.k))
            got["W_all"], got["b_all"] = folded(torch.cat([sae.w_enc, zeros], 1), torch.cat([sae.b_enc, zeros[0]]))
    engine._sae_cache[key] = got
    return got


def parse(text: str, rest: str, last_only: bool) -> EditSpec:
    feats_text, sep, source = rest.partition(":")
    if not sep or not source:
        raise WhiteboxError(f"--edit {text}: sae needs FEATURES=VALUE:LAYER=SAE or FEATURES*SCALE:LAYER=SAE "
                            "(sae:123,456=8:12=runs/sae)")
    if "=" in feats_text:
        units_text, _, value_text = feats_text.partition("=")
        value, scale = number(value_text, text), None
    elif "*" in feats_text:
        units_text, _, scale_text = feats_text.partition("*")
        value, scale = 0.0, number(scale_text, text)
    else:
        raise WhiteboxError(f"--edit {text}: say what the features become: FEATURES=VALUE (clamp) or FEATURES*SCALE")
    units = [u for u in re.split(r"[,\s]+", units_text) if u]
    if not units or not all(u.isdecimal() for u in units):
        raise WhiteboxError(f"--edit {text}: SAE features are whole numbers, comma separated (sae:123,456=8:12=PATH)")
    return EditSpec(text, "sae", units=tuple(int(u) for u in units), value=value, scale=scale, source=source,
                    last_only=last_only)


def build(spec: EditSpec, sizes: ModelSizes) -> list:
    if sizes.load_sae is None:
        raise WhiteboxError(f"--edit {spec.text}: SAE edits need an SAE loader here (whitebox_eval.sae.feature_edits)")
    sae, point, layer = sizes.load_sae(spec.source)
    if point not in PATCH_POINTS:
        raise WhiteboxError(f"--edit {spec.text}: the SAE reads {point}, which an edit cannot write; SAE edits "
                            "need an SAE at resid_pre, resid, attn_out, mlp_out, head_out or mlp_act")
    check_layer(spec, layer, sizes)
    want = sizes.widths().get(point)
    if want is not None and sae.d_in != want:
        raise WhiteboxError(f"--edit {spec.text}: the SAE reads {sae.d_in} values per token, but {point} of this "
                            f"model is {want} wide (an SAE of another model or hook)")
    bad = [u for u in spec.units if u >= sae.d_sae]
    if bad:
        raise WhiteboxError(f"--edit {spec.text}: feature {bad[0]} is outside the SAE's {sae.d_sae} features (from 0)")
    return [ClampFeature(point, layer, sae, spec.units, value=None if spec.scale is not None else spec.value,
                         scale=spec.scale, positions=spec.positions)]


class _RandomSAE:
    """A random float32 SAE of 64 features (an op-count case's; any object with an SAE's fields serves)."""

    def __init__(self, d_in: int, activation: str):
        import torch
        g = torch.Generator().manual_seed(7)
        self.w_enc, self.b_enc = torch.randn(d_in, 64, generator=g), torch.randn(64, generator=g)
        self.w_dec, self.b_dec = torch.randn(64, d_in, generator=g), torch.randn(d_in, generator=g)
        self.activation, self.norm_scaling_factor, self.apply_b_dec_to_input = activation, None, True
        self.k = 8 if activation == "topk" else None
        self.threshold = torch.full((64,), 0.01) if activation == "jumprelu" else None


_SAES: dict = {}


def _sae(d_in: int, activation: str) -> _RandomSAE:
    """One SAE per shape: the engine slices its weights once, as a study's passes do."""
    if (d_in, activation) not in _SAES:
        _SAES[(d_in, activation)] = _RandomSAE(d_in, activation)
    return _SAES[(d_in, activation)]


def op_cases() -> dict:
    out = {}
    for activation in ("relu", "jumprelu", "topk"):
        for positions in (None, "last"):
            def make(lm, e, b, o, l, activation=activation, positions=positions):
                return ClampFeature("resid", l, _sae(lm.arch.d_model, activation), [1, 5, 7], value=2.0, positions=positions)
            out[f":{activation}{'@last' if positions else ''}"] = every_layer(make)
    return out


KIND = EditKind(ClampFeature, plan, {"sae": parse}, build, "sae:FEATURES=VALUE:LAYER=SAE (or FEATURES*SCALE)", op_cases)
