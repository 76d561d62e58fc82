"""Where an SAE comes from: a local folder or file, ``hf:ORG/REPO/PATH[@REVISION]`` (a
``--models-root`` copy ``DIR/ORG--REPO``, else the Hugging Face hub, offline from its cache), or ``saelens:RELEASE/SAE_ID`` (a name in SAELens' release list,
``pretrained_saes.yaml``, looked up only: the files are read by our own loaders from the hub
cache). What was loaded is recorded (:meth:`ResolvedSAE.record`: route, release, id, repository,
commit, SHA-256 of the weights, Neuronpedia id) and each feature links to Neuronpedia where the
release names it (:func:`neuronpedia_link`; nothing is fetched at run time).

The release list is ``$WHITEBOX_EVAL_SAE_RELEASES`` when set, else a dated snapshot of SAELens'
list shipped as package data (``data/saelens_releases.json.gz``, MIT notice beside it, refreshed by
``scripts/refresh_saelens_releases.py``), then, for a release the snapshot lacks, the one installed
with ``sae_lens`` (found on ``sys.path``, never imported): sae-lens is never needed. A release made
for another model than ``--model`` is a warning (:func:`check_sources`).
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.hook_points import HookPoint, hook_from_names

RELEASES_ENV = "WHITEBOX_EVAL_SAE_RELEASES"
NEURONPEDIA = "https://www.neuronpedia.org"
GEMMA_SCOPE_2_CFG = "config.json"
#: SAELens' release list as shipped (scripts/refresh_saelens_releases.py; MIT notice beside it)
SNAPSHOT = Path(__file__).parent / "data" / "saelens_releases.json.gz"


@dataclass
class ResolvedSAE:
    """An SAE source resolved to files on disk, with what its names and files say about its hook."""

    path: Path
    route: str  # local | hf | saelens
    source: str
    repo_id: str | None = None
    revision: str | None = None
    release: str | None = None
    sae_id: str | None = None
    neuronpedia: str | None = None
    release_model: str | None = None  # the model the release names (a warning when --model differs)
    release_list: str | None = None  # which release list named it
    hook_name: str | None = None  # from a file beside the weights (Gemma Scope 2's hf_hook_point_in)
    names_hook: HookPoint | None = None  # from the release's names
    extra: dict = field(default_factory=dict)

    def record(self) -> dict:
        """config.yaml's entry: route, the source as given, and what pins it (commit, SHA-256)."""
        out = {"route": self.route, "source": self.source, "path": str(self.path), "sha256": weights_sha256(self.path)}
        for key in ("repo_id", "revision", "release", "sae_id", "neuronpedia", "release_model", "release_list"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.neuronpedia:  # a feature's page is this plus /INDEX (the explorer links each feature)
            out["neuronpedia_url"] = f"{NEURONPEDIA}/{self.neuronpedia.strip('/')}"
        return out


def resolve_sae(source: str) -> ResolvedSAE:
    """``source`` as files on disk (see the module docstring); a bad one is one line naming the fix."""
    source = str(source).strip()
    if source.startswith("hf:"):
        return _from_hub(source)
    if source.startswith("saelens:"):
        return _from_release(source)
    path = Path(source).expanduser()
    if not path.exists():
        raise WhiteboxError(f"SAE path not found: {source} (a folder or weights file, hf:ORG/REPO/PATH, or "
                            "saelens:RELEASE/SAE_ID)")
    if (path / "sae" / "cfg.json").is_file():  # an SAE study's run folder (sae/study.py): its sae/ folder
        path, source = path / "sae", str(path / "sae")
    return ResolvedSAE(path, "local", source, hook_name=_cfg_hook(path), names_hook=hook_from_names(None, str(path)))


def split_spec(spec: str) -> tuple[str | None, str]:
    """``LAYER=SOURCE`` / ``HOOK=SOURCE`` -> (prefix, source); a source alone -> (None, source). An
    ``=`` inside a path or ``hf:``/``saelens:`` name is not a prefix."""
    head, sep, tail = spec.partition("=")
    if sep and (head.lstrip("-").isdigit() or "hook" in head or head.startswith(("blocks.", "model.", "layers."))):
        return head, tail
    return None, spec


def check_sources(specs, model: str | None = None) -> None:
    """Each ``[LAYER=|HOOK=]SOURCE`` resolved, so a source that is nowhere is one line before
    anything heavy is imported or loaded (a command calls this first; nothing here imports torch);
    a release made for another model than ``model`` is a warning (the width check comes later)."""
    from whitebox_eval.sae.file_checks import check_configs

    for spec in specs:
        resolved = resolve_sae(split_spec(str(spec))[1])
        check_configs(resolved.path)  # a config of the wrong shape: one line before the model loads
        if model_mismatch(resolved.release_model, model):
            warnings.warn(f"SAE {resolved.source}: release {resolved.release} was made for {resolved.release_model}, "
                          f"not --model {model}; its features describe that model", stacklevel=2)


def _cfg_hook(path: Path) -> str | None:
    """Gemma Scope 2's ``config.json`` beside the weights: ``hf_hook_point_in``."""
    folder = path if path.is_dir() else path.parent
    cfg = folder / GEMMA_SCOPE_2_CFG
    if not cfg.is_file():
        return None
    from whitebox_eval.sae.file_checks import read_cfg

    return read_cfg(cfg).get("hf_hook_point_in")


_HUB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _split_hub(spec: str) -> tuple[str, str, str | None]:
    """``ORG/REPO/PATH[@REVISION]`` -> (repo id, path in the repository, revision). PATH stays
    inside the repository: ``..``, ``.``, empty parts, a leading ``/`` or ``\\`` are refused here,
    and links leading out of the snapshot when it is read (:func:`_confined`)."""
    given = spec
    spec, _, revision = spec.partition("@")
    parts = spec.split("/")
    if len(parts) < 2 or not all(_HUB_NAME.fullmatch(p) for p in parts[:2]):
        raise WhiteboxError(f"hf:{given}: give hf:ORG/REPO/PATH (ORG and REPO as the hub spells them, PATH the "
                            "SAE's folder or file in the repository)")
    inner = parts[2:]
    if inner and inner[-1] == "":  # a trailing slash names the same folder
        inner = inner[:-1]
    if any(p in ("", ".", "..") or "\\" in p for p in inner):
        raise WhiteboxError(f"hf:{given}: PATH must be a path inside the repository ('..', '.', empty parts and "
                            "backslashes are refused)")
    if revision and (revision.startswith("/") or ".." in revision.split("/") or "\\" in revision):
        raise WhiteboxError(f"hf:{given}: revision {revision!r} is not a branch, tag or commit")
    return f"{parts[0]}/{parts[1]}", "/".join(inner), revision or None


def _confined(root: Path, inner: str, source: str) -> Path:
    """``root / inner``, refused in one line when it or a file under it resolves outside ``root``
    (a hub cache snapshot's files may link into the repository's own ``blobs/``, as the cache
    stores them): what is recorded as the repository's is what is read."""
    path = root / inner if inner else root
    if not path.exists():
        return path
    allowed = [root.resolve()]
    if root.parent.name == "snapshots":
        allowed.append((root.parent.parent / "blobs").resolve())
    for target in [path, *(path.rglob("*") if path.is_dir() else ())]:
        real = target.resolve()
        if not any(real == a or real.is_relative_to(a) for a in allowed):
            raise WhiteboxError(f"{source}: {target.relative_to(root)} leads outside the repository's files "
                                f"(to {real}); give a path inside the repository")
    return path


def hub_offline() -> str | None:
    """Why the hub is not to be reached now (offline mode, no DNS), or None."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    from whitebox_eval.models.loading import hub_unreachable_reason

    return hub_unreachable_reason()


def _from_hub(source: str, **extra) -> ResolvedSAE:
    repo_id, inner, revision = _split_hub(source.removeprefix("hf:"))
    from whitebox_eval.models.hub_sources import local_folder, models_root
    from whitebox_eval.models.load_options import LOAD

    copy = local_folder(f"{repo_id}@{revision}" if revision else repo_id, models_root(LOAD.models_root))
    if copy is not None:  # a --models-root copy of the repository, found the way models are
        path = _confined(Path(copy), inner, source)
        if not path.exists():
            raise WhiteboxError(f"{source}: the --models-root copy {copy} has no {inner!r}")
        return ResolvedSAE(path, extra.pop("route", "hf"), extra.pop("given", source), repo_id=repo_id, revision=revision,
                           hook_name=_cfg_hook(path), names_hook=hook_from_names(repo_id, inner), **extra)
    offline = hub_offline()
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    patterns = [f"{inner}/*", inner, f"{inner}/**"] if inner else None
    try:
        snapshot = Path(snapshot_download(repo_id, revision=revision, allow_patterns=patterns,
                                          local_files_only=offline is not None))
    except (LocalEntryNotFoundError, FileNotFoundError) as e:
        raise WhiteboxError(f"{source}: not in the Hugging Face cache ({offline or type(e).__name__}); download it "
                            f"once online (hf download {repo_id} --include '{inner}/*'), or give a local "
                            "folder") from None
    except (HfHubHTTPError, OSError, ValueError) as e:
        raise WhiteboxError(f"{source}: could not fetch from the hub ({type(e).__name__}: "
                            f"{str(e).splitlines()[0] if str(e) else ''})") from None
    path = _confined(snapshot, inner, source)
    if not path.exists():
        raise WhiteboxError(f"{source}: {repo_id} (snapshot {snapshot.name}) has no {inner!r}")
    return ResolvedSAE(path, extra.pop("route", "hf"), extra.pop("given", source), repo_id=repo_id,
                       revision=snapshot.name, hook_name=_cfg_hook(path), names_hook=hook_from_names(repo_id, inner),
                       **extra)


def _read_yaml_list(path: Path) -> dict:
    import yaml

    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise WhiteboxError(f"SAE release list {path} does not read as YAML ({str(e).splitlines()[0]})") from None
    lookup = data.get("SAE_LOOKUP", data) if isinstance(data, dict) else None
    if not isinstance(lookup, dict) or not all(isinstance(v, dict) or v is None for v in lookup.values()):
        raise WhiteboxError(f"SAE release list {path} holds no releases (SAELens' mapping of release names)")
    return lookup


def _snapshot() -> tuple[dict, str]:
    """The release list shipped with whitebox-eval (``scripts/refresh_saelens_releases.py`` writes it)."""
    data = json.loads(gzip.decompress(SNAPSHOT.read_bytes()))
    src = data["source"]
    return data["releases"], f"the SAELens release list of sae-lens {src['version']} ({src['taken']}) shipped with whitebox-eval"


def release_lists():
    """Each SAELens release list to look a name up in, in order, as (lookup, where): the file
    ``$WHITEBOX_EVAL_SAE_RELEASES`` names (alone, when set); else the snapshot shipped with
    whitebox-eval, then an installed sae-lens's own ``pretrained_saes.yaml`` (newer releases;
    found on ``sys.path``, never imported). Lists are read only when the previous lacks a name."""
    env = os.environ.get(RELEASES_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise WhiteboxError(f"${RELEASES_ENV} names {env}, which is no file")
        yield _read_yaml_list(path), str(path)
        return
    yield _snapshot()
    for path in (Path(p) / "sae_lens" / "pretrained_saes.yaml" for p in sys.path if p):
        if path.is_file():
            yield _read_yaml_list(path), str(path)
            return


def lookup_release(release: str, sae_id: str) -> dict:
    """The release's repository and the SAE's entry (``path``, ``neuronpedia``, ``model``...), and
    ``release_list``: which list named it."""
    tried, near = [], []
    for lookup, where in release_lists():
        tried.append(where)
        if release not in lookup:
            near += [r for r in lookup if r not in near]
            continue
        entry = lookup[release] or {}
        saes = {str(s.get("id")): s for s in entry.get("saes") or [] if isinstance(s, dict)}
        if sae_id not in saes:
            shown = ", ".join(list(saes)[:4])
            raise WhiteboxError(f"SAE id {sae_id!r} is not in release {release!r} ({len(saes)} ids, e.g. {shown})")
        found = {"repo_id": entry.get("repo_id"), "model": entry.get("model"), **saes[sae_id], "release_list": where}
        if not found["repo_id"]:
            raise WhiteboxError(f"release {release!r} in {where} names no repo_id")
        return {**found, "repo_id": str(found["repo_id"])}
    near = difflib.get_close_matches(release, near, n=5, cutoff=0.6)
    raise WhiteboxError(f"SAE release {release!r} is not in {' nor '.join(tried)}"
                        + (f"; similar: {', '.join(near)}" if near else "")
                        + f" (a newer release: pip install sae-lens, or set ${RELEASES_ENV} to its pretrained_saes.yaml)")


def _model_key(name: str) -> str:
    """A model name compared loosely: its last path part, no revision, lower case, letters and digits."""
    return re.sub(r"[^a-z0-9]", "", str(name).split("@")[0].rstrip("/").rsplit("/", 1)[-1].lower())


def model_mismatch(release_model: str | None, model: str | None) -> bool:
    """Whether a release made for ``release_model`` reads another model than ``model`` (``--model``)."""
    if not release_model or not model:
        return False
    a, b = _model_key(release_model), _model_key(model)
    return bool(a and b) and a not in b and b not in a


def _from_release(source: str) -> ResolvedSAE:
    name = source.removeprefix("saelens:")
    release, sep, sae_id = name.partition("/")
    if not sep or not release or not sae_id:
        raise WhiteboxError(f"{source}: give saelens:RELEASE/SAE_ID, e.g. "
                            "saelens:gemma-scope-2b-pt-res-canonical/layer_20/width_16k/canonical")
    entry = lookup_release(release, sae_id)
    inner = str(entry.get("path") or sae_id).strip("/")
    return _from_hub(f"hf:{entry['repo_id']}/{inner}", route="saelens", given=source, release=release,
                     sae_id=sae_id, neuronpedia=entry.get("neuronpedia"), release_model=entry.get("model"),
                     release_list=entry["release_list"])


def weights_sha256(path: Path) -> str:
    """SHA-256 over the SAE's files (a folder: every file in name order, with its relative name)."""
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode() + b"\0")
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 23), b""):
                h.update(block)
    return h.hexdigest()


