"""An SAE a study needs, trained into a run folder of its own: ``studies.sae`` and a reproduce
child (paper 001 sec. 2.1.2, eq. 4-6, 9; Tables 6 and 7).

The paper reads released SAEs (Llama Scope, Gemma Scope: every layer, 128K features, Table 4);
the bundled models have none, so a reproduction trains one per model with ``mui train-sae``'s
trainer (:func:`~whitebox_eval.sae.training.train_sae_for_model`) as a child of its own, and the
MUI children read that child's folder (``--sae RUN_FOLDER``, :func:`whitebox_eval.sae.sets.load_sae_set`).
The SAE is written under ``<run>/sae`` (SAELens' layout and ``fidelity.json``) through a partial
folder renamed into place, so a killed training leaves no half SAE and ``--resume`` trains again
only what is missing. Residuals are collected afresh and not kept (the SAE is).

:class:`SAEConfig`'s settings are ``mui train-sae``'s own defaults: ``layer`` (a block number, or
``middle``: ``n_layers // 2``, SmolLM2-135M's 15), ``text`` (files or folders, required: real text),
``tokens``, ``context``, ``heldout``, ``eval_tokens``, ``d_sae``, ``k``, ``steps``, ``batch_size``,
``lr``, ``aux_coef``, ``dead_window``, ``seed``. :func:`fidelity_summary` puts the figures Table 7
stands beside MUI into one flat record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs import RunFolder, config_dict, open_run

SAE_DIR = "sae"
"""The SAE's folder inside its run folder."""
FILES = ("cfg.json", "sae_weights.safetensors", "fidelity.json")
"""A trained SAE is whole when these are there (written by the trainer)."""
FIGURES = ("mse", "explained_variance", "explained_variance_pooled", "ce_loss_score", "delta_loss", "l0")


@dataclass
class SAEConfig:
    """A TopK SAE on one block's output residual stream, trained on real text."""

    model: str = "smollm2-135m"
    layer: int | str = "middle"
    text: tuple[str, ...] = ()
    tokens: int | None = None
    context: int = 256
    heldout: float = 0.05
    eval_tokens: int = 16384
    d_sae: int = 4096
    k: int = 32
    steps: int = 2000
    batch_size: int = 512
    lr: float = 2e-3
    aux_coef: float = 1 / 32
    dead_window: int = 10_240
    seed: int = 0
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        self.text = (str(self.text),) if isinstance(self.text, (str, Path)) else tuple(str(t) for t in self.text)

    def to_dict(self) -> dict:
        return config_dict(self, "sae")


def resolve_layer(lm, layer: int | str) -> int:
    """A block number, or ``middle`` (``n_layers // 2``)."""
    if layer == "middle":
        return lm.arch.n_layers // 2
    try:
        return lm.arch.check_layer(int(layer))
    except (TypeError, ValueError):
        raise WhiteboxError(f"SAE layer must be a block number or 'middle', got {layer!r}") from None


def is_whole(folder: Path) -> bool:
    return all((folder / name).is_file() for name in FILES)


def run_sae(cfg: SAEConfig, output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
            loaded=None, show_progress: bool | None = None) -> RunFolder:
    """Train (or, resumed, keep) the SAE of ``cfg`` in a run folder; results.json holds its
    ``LAYER=PATH`` (``sae``) and its held-out fidelity."""
    from whitebox_eval.models import load_model
    from whitebox_eval.models.cache_entries import fill_once
    from whitebox_eval.sae.training import train_sae_for_model

    if not cfg.text:
        raise WhiteboxError("an SAE study needs text: the files or folders of real text the SAE is trained on")
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    layer = resolve_layer(loaded, cfg.layer)
    folder = open_run(output, cfg.to_dict(), run_id=run_id, resume=resume)
    target = folder.path / SAE_DIR

    def build(partial: Path) -> None:
        train_sae_for_model(loaded, layer, partial, text=list(cfg.text), n_tokens=cfg.tokens, context=cfg.context,
                            heldout=cfg.heldout, d_sae=cfg.d_sae, k=cfg.k, steps=cfg.steps, lr=cfg.lr,
                            batch_size=cfg.batch_size, seed=cfg.seed, aux_coef=cfg.aux_coef,
                            dead_tokens=cfg.dead_window, eval_tokens=cfg.eval_tokens, cache_dir=None,
                            show_progress=show_progress)

    trained_now = fill_once(target, is_whole, build)
    folder.log(f"SAE {target}: {'trained now' if trained_now else 'kept from before'}")
    held = heldout_fidelity(target)
    folder.save_results({"headline": {k: held.get(k) for k in ("explained_variance", "mse", "l0", "ce_loss_score")},
                         "sae": f"{layer}={target}", "layer": layer, "heldout": held})
    return folder


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
