"""The SAEs a feature-MUI study reads: one per layer, all at one hook point, loaded strictly through
the hook table (:mod:`whitebox_eval.internals.hook_points`) from any source
(:mod:`whitebox_eval.sae.sources`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.sae.encoding import SAE, ReconstructionStats
from whitebox_eval.sae.files import load_sae
from whitebox_eval.sae.sources import split_spec

#: the last SAEs read, by path and the stamps (name, mtime, size) of its files: an ``--edit sae:``
#: is checked before the run folder is written and built again for the run, from one read
_READ: dict[tuple, SAE] = {}
_KEEP = 2


def read_sae(path) -> SAE:
    """:func:`~whitebox_eval.sae.files.load_sae` of ``path``, read again only when its files changed
    (the last :data:`_KEEP` kept)."""
    from pathlib import Path

    p = Path(path)
    files = sorted(p.iterdir()) if p.is_dir() else [p]
    key = (str(p.resolve()), tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files if f.is_file()))
    if key not in _READ:
        while len(_READ) >= _KEEP:
            _READ.pop(next(iter(_READ)))
        _READ[key] = load_sae(p)
    return _READ[key]


@dataclass
class SAESet:
    """One SAE per chosen layer, all of the same width, reading ``point`` (a capture point of
    :mod:`whitebox_eval.internals.hook_points`: resid, resid_pre, resid_mid, mlp_out, attn_out,
    head_out or mlp_act); ``sources`` says where each came from (config.yaml's ``sae_sources``)."""

    layers: list[int]
    saes: list[SAE]
    point: str = "resid"
    paths: list[str] = field(default_factory=list)
    quality: list[ReconstructionStats] = field(default_factory=list)
    sources: list[dict] = field(default_factory=list)

    def take_quality(self) -> list[ReconstructionStats]:
        """Reconstruction statistics gathered since the last call (one per SAE), then reset."""
        out = self.quality or [ReconstructionStats() for _ in self.saes]
        self.quality = [ReconstructionStats() for _ in self.saes]
        return out

    @property
    def width(self) -> int:
        return self.saes[0].d_sae


def load_sae_set(specs: Sequence[str], arch=None) -> SAESet:
    """Load SAEs from ``[LAYER=|HOOK=]SOURCE`` entries (:func:`whitebox_eval.sae.sources.resolve_sae`:
    a folder or file, an SAE study's run folder (its ``sae`` folder is read, :mod:`.study`),
    ``hf:ORG/REPO/PATH``, ``saelens:RELEASE/SAE_ID``).

    The hook point is read strictly through :mod:`whitebox_eval.internals.hook_points`: a ``HOOK=``
    prefix (``blocks.5.hook_mlp_out=PATH``), else the files' own hook name (SAELens ``hook_name``,
    Llama Scope ``hook_point_in``, Gemma Scope 2 ``hf_hook_point_in``), else the release's names
    (Gemma Scope ``-res``/``-mlp``/``-att`` and ``layer_N``); an unknown or unserved name is refused
    in one line. Only an SAE that names no hook at all is read at the residual leaving block
    ``LAYER`` (``hook_resid_post``, what ``mui train-sae`` writes). With ``arch`` (the loaded model)
    each SAE's width must be that of its hook (d_model, n_heads x head_dim for ``hook_z``, d_ff).
    """
    from whitebox_eval.internals.hook_points import HookPoint, SAE_POINTS, check_served, parse_hook, point_width
    from whitebox_eval.sae.sources import resolve_sae

    if not specs:
        raise WhiteboxError("give at least one SAE as LAYER=PATH")
    family = None if arch is None else arch.family
    layers, saes, points, paths, sources = [], [], set(), [], []
    for spec in specs:
        prefix, source = split_spec(spec)
        resolved = resolve_sae(source)
        sae = read_sae(resolved.path)
        given = None if prefix is None or prefix.lstrip("-").isdigit() else parse_hook(prefix, family)
        named = sae.metadata.get("hook_name") or resolved.hook_name
        hook = given or (parse_hook(str(named), family) if named else None) or resolved.names_hook
        layer = int(prefix) if prefix is not None and given is None else None
        for candidate in (hook.layer if hook is not None else None, sae.metadata.get("hook_layer")):
            if candidate is not None and layer is not None and int(candidate) != layer:
                raise WhiteboxError(f"SAE spec {spec!r}: layer {layer} given, but the SAE's hook is at layer {candidate}")
            layer = int(candidate) if layer is None and candidate is not None else layer
        if layer is None:
            raise WhiteboxError(f"SAE {source} names no layer (no hook_layer or hook name); give it as LAYER={source}")
        hook = hook or HookPoint("resid", layer, f"blocks.{layer}.hook_resid_post")
        if hook.point not in SAE_POINTS:
            raise WhiteboxError(f"SAE {source} reads {hook.name!r} ({hook.point}), which holds no single vector per "
                                f"token for an SAE; SAEs read {', '.join(SAE_POINTS)}")
        if arch is not None:
            arch.check_layer(layer)
            check_served(hook.point, arch, hook.name)
            width = point_width(arch, hook.point)
            if sae.d_in != width:
                raise WhiteboxError(f"SAE {source} has d_in {sae.d_in}, but {hook.name} of this model is {width} wide "
                                    "(an SAE of another model, or another hook): give the SAE trained on this model's hook")
        points.add(hook.point)
        layers.append(layer)
        saes.append(sae)
        paths.append(str(resolved.path))
        sources.append({**resolved.record(), "hook": HookPoint(hook.point, layer, hook.name).hook_name, "layer": layer})
    if len(points) > 1:
        raise WhiteboxError(f"all SAEs must read the same hook point; these read {', '.join(sorted(points))}")
    if len({s.d_sae for s in saes}) != 1:
        raise WhiteboxError("all SAEs must have the same width (d_sae) for feature MUI")
    if len(set(layers)) != len(layers):
        raise WhiteboxError(f"two SAEs for the same layer: {layers}")
    order = np.argsort(layers)
    return SAESet([layers[i] for i in order], [saes[i] for i in order], points.pop(), [paths[i] for i in order],
                  sources=[sources[i] for i in order])


