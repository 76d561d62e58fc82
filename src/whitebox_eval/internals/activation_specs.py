"""``--save-activations POINT[:LAYERS][:POSITIONS]``: which activations a study keeps per item,
read in two steps so a mistake is one line before any model work:

1. :func:`parse_activations` reads the text (no model needed): an unknown point, a malformed
   layer list or position kind, two specs of one file, are refused here;
2. :func:`check_activations` checks the layers against the model's number of blocks (its
   config.json before the model loads) and the point against its family.

``POINT`` is a capture point (``resid``, ``mlp_act``...) or a name of the project's hook table
(:mod:`whitebox_eval.internals.hook_points`: ``blocks.12.hook_resid_post``, ``hook_mlp_out``,
``attn.hook_z``); a name that carries its layer takes no ``LAYERS``. ``LAYERS``: ``all`` (the
default), ``12``, ``0-3,7`` (ranges inclusive). ``POSITIONS`` (default ``last``):

=============  ==================================================================
``last``       the prompt's last token (the one whose logits score the item)
``all``        every prompt token, the first to the last (ragged across items)
``options``    each option's label token (``A``, ``B``..., in option order; the first
               content token where a format has no labels), whatever token
               ``--representative`` makes the head scores read; ragged across
               option counts
``generated``  in a generating suite, the rows that produced each generated token:
               the last prompt token's row for the first, then each generated
               token's row for the next (one per generated token, stop included)
=============  ==================================================================

Each item's tensor is ``[layers, positions, width]`` (per-head points concatenated over their
heads), :func:`per_item` cuts it from a capture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.hook_points import HOOK_OF_POINT, parse_hook

if TYPE_CHECKING:  # specs are read at planning and --help: torch only where captures are stored
    import torch

POSITIONS = ("last", "all", "options", "generated")
#: capture points with one vector per token (attention rows are not: refused with the reason)
SAVABLE = ("resid_pre", "resid_mid", "resid", "attn_out", "mlp_out", "head_out", "mlp_act", "mlp_gate_act",
           "q_proj", "k_proj", "q", "k", "q_rot", "k_rot", "v")
USAGE = ("write POINT[:LAYERS][:POSITIONS]: resid:12:last, blocks.12.hook_resid_post:last, attn_out:0-3,7:all, "
         "mlp_act:all:options (LAYERS all, N or A-B,C; POSITIONS last, all, options or generated)")
#: numpy cannot hold bfloat16: those captures are stored as float32 (exact, every bf16 value is one)
STORED_DTYPE = {"float32": "float32", "float16": "float16", "bfloat16": "float32", "float64": "float64"}


def stored_dtype(dtype) -> str:
    """The numpy dtype a capture of a model in ``dtype`` (a torch dtype or its name) is stored as."""
    return STORED_DTYPE.get(str(dtype).removeprefix("torch."), "float32")


@dataclass(frozen=True)
class ActivationSpec:
    """One ``--save-activations`` as read from its text."""

    text: str
    point: str  # the engine's capture point
    layers: tuple[int, ...] | None  # None: every block
    positions: str

    @property
    def stem(self) -> str:
        """The file name (without ``.safetensors``) under the run folder's ``activations/``."""
        return f"{self.point}-{self.positions}"

    @property
    def hook(self) -> str:
        """The TransformerLens spelling of the point (without the layer), for records."""
        return HOOK_OF_POINT.get(self.point, self.point)

    def key(self, name: str = "save") -> str:
        return f"{name}:{self.stem}"


def _layers(text: str, spec: str) -> tuple[int, ...] | None:
    text = text.strip()
    if text == "all":
        return None
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise WhiteboxError(f"--save-activations {spec}: layers {text!r} are not all, N or A-B,C; {USAGE}")
        a, b = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
        if b < a:
            raise WhiteboxError(f"--save-activations {spec}: the range {part} runs backwards; write {b}-{a}")
        out += [l for l in range(a, b + 1) if l not in out]
    if not out:
        raise WhiteboxError(f"--save-activations {spec}: no layers given; {USAGE}")
    return tuple(out)


