"""SAEs trained once per setting and reused: feature MUI where no public SAE exists (paper 001
sec. 2.1.2, eq. 4-6, 9; Tables 6 and 7).

The paper reads released SAEs (Llama Scope, Gemma Scope: every layer, 128K features, Table 4);
the bundled models have none, so a MUI study with ``train_sae`` settings trains one with
``mui train-sae``'s trainer (:func:`~whitebox_eval.mui.sae_training.train_sae_for_model`) and
keeps it in the cache root (``$WHITEBOX_EVAL_CACHE``, ``~/.cache/whitebox_eval``) under
``sae/<model>-L<layer>-<digest>``, the digest a SHA-256 of the model, the layer, every training
setting and the training text's content. A second study (another task, another reproduction
call) with the same settings reads that folder; several processes on a cold cache wait on one
lock and the first trains (into a ``.partial-<pid>`` folder renamed into place, so a killed
training leaves no half SAE). Residuals are collected afresh and not kept (the SAE is).

``train_sae`` settings (:data:`DEFAULTS`, ``mui train-sae``'s own defaults): ``layer`` (a block
number, or ``middle``: ``n_layers // 2``, SmolLM2-135M's 15), ``text`` (files or folders, required:
real text; paper 001 trains nothing, the field trains on running text), ``tokens``, ``context``,
``heldout``, ``eval_tokens``, ``d_sae``, ``k``, ``steps``, ``batch_size``, ``lr``, ``aux_coef``,
``dead_window``, ``seed``.

:func:`fidelity_summary` puts the figures Table 7 stands beside MUI into one flat record: the
reconstruction MSE, explained variance and CE-loss score on the task's own tokens, and the SAE's
held-out figures from training (``fidelity.json``), the mean over the SAE layers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError

DEFAULTS: dict[str, Any] = {
    "layer": "middle", "text": None, "tokens": None, "context": 256, "heldout": 0.05, "eval_tokens": 16384,
    "d_sae": 4096, "k": 32, "steps": 2000, "batch_size": 512, "lr": 2e-3, "aux_coef": 1 / 32, "dead_window": 10_240,
    "seed": 0,
}
FILES = ("cfg.json", "sae_weights.safetensors", "fidelity.json")
"""A cached SAE is whole when these are there (written by the trainer)."""
FIGURES = ("mse", "explained_variance", "explained_variance_pooled", "ce_loss_score", "delta_loss", "l0")


def settings(train: Mapping[str, Any]) -> dict[str, Any]:
    """The full training settings (defaults filled in); one line for an unknown key or no text."""
    unknown = sorted(set(train) - set(DEFAULTS))
    if unknown:
        raise WhiteboxError(f"unknown train_sae setting(s) {', '.join(unknown)}; the settings are: "
                            f"{', '.join(DEFAULTS)}")
    out = {**DEFAULTS, **dict(train)}
    text = out["text"]
    if not text:
        raise WhiteboxError("train_sae needs text: the files or folders of real text the SAE is trained on")
    out["text"] = [str(text)] if isinstance(text, (str, Path)) else [str(t) for t in text]
    return out


def resolve_layer(lm, layer: int | str) -> int:
    """A block number, or ``middle`` (``n_layers // 2``)."""
    if layer == "middle":
        return lm.arch.n_layers // 2
    try:
        return lm.arch.check_layer(int(layer))
    except (TypeError, ValueError):
        raise WhiteboxError(f"train_sae layer must be a block number or 'middle', got {layer!r}") from None


def text_digest(paths: Sequence[str]) -> str:
    """SHA-256 over the training files (folders walked as the trainer walks them): names and content."""
    from whitebox_eval.mui.sae_text import text_files

    h = hashlib.sha256()
    for f in text_files(list(paths)):
        h.update(f.name.encode("utf-8") + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def cache_folder(lm, train: Mapping[str, Any], root: Path | None = None) -> tuple[Path, int, dict]:
    """(the SAE's cache folder, its layer, the full settings) for ``lm`` and ``train``."""
    from whitebox_eval.models.loading import cache_root

    full = settings(train)
    layer = resolve_layer(lm, full["layer"])
    key = {"model": str(lm.spec), "d_model": lm.arch.d_model, "n_layers": lm.arch.n_layers, "layer": layer,
           **{k: v for k, v in full.items() if k not in ("layer", "text")}, "text": text_digest(full["text"])}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    model = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(str(lm.spec)).name)[-40:]
    return (root or cache_root() / "sae") / f"{model}-L{layer}-{digest}", layer, full


def is_whole(folder: Path) -> bool:
    return all((folder / name).is_file() for name in FILES)


def trained_sae(lm, train: Mapping[str, Any], *, root: Path | None = None,
                show_progress: bool | None = None) -> tuple[str, dict[str, Any]]:
    """``LAYER=PATH`` of the SAE for ``train`` (trained now, or read from the cache) and what
    config notes of it: ``{"path", "layer", "trained_now", "settings"}``."""
    from whitebox_eval.models.cache_entries import fill_once
    from whitebox_eval.mui.sae_training import train_sae_for_model

    folder, layer, full = cache_folder(lm, train, root)

    def build(partial: Path) -> None:
        train_sae_for_model(lm, layer, partial, text=full["text"], n_tokens=full["tokens"], context=full["context"],
                            heldout=full["heldout"], d_sae=full["d_sae"], k=full["k"], steps=full["steps"],
                            lr=full["lr"], batch_size=full["batch_size"], seed=full["seed"], aux_coef=full["aux_coef"],
                            dead_tokens=full["dead_window"], eval_tokens=full["eval_tokens"], cache_dir=None,
                            show_progress=show_progress)

    trained_now = fill_once(folder, is_whole, build)
    return f"{layer}={folder}", {"path": str(folder), "layer": layer, "trained_now": trained_now, "settings": full}


def check_sae_options(score: str, sae: Sequence[str], train: Mapping[str, Any] | None) -> None:
    """``--score sae`` takes SAEs from ``--sae`` or ``train_sae``, one of them; neither is used otherwise."""
    if (score == "sae") != bool(sae or train) or (sae and train):
        raise WhiteboxError("--score sae needs --sae LAYER=PATH or train_sae settings, one of them (and both are "
                            "only used with --score sae)")


def study_saes(lm, sae: Sequence[str], train: Mapping[str, Any] | None, *,
               show_progress: bool | None = None) -> tuple[tuple[str, ...], dict[str, Any] | None]:
    """The SAE specs of a study (``--sae``, or the one ``train_sae`` names, trained or cached) and the
    trained SAE's record (None without ``train_sae``)."""
    if not train:
        return tuple(sae), None
    spec, info = trained_sae(lm, train, show_progress=show_progress)
    return (spec,), info


def heldout_fidelity(path: str | Path) -> dict[str, Any]:
    """The held-out figures ``train-sae`` wrote beside an SAE (``fidelity.json``), {} without them."""
    try:
        return dict(json.loads((Path(path) / "fidelity.json").read_text(encoding="utf-8")).get("heldout") or {})
    except (OSError, ValueError, AttributeError):
        return {}


def fidelity_summary(task_fidelity: Mapping[str, Mapping[str, Any]], paths: Sequence[str]) -> dict[str, Any]:
    """Table 7's figures beside feature MUI: on the task's tokens (the mean over the SAE layers of
    :data:`FIGURES`) and, under ``heldout``, on the SAE's held-out training text where known."""
    def mean(rows: list[Mapping[str, Any]], key: str) -> float | None:
        vals = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]
        return sum(vals) / len(vals) if vals else None

    task_rows = [r for r in task_fidelity.values() if r.get("n_tokens")]
    held = [h for h in (heldout_fidelity(p) for p in paths) if h]
    out: dict[str, Any] = {k: mean(task_rows, k) for k in FIGURES}
    out["n_tokens"] = sum(int(r["n_tokens"]) for r in task_rows)
    out["layers"], out["saes"] = list(task_fidelity), [str(p) for p in paths]
    out["heldout"] = {k: mean(held, k) for k in FIGURES} if held else None
    out["note"] = ("on the task's prompt + response tokens (first position and padding left out), the mean over the "
                   "SAE layers; heldout: the SAE's held-out training text (fidelity.json), where it was trained here")
    return out
