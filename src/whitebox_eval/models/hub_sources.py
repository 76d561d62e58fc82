"""A hub id with a revision, ``org/name@revision``, found where it is: a ``--models-root`` folder
(``DIR/models.yaml``'s mapping, else ``DIR/org--name@revision`` or, without a revision,
``DIR/org--name``), the Hugging Face cache (offline: ``local_files_only``, a branch or tag read
through the cache's ``refs/``), or the hub (online). Checked before any model work: a revision
that is nowhere to be read is one line naming where to put it."""

from __future__ import annotations

from pathlib import Path

import yaml

from whitebox_eval.errors import WhiteboxError

MAPPING_FILE = "models.yaml"


def split_revision(spec: str) -> tuple[str, str | None]:
    """``org/name@revision`` -> (``org/name``, revision); anything else unchanged with None."""
    name, sep, rev = spec.rpartition("@")
    if not sep or not name or "/" not in name or name.startswith((".", "/", "~")) or "/" in rev:
        return spec, None
    return name, rev or None


def models_root(root: str | None) -> Path | None:
    if root is None:
        return None
    path = Path(root).expanduser()
    if not path.is_dir():
        raise WhiteboxError(f"--models-root {root}: no such folder")
    return path


def local_folder(model: str, root: Path | None) -> str | None:
    """The folder holding hub id ``model`` (``org/name`` or ``org/name@revision``) under ``root``
    (None: not there). A name without a hub id is found through ``DIR/models.yaml`` only."""
    if root is None or model.count("/") > 1 or Path(model).expanduser().exists():
        return None
    mapping_file = root / MAPPING_FILE
    if mapping_file.is_file():
        try:
            mapping = yaml.safe_load(mapping_file.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as e:
            raise WhiteboxError(f"--models-root: {mapping_file} does not read as YAML ({e})") from None
        if not isinstance(mapping, dict):
            raise WhiteboxError(f"--models-root: {mapping_file} must map hub ids to folders")
        if model in mapping:
            folder = (root / str(mapping[model])).expanduser()
            if not folder.is_dir():
                raise WhiteboxError(f"--models-root: {mapping_file} maps {model} to {folder}, which is no folder")
            return str(folder.resolve())
    if "/" not in model:
        return None
    folder = root / model.replace("/", "--")
    return str(folder.resolve()) if folder.is_dir() else None


def cached_snapshot(repo_id: str, revision: str | None) -> Path | None:
    """The hub cache's snapshot folder of ``repo_id`` at ``revision`` (a commit, branch or tag), or None."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, revision=revision, local_files_only=True, cache_dir=constants.HF_HUB_CACHE))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError, OSError):
        return None


def resolve_hub(spec: str, root: Path | None, offline_reason: str | None) -> tuple[str, dict]:
    """(folder or hub id, extra from_pretrained kwargs) for a hub id with an optional ``@revision``."""
    repo_id, revision = split_revision(spec)
    folder = local_folder(spec, root) if root is not None else None
    if folder is not None:
        return folder, {}
    if revision is None:
        return spec, {}
    if offline_reason is None:
        return repo_id, {"revision": revision}
    snapshot = cached_snapshot(repo_id, revision)
    if snapshot is None:
        raise WhiteboxError(f"{spec}: revision {revision} is not in the Hugging Face cache and the hub is unavailable "
                            f"({offline_reason}); download it once online (hf download {repo_id} "
                            f"--revision {revision}), or put a copy in DIR/{repo_id.replace('/', '--')}@{revision} "
                            "and give --models-root DIR")
    return str(snapshot), {}
