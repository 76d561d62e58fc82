"""The activations a study keeps per item (``--save-activations``,
:mod:`whitebox_eval.internals.activation_specs`): written through the run's resumable parts,
merged into one safetensors file per spec.

- A pass's scorer hands each batch's tensors to :meth:`ActivationParts.write` *before* it
  returns, so the pass's own part (the record that the batch is done) is written after them:
  a killed run leaves either both or a batch that ``--resume`` recomputes (its activation part
  rewritten atomically, with the same bytes).
- :meth:`ActivationParts.merge` (once the pass is complete) writes
  ``activations/<point>-<positions>.safetensors``: one tensor per item, keyed by the sample's
  id (``str(id)``), ``[layers, positions, width]`` in the capture's dtype (bfloat16 as float32,
  since numpy has none), the spec, layers and model dtype as JSON under the metadata key
  ``whitebox_eval``; it then removes the parts. A resume
  after the merge keeps the file. ``safetensors.numpy.load_file`` reads it with nothing else.
- :func:`estimate` is the size printed before the run: items x layers x positions x width x
  bytes per value (``generated``: the generation budget, an upper bound).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.atomic import AtomicFile, writing
from whitebox_eval.runs.folder import RunFolder

FOLDER = "activations"
META = "whitebox_eval"  # the file's one metadata key: the spec, layers and model dtype as JSON


def _bytes(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    from safetensors.numpy import save

    return save(tensors, metadata=metadata)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def estimate(specs, n_items: int, n_layers: int, widths: dict[str, int], positions: dict[str, float],
             itemsize: int) -> tuple[int, str]:
    """Bytes the files will take and one line saying so: per spec items x layers x positions
    (``positions[kind]``: the mean per item, or the budget) x width x ``itemsize``."""
    total, parts = 0, []
    for s in specs:
        n_l = n_layers if s.layers is None else len(s.layers)
        size = int(round(n_items * n_l * positions[s.positions] * widths[s.point] * itemsize))
        total += size
        parts.append(f"{s.stem} {n_items} x {n_l} x {positions[s.positions]:.4g} x {widths[s.point]} ~ {human(size)}")
    bound = " at most" if any(s.positions == "generated" for s in specs) else ""
    return total, f"--save-activations:{bound} {human(total)} ({'; '.join(parts)})"


class ActivationParts:
    """The parts of one pass's saved activations: ``arrays/parts/activations/<stem>/<first>.safetensors``."""

    def __init__(self, folder: RunFolder, specs, meta: dict[str, dict[str, str]] | None = None):
        self.folder, self.specs = folder, tuple(specs)
        self.meta = meta or {}

    def parts(self, stem: str) -> Path:
        return self.folder.path / "arrays" / "parts" / FOLDER / stem

    def path(self, stem: str) -> Path:
        return self.folder.path / FOLDER / f"{stem}.safetensors"

    def write(self, first: int, tensors: dict[str, dict[str, np.ndarray]]) -> None:
        """One batch's tensors (``{stem: {sample id: array}}``), each stem's part atomically."""
        for stem, by_id in tensors.items():
            where = self.parts(stem)
            with writing(where):
                where.mkdir(parents=True, exist_ok=True)
                data = _bytes({str(k): np.ascontiguousarray(v) for k, v in by_id.items()}, {})
                with AtomicFile(where / f"{first:08d}.safetensors", "wb") as f:
                    f.write(data)

    def wrap(self, score, holder):
        """A pass's ``score`` of a chunk that first empties ``holder.batch`` (the saver's tensors of
        the chunk) and after it writes them into their parts: before the pass writes its own part,
        the record that the chunk is done, so a resumed run never holds a chunk without them."""
        def scored(chunk):
            holder.batch = {}
            out = score(chunk)
            self.write(chunk[0], holder.batch)
            return out
        return scored

    def merge(self, ids, keys: dict[str, list[str]] | None = None) -> dict:
        """Each spec's file from its parts (every id of ``ids`` present; ``keys[stem]``: that
        spec's own keys, e.g. one per generation), the parts removed after; returns results.json's
        ``activations`` entry."""
        from safetensors.numpy import load_file

        out = {}
        for s in self.specs:
            keys_ = (keys or {}).get(s.stem) or [str(i) for i in ids]
            target, parts = self.path(s.stem), self.parts(s.stem)
            if parts.is_dir() or not target.exists():
                # a merge killed while removing its parts left the file: it holds what the removed parts held
                tensors: dict[str, np.ndarray] = load_file(str(target)) if target.exists() else {}
                for part in sorted(parts.glob("*.safetensors")) if parts.is_dir() else ():
                    tensors.update(load_file(str(part)))
                missing = [k for k in keys_ if k not in tensors]
                if missing:
                    raise WhiteboxError(f"{len(missing)} of {len(keys_)} items have no saved activations in {parts} "
                                        f"(e.g. {missing[0]!r}); start a new run (without --resume) to save them")
                meta = {"point": s.point, "hook": s.hook, "positions": s.positions, "spec": s.text,
                        "layers": list(s.layers or ()), **self.meta.get(s.stem, {})}
                # one metadata key: safetensors writes a map's keys in no fixed order, one JSON text keeps the bytes
                data = _bytes({k: tensors[k] for k in keys_}, {META: json.dumps(meta, sort_keys=True)})
                with writing(target.parent):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with AtomicFile(target, "wb") as f:
                        f.write(data)
                shutil.rmtree(parts, ignore_errors=True)
            out[s.stem] = describe(target, s, keys_)
        return out


def describe(path: Path, spec, keys) -> dict:
    """results.json's record of one file: its spec, dtype and the items' shapes."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        meta = json.loads((f.metadata() or {}).get(META, "{}"))
        first = f.get_slice(keys[0])
        dtype = first.get_dtype()
        shapes = [tuple(f.get_slice(k).get_shape()) for k in keys]
    same = all(sh == shapes[0] for sh in shapes)
    layers = meta.get("layers", [])
    entry = {"file": f"{FOLDER}/{path.name}", "spec": spec.text, "point": spec.point, "hook": spec.hook,
             "layers": layers, "positions": spec.positions, "dtype": {"F32": "float32", "F16": "float16",
                                                                        "F64": "float64"}.get(dtype, dtype),
             "tensors": len(keys), "key": "the sample's id", "bytes": path.stat().st_size,
             "item_shape": list(shapes[0]) if same else [shapes[0][0], None, shapes[0][2]],
             "item_shape_axes": ["layer", "position", "width"]}
    if "model_dtype" in meta:
        entry["model_dtype"] = meta["model_dtype"]
    if not same:
        n = [sh[1] for sh in shapes]
        entry["positions_per_item"] = {"min": min(n), "max": max(n), "total": sum(n)}
    return entry
