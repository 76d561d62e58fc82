"""Which models each paper's experiments run on, and where a hub id's weights are on this machine.

The rule, first match: ``--model PAPER=ID`` (that paper), ``--model ID`` (every paper), the
paper's own models at ``--scale paper`` (``models:`` in its YAML, an experiment's subset), the
bundled models. ``--models-root DIR`` maps a hub id ``org/name`` (or ``org/name@revision``) to
a local folder: the path ``DIR/models.yaml`` names for it (relative to DIR), else
``DIR/org--name`` (``DIR/org--name@revision``) when that folder exists; a model the paper names
without a hub id runs when ``DIR/models.yaml`` maps its name. A child keeps the hub id
as its name, so moving the folder changes nothing but where the weights are read.
"""

from __future__ import annotations

from collections.abc import Sequence

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.hub_sources import MAPPING_FILE, local_folder, models_root  # noqa: F401 (one rule for every command)
from whitebox_eval.reproduce.spec import Experiment, Paper

DEFAULT_MODELS = ("smollm2-135m", "gemma3-270m")


def parse_model_options(items: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """``--model`` values -> (models for every paper, {paper number: its models}); ``PAPER=ID``
    names a paper by number or short name (as :func:`spec.resolve`), or ``all``."""
    from whitebox_eval.reproduce import spec

    every: list[str] = []
    per: dict[str, list[str]] = {}
    for item in items:
        left, sep, right = item.partition("=")
        if not sep:
            every.append(item)
            continue
        if not left.strip() or not right.strip():
            raise WhiteboxError(f"--model {item!r}: give ID, or PAPER=ID (PAPER a number or short name)")
        try:
            papers = spec.resolve([left.strip()])
        except WhiteboxError as e:
            raise WhiteboxError(f"--model {item!r}: {e} (ID alone applies to every paper)") from None
        for p in papers:
            per.setdefault(p.number, []).append(right.strip())
    return every, per


def models_for(paper: Paper, exp: Experiment, scale: str, every: Sequence[str],
               per: dict[str, list[str]]) -> list[tuple[str, str | None]]:
    """(model, why it does not run or None) for each model ``exp`` of ``paper`` runs on."""
    if per.get(paper.number):
        return [(m, None) for m in per[paper.number]]
    if every:
        return [(m, None) for m in every]
    if scale == "paper" and paper.models:
        return [(m.id, None) if m.id else (m.name, f"no hub id: {m.ambiguous}") for m in paper.models_of(exp)]
    return [(m, None) for m in DEFAULT_MODELS]


def cite(paper: Paper, model: str) -> str:
    """``model`` as the paper names it, with the table or section naming it (empty when not one of its own)."""
    for m in paper.models:
        if model in (m.id, m.name):
            text = f"{m.name}: {m.cite}"
            return text + (f"; ambiguous: {m.ambiguous}" if m.ambiguous else "")
    return ""


def hub_revision(model: str) -> tuple[str, str | None]:
    """``org/name@revision`` -> (``org/name``, revision)."""
    name, _, rev = model.partition("@")
    return name, rev or None
