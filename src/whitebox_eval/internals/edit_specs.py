"""``--edit SPEC``: the engine's edits written on a command line, read in two steps so a
mistake is one line before any model work:

1. :func:`parse_edit` reads the text (no model needed): a malformed spec is refused here;
2. :func:`build_edits` turns the parsed specs into engine edits for one model's sizes: a
   layer, head or neuron out of range is refused here, before the first pass.

Specs (heads as ``LAYER.HEAD`` or ``LxHy``, comma separated; ``@last`` limits an edit to
the last prompt position, ``@all`` or nothing is every position):

===========================================  ==================================================
``ablate:14.0,L17H1``                        zero those heads' outputs (000 sec. 6's ablation)
``scale:14.0,L17H1=0.5``                     multiply those heads' outputs by 0.5
``neurons:5:10,20,31``                       zero MLP neurons 10, 20, 31 of layer 5 (001 sec. 3.8)
``neurons:5:10,20=1.5``                      set them to 1.5
``steer:resid:12:v.pt*4``                    add 4 x the vector in ``v.pt`` to the residual leaving
                                             block 12 (steering; ``*COEF`` defaults to 1)
``steer:blocks.12.hook_resid_post:v.npy``    the same point by its TransformerLens name (the
                                             layer in the name); points: resid_pre, resid,
                                             attn_out, mlp_out, mlp_act, head_out (hook_z)
``steer:mlp_out:3:v.safetensors#dir*-2``     tensor ``dir`` of a .safetensors file (a file of one
                                             tensor needs no ``#NAME``; likewise a .pt dict)
``patch:resid:12:act.npy@last``              set the residual leaving block 12 to a saved
                                             activation (patching; the same points and files)
``sae:123,456=8:12=PATH``                    clamp features 123 and 456 of the SAE ``PATH`` read
                                             at layer 12 (as ``mui --sae 12=PATH``: a folder, an
                                             SAE study's run, ``hf:...``, ``saelens:...``; its
                                             hook from its files) to 8
``sae:123*0:blocks.12.hook_resid_post=PATH``  scale feature 123 by 0 (ablate it) at that hook
``attn:14.0,L17H1:last>first:add=0.5``        add 0.5 to those heads' post-softmax attention
                                             from the last position to the first (003 sec. 5.1's
                                             reinforcement; ``,renorm`` re-normalises the rows)
``attn:14.0:all>prev:force``                 every query attends only to the position before it
                                             (GAR's strong intervention, 002 sec. 5)
``attn:L14H0:last>all:copy=3``               the last row of head 14.0 becomes head 14.3's
                                             (GAR's weak intervention)
===========================================  ==================================================

Attention cells are written QUERIES>KEYS: ``last``, ``first``, ``all`` or a position (negative:
from the end), and for keys also ``self`` and ``prev``; they are built for every pass from its
prompts' lengths (generated tokens included). A study that generates refuses ``last`` and
positions from the end: they move at every generated token, and the cache keeps earlier rows as
they were computed.

A vector is one token's values at the point: ``.pt`` (``torch.load(weights_only=True)``),
``.safetensors`` or ``.npy`` (``numpy.load(allow_pickle=False)``), ``[width]`` (or ``[1, width]``),
width checked against the model. An SAE edit encodes the point, changes the features, decodes and
adds the SAE's error back (``x + decode(f') - decode(f)``): a feature left as it was leaves the
model as it was. The vector is read by :func:`parse_edit`, the SAE by :func:`build_edits` (through
the ``load_sae`` it is given: ``whitebox_eval.sae.feature_edits``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.requests import (
    PATCH_POINTS, AddVector, CellRule, ClampFeature, Edit, EditAttention, MaskNeurons, ScaleHeads,
)

KINDS = ("ablate", "scale", "neurons", "steer", "patch", "sae", "attn")
USAGE = ("write ablate:HEADS, scale:HEADS=FACTOR, neurons:LAYER:I,J[=VALUE], steer:POINT:LAYER:FILE[*COEF], "
         "patch:POINT:LAYER:FILE or "
         "sae:FEATURES=VALUE:LAYER=SAE (or FEATURES*SCALE), attn:HEADS:QUERIES>KEYS:add=C|force|copy=HEAD (heads as 14.0 or L14H0, comma separated; @last after "
         "the spec for the last position only)")
STEER_POINTS = ("resid_pre", "resid", "attn_out", "mlp_out", "mlp_act", "head_out")
VECTOR_FILES = (".pt", ".safetensors", ".npy")


@dataclass(frozen=True)
class EditSpec:
    """One ``--edit`` as read from its text (:func:`parse_edit`)."""

    text: str
    kind: str
    heads: tuple[Head, ...] = ()
    layer: int | None = None
    units: tuple[int, ...] = ()
    value: float = 0.0
    last_only: bool = False
    point: str | None = None  # steer: the capture point
    source: str | None = None  # steer: the vector's file; sae: the SAE as mui --sae takes it
    scale: float | None = None  # sae: FEATURES*SCALE
    vector: object = field(default=None, compare=False, repr=False)  # steer: the [width] float32 tensor read
    rule: CellRule | None = None  # attn: the cells
    mode: str | None = None  # attn: add, force or copy_head
    renormalize: bool = False  # attn: ,renorm


def _number(text: str, spec: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise WhiteboxError(f"--edit {spec}: {text!r} is not a number; {USAGE}") from None


def parse_edit(spec: str) -> EditSpec:
    """The structure of one ``--edit`` text; a malformed one is one line naming the fix."""
    text = str(spec).strip()
    body, last_only = (text[:-len("@last")], True) if text.endswith("@last") else (text, False)
    body = body[:-len("@all")] if body.endswith("@all") else body
    kind, sep, rest = body.partition(":")
    if not sep or kind not in KINDS:
        raise WhiteboxError(f"--edit {text}: unknown edit {kind!r}; {USAGE}")
    try:
        if kind in ("steer", "patch"):
            return _parse_steer(text, rest, last_only, kind)
        if kind == "sae":
            return _parse_sae(text, rest, last_only)
        if kind == "attn":
            return _parse_attn(text, rest, last_only)
        if kind in ("ablate", "scale"):
            heads_text, eq, factor = rest.partition("=")
            if kind == "scale" and not eq:
                raise WhiteboxError(f"--edit {text}: scale needs =FACTOR (scale:14.0,L17H1=0.5)")
            if kind == "ablate" and eq:
                raise WhiteboxError(f"--edit {text}: ablate takes no value (scale:HEADS=FACTOR scales)")
            heads = tuple(Head.parse_list(heads_text))
            return EditSpec(text, kind, heads=heads, value=_number(factor, text) if eq else 0.0, last_only=last_only)
        layer_text, sep2, units_text = rest.partition(":")
        if not sep2 or not layer_text.strip().isdecimal():
            raise WhiteboxError(f"--edit {text}: neurons needs LAYER:I,J[=VALUE] (neurons:5:10,20)")
        units_text, eq, value = units_text.partition("=")
        units = [u for u in re.split(r"[,\s]+", units_text) if u]
        if not units or not all(u.isdecimal() for u in units):
            raise WhiteboxError(f"--edit {text}: neuron indices are whole numbers, comma separated (neurons:5:10,20)")
        return EditSpec(text, kind, layer=int(layer_text), units=tuple(int(u) for u in units),
                        value=_number(value, text) if eq else 0.0, last_only=last_only)
    except WhiteboxError as error:
        if str(error).startswith("--edit"):
            raise
        raise WhiteboxError(f"--edit {text}: {error}") from None


def _parse_steer(text: str, rest: str, last_only: bool, kind: str = "steer") -> EditSpec:
    from whitebox_eval.internals.hook_points import parse_hook

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
    if star and _is_number(coef_text):
        if kind == "patch":
            raise WhiteboxError(f"--edit {text}: patch sets the saved activation as it is; steer:...*COEF scales a vector")
        tail, coef = head, float(coef_text)
    path_text, _, name = tail.partition("#")
    return EditSpec(text, kind, layer=layer, value=coef, last_only=last_only, point=hook.point, source=tail,
                    vector=read_vector(path_text, name or None, text))


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def read_vector(path_text: str, name: str | None, spec: str):
    """One steering vector from a ``.pt``, ``.safetensors`` or ``.npy`` file, as a float32 [width] tensor."""
    import numpy as np
    import torch

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


def _parse_sae(text: str, rest: str, last_only: bool) -> EditSpec:
    feats_text, sep, source = rest.partition(":")
    if not sep or not source:
        raise WhiteboxError(f"--edit {text}: sae needs FEATURES=VALUE:LAYER=SAE or FEATURES*SCALE:LAYER=SAE "
                            "(sae:123,456=8:12=runs/sae)")
    if "=" in feats_text:
        units_text, _, value_text = feats_text.partition("=")
        value, scale = _number(value_text, text), None
    elif "*" in feats_text:
        units_text, _, scale_text = feats_text.partition("*")
        value, scale = 0.0, _number(scale_text, text)
    else:
        raise WhiteboxError(f"--edit {text}: say what the features become: FEATURES=VALUE (clamp) or FEATURES*SCALE")
    units = [u for u in re.split(r"[,\s]+", units_text) if u]
    if not units or not all(u.isdecimal() for u in units):
        raise WhiteboxError(f"--edit {text}: SAE features are whole numbers, comma separated (sae:123,456=8:12=PATH)")
    return EditSpec(text, "sae", units=tuple(int(u) for u in units), value=value, scale=scale, source=source,
                    last_only=last_only)


ATTN_KEYS = ("first", "last", "all", "self", "prev")


def _parse_attn(text: str, rest: str, last_only: bool) -> EditSpec:
    """``attn:HEADS:QUERIES>KEYS:MODE[,renorm]`` (the module docstring's table)."""
    parts = rest.split(":")
    if len(parts) != 3 or ">" not in parts[1]:
        raise WhiteboxError(f"--edit {text}: attn needs HEADS:QUERIES>KEYS:MODE (attn:14.0:last>first:add=0.5)")
    if last_only:
        raise WhiteboxError(f"--edit {text}: attn names its query positions itself (last>...); drop @last")
    heads = tuple(Head.parse_list(parts[0]))
    queries, _, keys = (x.strip() for x in parts[1].partition(">"))

    def where(x: str, allowed: tuple[str, ...], side: str) -> str | int:
        if x in allowed:
            return x
        if re.fullmatch(r"-?\d+", x):
            return int(x)
        raise WhiteboxError(f"--edit {text}: {side} {x!r} is not one of {', '.join(allowed)} or a position")

    rule = CellRule(where(queries, ("last", "first", "all"), "queries"), where(keys, ATTN_KEYS, "keys"))
    mode_text, *flags = [m.strip() for m in parts[2].split(",")]
    if any(f != "renorm" for f in flags):
        raise WhiteboxError(f"--edit {text}: after the mode only ,renorm is read")
    name, eq, value = mode_text.partition("=")
    if name == "add" and eq:
        return EditSpec(text, "attn", heads=heads, rule=rule, mode="add", value=_number(value, text),
                        renormalize=bool(flags))
    if name == "force" and not eq:
        return EditSpec(text, "attn", heads=heads, rule=rule, mode="force", renormalize=bool(flags))
    if name == "copy" and eq and value.strip().isdecimal():
        return EditSpec(text, "attn", heads=heads, rule=rule, mode="copy_head", units=(int(value),),
                        renormalize=bool(flags))
    raise WhiteboxError(f"--edit {text}: the mode is add=C, force or copy=HEAD (a head of the same layer)")


def _heads_by_layer(spec: EditSpec, n_layers: int, n_heads: int) -> list[tuple[int, tuple[int, ...]]]:
    """A spec's heads grouped by layer, layers in order (each head checked against the model)."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in spec.heads:
        if layer >= n_layers or head >= n_heads:
            raise WhiteboxError(f"--edit {spec.text}: head {layer}.{head} is outside this model "
                                f"({n_layers} layers x {n_heads} heads, from 0)")
        by_layer.setdefault(layer, []).append(head)
    return [(layer, tuple(hs)) for layer, hs in sorted(by_layer.items())]


def _widths(n_heads: int, d_ff: int, d_model: int | None, head_dim: int | None) -> dict[str, int]:
    heads = None if head_dim is None else n_heads * head_dim
    return {p: w for p, w in {"resid_pre": d_model, "resid": d_model, "attn_out": d_model, "mlp_out": d_model,
                              "resid_mid": d_model, "mlp_act": d_ff, "head_out": heads}.items() if w is not None}


def build_edits(specs, n_layers: int, n_heads: int, d_ff: int, *, d_model: int | None = None,
                head_dim: int | None = None, load_sae=None) -> list[Edit]:
    """Engine edits for a model of these sizes; anything out of range is one line. A steering
    vector's width is checked where the point's width is known (``d_model``, ``head_dim``; the engine
    checks it again). ``load_sae(source) -> (sae, point, layer)`` reads an ``sae:`` edit's SAE."""
    edits: list[Edit] = []
    widths = _widths(n_heads, d_ff, d_model, head_dim)
    for spec in (s if isinstance(s, EditSpec) else parse_edit(s) for s in specs):
        positions = "last" if spec.last_only else None
        if spec.kind in ("steer", "patch"):
            if spec.layer >= n_layers:
                raise WhiteboxError(f"--edit {spec.text}: layer {spec.layer} is outside this model ({n_layers} layers, from 0)")
            want = widths.get(spec.point)
            if want is not None and spec.vector.numel() != want:
                raise WhiteboxError(f"--edit {spec.text}: the vector has {spec.vector.numel()} values, but {spec.point} of "
                                    f"this model is {want} wide")
            edits.append(AddVector(spec.point, spec.layer, spec.vector, spec.value, positions, spec.kind == "patch"))
        elif spec.kind == "sae":
            if load_sae is None:
                raise WhiteboxError(f"--edit {spec.text}: SAE edits need an SAE loader here (whitebox_eval.sae.feature_edits)")
            sae, point, layer = load_sae(spec.source)
            if point not in PATCH_POINTS:
                raise WhiteboxError(f"--edit {spec.text}: the SAE reads {point}, which an edit cannot write; SAE edits "
                                    "need an SAE at resid_pre, resid, attn_out, mlp_out, head_out or mlp_act")
            if layer >= n_layers:
                raise WhiteboxError(f"--edit {spec.text}: layer {layer} is outside this model ({n_layers} layers, from 0)")
            want = widths.get(point)
            if want is not None and sae.d_in != want:
                raise WhiteboxError(f"--edit {spec.text}: the SAE reads {sae.d_in} values per token, but {point} of this "
                                    f"model is {want} wide (an SAE of another model or hook)")
            bad = [u for u in spec.units if u >= sae.d_sae]
            if bad:
                raise WhiteboxError(f"--edit {spec.text}: feature {bad[0]} is outside the SAE's {sae.d_sae} features (from 0)")
            edits.append(ClampFeature(point, layer, sae, spec.units, value=None if spec.scale is not None else spec.value,
                                      scale=spec.scale, positions=positions))
        elif spec.kind in ("ablate", "scale"):
            edits += [ScaleHeads(layer, hs, spec.value, positions) for layer, hs in _heads_by_layer(spec, n_layers, n_heads)]
        elif spec.kind == "attn":
            source = spec.units[0] if spec.units else None
            if source is not None and source >= n_heads:
                raise WhiteboxError(f"--edit {spec.text}: copy={source} is outside this model's {n_heads} heads (from 0)")
            edits += [EditAttention(layer, hs, spec.rule, spec.mode, spec.value, source_head=source,
                                    renormalize=spec.renormalize) for layer, hs in _heads_by_layer(spec, n_layers, n_heads)]
        else:
            if spec.layer >= n_layers:
                raise WhiteboxError(f"--edit {spec.text}: layer {spec.layer} is outside this model ({n_layers} "
                                    "layers, from 0)")
            bad = [u for u in spec.units if u >= d_ff]
            if bad:
                raise WhiteboxError(f"--edit {spec.text}: neuron {bad[0]} is outside layer {spec.layer}'s {d_ff} "
                                    "MLP neurons (from 0)")
            edits.append(MaskNeurons(spec.layer, spec.units, spec.value, positions))
    return edits
