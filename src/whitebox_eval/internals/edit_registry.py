"""Every edit kind the engine serves, by its request type and by its ``--edit`` spec kinds.

The built-in kinds are the ``KIND`` of each file of :mod:`whitebox_eval.internals.edits`; a plug-in
adds its own with :func:`register` (as :func:`whitebox_eval.suites.register` adds a suite): the
engine plans it, ``--edit`` reads its specs and the op-count test holds its cases to the budget,
with no other file naming it.
"""

from __future__ import annotations

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditKind
from whitebox_eval.internals.edits import (
    attention_edits, feature_clamps, head_scaling, neuron_masks, patches, replacements, steering,
)

KINDS: dict[type, EditKind] = {m.KIND.request: m.KIND for m in (
    head_scaling, neuron_masks, attention_edits, patches, replacements, steering, feature_clamps)}
"""Request type -> its kind, built-ins first, in the order the usage line lists them."""


def register(kind: EditKind) -> EditKind:
    """Add a plug-in's edit ``kind``; its request type and spec kinds must be new."""
    if kind.request in KINDS:
        raise WhiteboxError(f"an edit kind for {kind.name} is registered already")
    taken = set(kind.specs) & set(spec_kinds())
    if taken:
        raise WhiteboxError(f"--edit {sorted(taken)[0]}: is read by another edit kind already")
    if set(kind.specs) and kind.build is None:
        raise WhiteboxError(f"edit kind {kind.name} reads --edit specs but has no build")
    KINDS[kind.request] = kind
    return kind


def kinds() -> tuple[EditKind, ...]:
    return tuple(KINDS.values())


def spec_kinds() -> dict[str, EditKind]:
    """``--edit`` spec kind (the text before the first ``:``) -> the edit kind that reads it."""
    return {name: kind for kind in KINDS.values() for name in kind.specs}


def kind_of(edit) -> EditKind:
    """The kind of an engine edit; one line for an object no kind serves."""
    kind = KINDS.get(type(edit))
    if kind is None:
        raise WhiteboxError(f"unknown edit {edit!r}")
    return kind


def plan_edit(plan, edit, stop_after: int | None = None) -> None:
    """Plan one edit in a pass: its layer checked, then its kind's plan."""
    layer = plan.arch.check_layer(edit.layer)
    if stop_after is not None and layer > stop_after:
        raise WhiteboxError(f"an edit of layer {layer} has no effect in a pass that stops after block {stop_after}")
    kind_of(edit).plan(plan, edit, layer)
