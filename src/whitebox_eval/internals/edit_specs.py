"""``--edit SPEC``: the engine's edits written on a command line, read in two steps so a
mistake is one line before any model work:

1. :func:`parse_edit` reads the text (no model needed): a malformed spec is refused here;
2. :func:`build_edits` turns the parsed specs into engine edits for one model's sizes: a
   layer, head or neuron out of range is refused here, before the first pass.

Specs (heads as ``LAYER.HEAD`` or ``LxHy``, comma separated; ``@last`` limits an edit to
the last prompt position, the default is every position):

==============================  ==================================================
``ablate:14.0,L17H1``           zero those heads' outputs (000 sec. 6's ablation)
``scale:14.0,L17H1=0.5``        multiply those heads' outputs by 0.5
``neurons:5:10,20,31``          zero MLP neurons 10, 20, 31 of layer 5 (001 sec. 3.8)
``neurons:5:10,20=1.5``         set them to 1.5
==============================  ==================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.requests import Edit, MaskNeurons, ScaleHeads

KINDS = ("ablate", "scale", "neurons")
USAGE = ("write ablate:HEADS, scale:HEADS=FACTOR or neurons:LAYER:I,J[=VALUE] (heads as 14.0 or L14H0, comma "
         "separated; @last after the spec for the last position only)")


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


def _number(text: str, spec: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise WhiteboxError(f"--edit {spec}: {text!r} is not a number; {USAGE}") from None


def parse_edit(spec: str) -> EditSpec:
    """The structure of one ``--edit`` text; a malformed one is one line naming the fix."""
    text = str(spec).strip()
    body, last_only = (text[:-len("@last")], True) if text.endswith("@last") else (text, False)
    kind, sep, rest = body.partition(":")
    if not sep or kind not in KINDS:
        raise WhiteboxError(f"--edit {text}: unknown edit {kind!r}; {USAGE}")
    try:
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


def build_edits(specs, n_layers: int, n_heads: int, d_ff: int) -> list[Edit]:
    """Engine edits for a model of these sizes; anything out of range is one line."""
    edits: list[Edit] = []
    for spec in (s if isinstance(s, EditSpec) else parse_edit(s) for s in specs):
        positions = "last" if spec.last_only else None
        if spec.kind in ("ablate", "scale"):
            by_layer: dict[int, list[int]] = {}
            for layer, head in spec.heads:
                if layer >= n_layers or head >= n_heads:
                    raise WhiteboxError(f"--edit {spec.text}: head {layer}.{head} is outside this model "
                                        f"({n_layers} layers x {n_heads} heads, from 0)")
                by_layer.setdefault(layer, []).append(head)
            edits += [ScaleHeads(layer, tuple(hs), spec.value, positions) for layer, hs in sorted(by_layer.items())]
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
