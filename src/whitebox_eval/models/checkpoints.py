"""Checkpoints kept along one training: the weights at stated steps, each a folder that loads as ``--model``.

A training that keeps ``n`` checkpoints saves the model before its first step (``step-000000``, the
base weights) and at ``n`` steps spaced evenly over its planned steps (:func:`checkpoint_steps`, the
last the final step), each under ``<run folder>/checkpoints/step-NNNNNN/`` as a Hugging Face folder
(``model.safetensors``, config.json, the tokenizer) with ``trained.json`` (the step, the producer's
run id, the weights' SHA-256: the fingerprint a consumer records as ``model_weights``). A folder is
written under a ``.partial`` name and renamed into place, so a kill leaves none half-written; one
already complete is kept (a resumed training that passes its step again writes the same weights).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError

CHECKPOINTS = "checkpoints"


def checkpoint_steps(planned: int, keep: int) -> list[int]:
    """``keep`` steps spaced evenly over ``planned`` optimizer steps, the last one ``planned``
    (``round(k * planned / keep)``, k = 1..keep; fewer, distinct, where ``planned < keep``)."""
    if keep < 0 or planned < 0:
        raise WhiteboxError("checkpoint counts and planned steps must be >= 0")
    if keep == 0 or planned == 0:
        return []
    return sorted({max(1, round(k * planned / keep)) for k in range(1, keep + 1)})


def checkpoint_name(step: int) -> str:
    return f"step-{int(step):06d}"


def save_checkpoint(lm, run_folder: str | Path, step: int, run_id: str) -> Path:
    """The model's weights now as ``checkpoints/step-NNNNNN/`` of ``run_folder`` (atomically; a
    complete one is kept as it is) with its ``trained.json``."""
    from whitebox_eval.models.training import TRAINED_FILE, save_weights, weights_file_sha256  # torch: not at planning

    root = Path(run_folder) / CHECKPOINTS
    target = root / checkpoint_name(step)
    if (target / TRAINED_FILE).is_file():
        return target
    tmp = root / f".{target.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    was = lm.model.training
    lm.model.eval()
    try:
        save_weights(lm, tmp)
    finally:
        lm.model.train(was)
    info = {"step": int(step), "run_id": run_id, "sha256": weights_file_sha256(tmp)}
    (tmp / TRAINED_FILE).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)  # an incomplete one (no trained.json) from a killed rename
    os.replace(tmp, target)
    return target


def list_checkpoints(run_folder: str | Path) -> list[dict[str, Any]]:
    """The complete checkpoints of a training's run folder, by step: ``{"step", "path", "sha256",
    "run_id"}`` each (one line where the folder keeps none)."""
    from whitebox_eval.models.training import TRAINED_FILE, WEIGHTS_FILE

    root = Path(run_folder) / CHECKPOINTS
    found = []
    for path in sorted(root.glob("step-*")) if root.is_dir() else []:
        marker = path / TRAINED_FILE
        if marker.is_file() and (path / WEIGHTS_FILE).is_file():
            info = json.loads(marker.read_text(encoding="utf-8"))
            found.append({"step": int(info["step"]), "path": str(path), "sha256": info["sha256"],
                          "run_id": info.get("run_id")})
    if not found:
        raise WhiteboxError(f"{run_folder} keeps no checkpoints: fine-tune it with --keep-checkpoints N")
    return sorted(found, key=lambda c: c["step"])
