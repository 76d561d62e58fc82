"""The one way a study opens its run folder: create it, or resume it.

:func:`open_run` writes config.yaml (with ``data_files``: the sha256 of every data file
the study read, so ``--resume`` refuses changed data in one line; and ``model_load``, how the model
was loaded beyond its name, when that is not a plain load), or reopens the folder
with ``--resume`` after comparing the configs; under torchrun rank 0 creates the folder
and every rank gets a view that appends samples to its own shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from whitebox_eval.runs.data_files import CONFIG_KEY as DATA_FILES_KEY, data_file_records
from whitebox_eval.runs.folder import RunFolder


def open_run(output: Path | str, config: Mapping[str, Any], *, run_id: str | None = None, resume: bool = False,
             world=None, data_files: Iterable[str | Path] | None = None) -> RunFolder:
    """Create ``<output>/<run_id>`` for ``config``, or continue it with ``resume``.

    ``data_files``: the paths the study read (``with datafiles.recording() as read:``
    around loading, then ``data_files=read``), recorded in config.yaml and checked on
    resume. ``world``: a :class:`~whitebox_eval.runs.distributed.World` under torchrun.
    """
    from whitebox_eval.models.load_options import record as load_record
    from whitebox_eval.models.training import trained_model_record

    config = {**config, **load_record()}  # model_load: --model-arg, --adapter (with its SHA-256), remote code
    config.update(trained_model_record(config.get("model")))  # model_weights: a fine-tuning's run folder as --model
    if data_files is not None:
        config[DATA_FILES_KEY] = data_file_records(data_files)
    main = world is None or world.main
    folder = RunFolder.create(output, config, run_id=run_id, resume=resume) if main else None
    if world is None or not world.distributed:
        return folder
    path = world.broadcast(str(folder.path) if folder is not None else None)
    return (folder or RunFolder.open(path)).for_rank(world.rank)
