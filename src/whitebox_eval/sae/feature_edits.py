"""``--edit SPEC`` for one model, SAEs included: what every study command runs its passes under.

:mod:`whitebox_eval.internals.edit_specs` reads the text and knows the model only by its sizes; an
``sae:`` edit's SAE is read here, as ``mui --sae`` reads one (:func:`whitebox_eval.sae.sets.load_sae_set`:
a folder, an SAE study's run folder, ``hf:...``, ``saelens:...``, its hook from its files or a
``LAYER=`` / ``HOOK=`` prefix). :func:`check_edits` runs before a study writes its run folder (the
model's config.json when it is not loaded yet), :func:`user_edits` when its passes start.
"""

from __future__ import annotations

from collections.abc import Sequence

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_specs import build_edits


def _loader(arch=None):
    from whitebox_eval.sae.sets import load_sae_set

    def load(source: str):
        try:
            got = load_sae_set([source], arch)
        except WhiteboxError as error:
            raise WhiteboxError(f"--edit sae:...:{source}: {error}") from None
        return got.saes[0], got.point, got.layers[0]
    return load


def user_edits(specs: Sequence[str], loaded) -> list:
    """The engine edits of ``--edit`` specs for this loaded model (every width checked). A study that
    generates refuses ``@last`` first, with its config (:func:`refuse_last`)."""
    if not specs:
        return []
    return _built(specs, loaded.arch, loaded.arch)


def check_edits(specs: Sequence[str], loaded=None, model: str | None = None) -> None:
    """``--edit`` against the model's sizes before any run folder is written: the loaded model's, else
    ``model``'s config.json (a head's width is then checked once the model is loaded)."""
    if not specs:
        return
    if loaded is None:
        from whitebox_eval.models.config_sizes import config_sizes

        _built(specs, config_sizes(model))
    else:
        _built(specs, loaded.arch, loaded.arch)


def _built(specs: Sequence[str], sizes, arch=None) -> list:
    """The edits of ``specs`` for a model of these ``sizes`` (an ``Architecture`` or config.json's
    ``ConfigSizes``); ``arch``: the loaded model's, which also checks a head's width and an SAE's site."""
    load_sae = _loader(arch)
    return build_edits(specs, sizes.n_layers, sizes.n_heads, sizes.d_ff, d_model=sizes.d_model,
                       head_dim=arch.head_dim if arch is not None else None, load_sae=load_sae)


def refuse_last(specs: Sequence[str], why: str) -> None:
    """One line for an edit that moves with the sequence's end (``@last``; an ``attn:`` rule naming
    ``last`` or a position from the end) in a study that generates: the last position moves at
    every step, and the key/value cache keeps the earlier ones as they were computed."""
    from whitebox_eval.internals.edit_specs import parse_edit

    for spec in specs:
        if str(spec).strip().endswith("@last"):
            raise WhiteboxError(f"--edit {spec}: {why}, whose last position moves at every step; edit every "
                                "position (leave out @last)")
        rule = parse_edit(spec).rule
        if rule is not None and any(x == "last" or (isinstance(x, int) and x < 0) for x in (rule.queries, rule.keys)):
            raise WhiteboxError(f"--edit {spec}: {why}, whose last position moves at every step; name positions "
                                "that stay (all, first, self, prev, a position from the start)")