def neuronpedia_link(neuronpedia: str | None, index: int) -> str | None:
    """A feature's Neuronpedia page (``model/source/index``), or None where the release names none."""
    return None if not neuronpedia else f"{NEURONPEDIA}/{neuronpedia.strip('/')}/{int(index)}"


def feature_links(sources: list[dict], key_sets, width: int, top: int = 32) -> dict:
    """results.json's ``sae_features``: each SAE's source (layer, hook, Neuronpedia id) and the ``top``
    features the most items use (``key_sets``: each item's key units, flat ``sae * width + feature``),
    each with its Neuronpedia id (``model/source/index``) and link where the release names one."""
    import numpy as np

    counts = np.zeros(max(len(sources), 1) * width, dtype=np.int64)
    for units in key_sets:
        np.add.at(counts, np.unique(np.asarray(units, dtype=np.int64)), 1)
    order = [int(u) for u in np.argsort(-counts, kind="stable")[:top] if counts[u] > 0]
    features = []
    for u in order:
        sae, index = divmod(u, width)
        src = sources[sae] if sae < len(sources) else {}
        entry = {"unit": f"{sae}.{index}", "layer": src.get("layer"), "feature": index, "n_items": int(counts[u])}
        if src.get("neuronpedia"):
            entry["neuronpedia"] = f"{src['neuronpedia'].strip('/')}/{index}"
            entry["link"] = neuronpedia_link(src["neuronpedia"], index)
        features.append(entry)
    return {"saes": [{k: s.get(k) for k in ("layer", "hook", "route", "release", "sae_id", "neuronpedia") if s.get(k) is not None}
                     for s in sources],
            "top_features": features}