def parse_activation(spec: str) -> ActivationSpec:
    """The structure of one ``--save-activations`` text; a malformed one is one line."""
    text = str(spec).strip()
    parts = text.split(":")
    if not parts[0] or len(parts) > 3:
        raise WhiteboxError(f"--save-activations {text}: {USAGE}")
    positions = "last"
    if len(parts) > 1 and parts[-1].strip() in POSITIONS:
        positions = parts.pop().strip()
    elif len(parts) == 3:
        raise WhiteboxError(f"--save-activations {text}: unknown positions {parts[2]!r}; choose "
                            f"{', '.join(POSITIONS)}")
    try:
        hp = parse_hook(parts[0])
    except WhiteboxError as error:
        raise WhiteboxError(f"--save-activations {text}: {error}") from None
    if hp.point not in SAVABLE:
        raise WhiteboxError(f"--save-activations {text}: {hp.point} has no single vector per token (attention rows "
                            f"are per key); save one of {', '.join(SAVABLE)}")
    layers = _layers(parts[1], text) if len(parts) > 1 else None
    if hp.layer is not None:
        if layers is not None and layers != (hp.layer,):
            raise WhiteboxError(f"--save-activations {text}: {parts[0]} names layer {hp.layer}; give no other layers")
        layers = (hp.layer,)
    return ActivationSpec(text, hp.point, layers, positions)


def parse_activations(specs, positions: tuple[str, ...] = POSITIONS) -> tuple[ActivationSpec, ...]:
    """Every spec read (:func:`parse_activation`), each position kind among the ones this suite
    has (``positions``), no two writing one file."""
    out = tuple(s if isinstance(s, ActivationSpec) else parse_activation(s) for s in specs)
    for s in out:
        if s.positions not in positions:
            raise WhiteboxError(f"--save-activations {s.text}: this command has no {s.positions!r} positions; "
                                f"choose {', '.join(positions)}")
    stems = [s.stem for s in out]
    for s in out:
        if stems.count(s.stem) > 1:
            raise WhiteboxError(f"--save-activations {s.text}: two specs save {s.point} at {s.positions} positions; "
                                "give their layers in one spec (resid:0,5,9:last)")
    return out


def check_activations(specs, n_layers: int, arch=None) -> None:
    """Each spec's layers inside a model of ``n_layers`` blocks (and, given ``arch``, its point
    served by the family): one line before any run folder is written."""
    from whitebox_eval.internals.hook_points import check_served

    for s in specs:
        bad = [l for l in (s.layers or ()) if l >= n_layers]
        if bad:
            raise WhiteboxError(f"--save-activations {s.text}: layer {bad[0]} is outside this model ({n_layers} "
                                "layers, from 0)")
        if arch is not None:
            try:
                check_served(s.point, arch)
            except WhiteboxError as error:
                raise WhiteboxError(f"--save-activations {s.text}: {error}") from None


def layers_of(spec: ActivationSpec, n_layers: int) -> list[int]:
    return list(range(n_layers)) if spec.layers is None else list(spec.layers)


def width(arch, point: str) -> int:
    """One token's vector at ``point`` (per-head points concatenated over the heads)."""
    q, kv = arch.n_heads * arch.head_dim, arch.n_kv_heads * arch.head_dim
    return {"resid_pre": arch.d_model, "resid_mid": arch.d_model, "resid": arch.d_model, "attn_out": arch.d_model,
            "mlp_out": arch.d_model, "head_out": q, "q_proj": q, "q": q, "q_rot": q, "k_proj": kv, "k": kv,
            "k_rot": kv, "v": kv, "mlp_act": arch.d_ff, "mlp_gate_act": arch.d_ff}[point]


