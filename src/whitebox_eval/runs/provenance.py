"""What config.yaml records about a run, and how a resumed run is compared with it.

config.yaml holds the study's settings plus what the run folder adds itself
(:data:`RECORDED_KEYS`: versions, git commit, start time). ``--resume`` compares every
key except the volatile ones (:data:`ALWAYS_VOLATILE` and the config's own
``_volatile`` list, e.g. batch size) and the data files, which are compared by digest
(:mod:`whitebox_eval.runs.data_files`).
"""

from __future__ import annotations

import functools
import math
import platform
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

import whitebox_eval
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.plain_values import plain_value

CONFIG_FILE = "config.yaml"

VOLATILE_KEY = "_volatile"
"""Config key listing keys that do not change the numbers (batch size, progress, paths)."""

RECORDED_KEYS = ("run_id", "created", "whitebox_eval_version", "python_version",
                 "torch_version", "transformers_version", "whitebox_eval_git_commit", "placement")
"""Keys the run folder adds to config.yaml itself; never compared on resume."""

ALWAYS_VOLATILE = frozenset({VOLATILE_KEY, "command", *RECORDED_KEYS, "model_load.models_root"})
"""Keys never compared on resume: the command line differs by ``--resume`` itself; where a
``--models-root`` copy was found is checked when the model loads, not compared."""

ABSENT = object()


def show(value: Any) -> str:
    return "<absent>" if value is ABSENT else repr(value)


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any],
                       ignore: Iterable[str] = ()) -> list[tuple[str, Any, Any]]:
    """``(dotted key, old, new)`` for every differing key, skipping ``ignore``d keys.

    A key in ``ignore`` may be top-level (``batch_size``) or dotted (``engine.chunk``).
    A key present on one side only shows ``<absent>`` on the other.
    """
    ignore = set(ignore)
    out: list[tuple[str, Any, Any]] = []

    def walk(a: Any, b: Any, prefix: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                dotted = f"{prefix}{key}"
                if dotted in ignore:
                    continue
                walk(a.get(key, ABSENT), b.get(key, ABSENT), dotted + ".")
        elif not _same(a, b):
            out.append((prefix.rstrip("."), a, b))

    walk(dict(old), dict(new), "")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float))
        and not isinstance(a, bool) and not isinstance(b, bool) and a == b)


def volatile_keys(config: Mapping[str, Any]) -> list[str]:
    keys = config.get(VOLATILE_KEY) or []
    if isinstance(keys, str):
        return [keys]
    return [str(k) for k in keys]


def config_for_storage(config: Mapping[str, Any]) -> dict[str, Any]:
    plain = plain_value(dict(config), nonfinite_to_none=False)
    for key in RECORDED_KEYS:  # re-recorded by this run (a config read from a run has them)
        plain.pop(key, None)
    return plain


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


@functools.cache
def _git_commit() -> str | None:
    """The commit of the whitebox-eval checkout running this (``+dirty`` with tracked
    changes), or None when it is installed from a wheel or git is unavailable. Asked once
    per process: the code a process runs does not change under it."""
    import subprocess

    root = Path(whitebox_eval.__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "") if head else None


def versions() -> dict[str, Any]:
    """What config.yaml records about the software that made the run and where it computes
    (``placement``: device, GPU name, device map, SDPA backends); never compared on resume."""
    from whitebox_eval.models.placement import record

    out = {"placement": record(), "whitebox_eval_version": whitebox_eval.__version__,
           "python_version": platform.python_version(),
           "torch_version": _package_version("torch"),
           "transformers_version": _package_version("transformers")}
    commit = _git_commit()
    if commit:
        out["whitebox_eval_git_commit"] = commit
    return out


def dump_yaml(config: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(config), sort_keys=True, default_flow_style=False,
                          allow_unicode=True)


def read_config(path: Path) -> dict[str, Any]:
    try:
        config = yaml.safe_load((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise WhiteboxError(f"{path / CONFIG_FILE} is not valid YAML ({exc}); fix or "
                            "restore it") from None
    if not isinstance(config, dict):
        raise WhiteboxError(f"{path / CONFIG_FILE} does not hold a mapping; fix or restore it")
    return config


def default_run_id(config: Mapping[str, Any], when: datetime | None = None) -> str:
    """``<UTC yyyymmdd-HHMMSS>-<suite>-<model>-<task>`` from whichever keys the config has."""
    when = when or datetime.now(UTC)
    parts = [when.astimezone(UTC).strftime("%Y%m%d-%H%M%S")]
    for key in ("suite", "model", "task"):
        value = config.get(key, config.get("tasks") if key == "task" else None)
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = "_".join(str(v) for v in value)
        text = str(value)
        if key == "model" and _looks_like_path(text):
            text = Path(text.rstrip("/\\")).name.removesuffix(".gguf")
        part = _sanitise(text)
        if part:
            parts.append(part)
    return "-".join(parts)


def _sanitise(text: str, limit: int = 48) -> str:
    text = re.sub(r"[^A-Za-z0-9._]+", "-", text)
    return text.strip("-._")[:limit].strip("-._")


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", "./", "../", "~", ".\\")) or text.endswith(".gguf") \
        or "\\" in text or text.count("/") > 1


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
