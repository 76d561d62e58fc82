"""What an edit kind declares, once: the request the engine receives, its plan in a pass, the
``--edit`` spec grammar that writes it (read, then checked against a model's sizes) and its op-count
cases. Built-in kinds live in :mod:`whitebox_eval.internals.edits`, one file each; a plug-in's kind
is registered with :func:`whitebox_eval.internals.edit_registry.register`.

The shared pieces of the spec grammar are here too: :class:`EditSpec` (one ``--edit`` as read),
:class:`ModelSizes` (what a spec is checked against) and the readers of numbers, heads and layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.requests import CellRule


@dataclass(frozen=True)
class EditSpec:
    """One ``--edit`` as read from its text (:func:`whitebox_eval.internals.edit_specs.parse_edit`)."""

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

    @property
    def positions(self):
        """The engine's positions of this spec: ``"last"`` for ``@last``, else every position (None)."""
        return "last" if self.last_only else None


@dataclass(frozen=True)
class ModelSizes:
    """A model as ``--edit`` specs are checked against it before any run folder (``load_sae`` reads
    an ``sae:`` edit's SAE: ``source -> (sae, point, layer)``)."""

    n_layers: int
    n_heads: int
    d_ff: int
    d_model: int | None = None
    head_dim: int | None = None
    load_sae: Callable | None = None

    def widths(self) -> dict[str, int]:
        """One token's width at each point whose width these sizes know."""
        heads = None if self.head_dim is None else self.n_heads * self.head_dim
        d = self.d_model
        return {p: w for p, w in {"resid_pre": d, "resid": d, "attn_out": d, "mlp_out": d, "resid_mid": d,
                                  "mlp_act": self.d_ff, "head_out": heads}.items() if w is not None}


Parse = Callable[[str, str, bool], EditSpec]
"""(the whole spec text, the text after ``KIND:``, whether it ends in ``@last``) -> the spec read."""
Build = Callable[[EditSpec, ModelSizes], list]
"""(a spec read, a model's sizes) -> the engine's edits; anything out of range is one line."""
OpCase = Callable[[object, object, object, list], list]
"""(loaded model, engine, batch, option positions) -> the edits of one op-count case (every layer)."""


@dataclass(frozen=True)
class EditKind:
    """One edit kind, declared once.

    ``request``: the (frozen dataclass) edit the engine receives, with a ``layer``. ``plan(plan, edit,
    layer)``: its work in one pass (writes on a site, :meth:`Plan.site`, or attention edits), every
    tensor built once per pass on the host; its model-side checks are one line. ``specs``: the
    ``--edit`` kinds it reads (``{"ablate": parse, ...}``) with ``usage`` for the usage line and
    ``build`` for the sizes. ``op_cases()``: ``{name: OpCase}``, held to the op budget by
    ``tests/internals/test_op_counts.py``. ``covers(spec, n)``: whether a spec edits any position
    of a prompt of ``n`` tokens (None: every prompt; :mod:`whitebox_eval.internals.edit_coverage`)."""

    request: type
    plan: Callable
    specs: Mapping[str, Parse] = field(default_factory=dict)
    build: Build | None = None
    usage: str = ""
    op_cases: Callable[[], Mapping[str, OpCase]] | None = None
    covers: Callable[[EditSpec, int], bool] | None = None

    @property
    def name(self) -> str:
        return self.request.__name__


def every_layer(make: Callable) -> OpCase:
    """An op-count case from ``make(loaded, engine, batch, option positions, layer) -> edit``: the edit
    in every layer."""
    return lambda lm, eng, batch, opts: [make(lm, eng, batch, opts, layer) for layer in range(lm.arch.n_layers)]


# ---- the spec grammar's shared readers ------------------------------------------------------

def number(text: str, spec: str, usage: str = "") -> float:
    """A finite number of a spec; anything else is one line naming it."""
    try:
        value = float(text)
    except ValueError:
        raise WhiteboxError(f"--edit {spec}: {text!r} is not a number" + (f"; {usage}" if usage else "")) from None
    if not math.isfinite(value):
        raise WhiteboxError(f"--edit {spec}: {text.strip()!r} is not a finite number (an edit by NaN or infinity "
                            "leaves no logit a number)")
    return value


def is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def check_layer(spec: EditSpec, layer: int, sizes: ModelSizes) -> int:
    if layer >= sizes.n_layers:
        raise WhiteboxError(f"--edit {spec.text}: layer {layer} is outside this model ({sizes.n_layers} layers, from 0)")
    return layer


def heads_by_layer(spec: EditSpec, sizes: ModelSizes) -> list[tuple[int, tuple[int, ...]]]:
    """A spec's heads grouped by layer, layers in order (each head checked against the model)."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in spec.heads:
        if layer >= sizes.n_layers or head >= sizes.n_heads:
            raise WhiteboxError(f"--edit {spec.text}: head {layer}.{head} is outside this model "
                                f"({sizes.n_layers} layers x {sizes.n_heads} heads, from 0)")
        by_layer.setdefault(layer, []).append(head)
    return [(layer, tuple(hs)) for layer, hs in sorted(by_layer.items())]