def stored(x: torch.Tensor) -> np.ndarray:
    """A capture as the array the file keeps: its own dtype, bfloat16 as float32 (exact)."""
    import torch

    x = x.detach()
    if x.dtype == torch.bfloat16:
        x = x.float()
    return x.cpu().numpy()


def per_item(capture: torch.Tensor, counts=None, positions: torch.Tensor | None = None) -> list[np.ndarray]:
    """Each example's ``[layers, positions, width]`` from a capture ``[B, L, P, ...]``: the first
    ``counts[b]`` positions of example ``b`` (``options``), or those whose example position
    (``positions`` [B, P], a trace's) is not a pad (``all``), else every one."""
    x = stored(capture.reshape(*capture.shape[:3], -1))
    out = []
    for b in range(x.shape[0]):
        if positions is not None:
            keep = (positions[b] >= 0).cpu().numpy()
            out.append(np.ascontiguousarray(x[b][:, keep]))
        elif counts is not None:
            out.append(np.ascontiguousarray(x[b, :, :int(counts[b])]))
        else:
            out.append(np.ascontiguousarray(x[b]))
    return out


def batch_captures(specs, n_layers: int, options=None) -> list:
    """The engine captures of one batch's prompt positions (``options``: each example's option
    positions, padded here to one length with its last); ``generated`` specs need none here."""
    from whitebox_eval.internals.requests import Capture

    out = []
    for s in specs:
        if s.positions == "generated":
            continue
        pos = s.positions
        if pos == "options":
            n = max(len(o) for o in options)
            pos = [list(o) + [o[-1]] * (n - len(o)) for o in options]
        out.append(Capture(s.point, pos, layers_of(s, n_layers), name=s.key()))
    return out


def batch_rows(engine, specs, trace, options=None, prefix=None, memo: dict | None = None) -> dict[str, list]:
    """Each spec's ``[layers, positions, width]`` per example of a pass that captured
    :func:`batch_captures`. With a cached ``prefix`` (shared demonstrations), ``all`` puts the
    prefix's rows first, from one pass over the prefix alone (as its cache was computed; a
    causal model's prefix rows do not depend on what follows), kept in ``memo`` per prefix."""
    out = {}
    for s in specs:
        if s.positions == "generated":
            continue
        key = s.key()
        if s.positions == "options":
            rows = per_item(trace[key], counts=[len(o) for o in options])
        elif s.positions == "all":
            rows = per_item(trace[key], positions=trace.positions[key])
            if prefix is not None:
                head = _prefix_rows(engine, s, prefix, memo if memo is not None else {})
                rows = [np.concatenate([head, r], axis=1) for r in rows]
        else:
            rows = per_item(trace[key])
        out[s.stem] = rows
    return out


def _prefix_rows(engine, spec, prefix, memo: dict) -> np.ndarray:
    import torch

    from whitebox_eval.internals.batching import batch_from_ids
    from whitebox_eval.internals.requests import Capture

    k = (spec.stem, tuple(prefix.ids))
    if k not in memo:
        if len(memo) > 8:
            memo.clear()
        batch = batch_from_ids([list(prefix.ids)]).to(engine.loaded.device)
        with torch.no_grad():
            tr = engine.run(batch, [Capture(spec.point, "all", layers_of(spec, engine.arch.n_layers))], logits=False)
        memo[k] = per_item(tr[spec.point])[0]
    return memo[k]


def generated_rows(specs, gen) -> dict[str, np.ndarray]:
    """One continuation's ``generated`` tensors (:class:`~whitebox_eval.internals.generation.Generated`
    of a :func:`generate` given :func:`generation_captures`)."""
    return {s.stem: stored(gen.captures[s.key()].reshape(*gen.captures[s.key()].shape[:2], -1))
            for s in specs if s.positions == "generated"}


def generation_captures(specs, n_layers: int) -> list:
    from whitebox_eval.internals.requests import Capture

    return [Capture(s.point, "last", layers_of(s, n_layers), name=s.key()) for s in specs if s.positions == "generated"]
