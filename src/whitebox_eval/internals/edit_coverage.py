"""How many items each ``--edit`` reaches, counted on the prompts' token lengths before the first pass
and before the run folder is written: an edit that reaches no item is one line, one that reaches only
some is recorded in config.yaml (``edit_coverage``) and printed once. A kind says which prompt lengths
a spec covers (:attr:`EditKind.covers <whitebox_eval.internals.edit_kind.EditKind>`; none: every one).

Each suite gives the lengths its items can reach: the prompt (mcqa, gar's examples and probe
statements, span's whole sequences), or the prompt and its generation budget where a study generates
(formats, mui), so a position on a generated token counts when the budget reaches it; whether a
generation that stops early reaches it is not checked.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditSpec
from whitebox_eval.internals.edit_registry import spec_kinds


def _specs(specs) -> list[EditSpec]:
    from whitebox_eval.internals.edit_specs import parse_edit

    return [s if isinstance(s, EditSpec) else parse_edit(s) for s in specs]


def counted(specs) -> list[EditSpec]:
    """The specs whose kind covers only some prompt lengths (the ones worth tokenizing for)."""
    by_kind = spec_kinds()
    return [s for s in _specs(specs) if by_kind[s.kind].covers is not None]


def edit_coverage(specs, lengths: Sequence[int], *, generates: str | None = None) -> dict:
    """``{"edit_coverage": {SPEC: {"covered": K, "items": N}}}`` for the specs that reach only some of
    the prompts of these ``lengths`` (printed once), ``{}`` when every spec reaches every prompt; a spec
    that reaches none is one line. ``generates``: the study generates after these prompts (its text in
    the line: a position past the prompt may fall on a generated token)."""
    by_kind, partial = spec_kinds(), {}
    lengths = [int(n) for n in lengths]
    for spec in counted(specs):
        covered = sum(bool(by_kind[spec.kind].covers(spec, n)) for n in lengths)
        if covered == 0:
            raise WhiteboxError(f"--edit {spec.text}: its positions fall in none of the {len(lengths)} prompts "
                                f"({min(lengths, default=0)} to {max(lengths, default=0)} tokens)"
                                + (f"; {generates}" if generates else "") + ", so it would change nothing")
        if covered < len(lengths):
            partial[spec.text] = {"covered": covered, "items": len(lengths)}
            warnings.warn(f"--edit {spec.text} reaches {covered} of {len(lengths)} prompts (their positions fall "
                          "outside the others); config.yaml records it as edit_coverage", stacklevel=1)
    return {"edit_coverage": partial} if partial else {}
