"""One resumable pass: the loop every study of every suite runs its batches through.

A pass scores items ``0..n-1`` (sample ids ``ids``) in batches. Each finished batch is
one *part*, ``arrays/parts/<pass>/<first index:08d>.npz``, written atomically: the
batch's arrays, its indices and its sample lines. The part is the record that a batch
is done, so

- a resumed pass computes exactly the batches without a readable part (an unreadable
  part is set aside as ``*.npz.unreadable``, noted in ``run.log``, and recomputed);
- sample lines are appended to ``samples.jsonl`` after the part (an id already there is
  not appended again), and lines missing from ``samples.jsonl`` at the end of the pass
  (a file cut short) are restored from the parts, in item order;
- under torchrun each rank takes blocks of ``batch_size`` consecutive items round-robin
  (so every batch equals the one-process batch) and rank 0 merges the ranks' samples;
- ``order`` (a permutation of the items, e.g. longest first so a batch holds items of
  about one length) only says which items go into a batch together: parts hold their
  items' indices, arrays come back in item order, and at the end of the pass its sample
  lines are put in item order.

Every write goes through :func:`whitebox_eval.runs.atomic.writing`, so a full disk ends in
one line naming the run folder, and ``--resume`` continues from the last finished part.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.atomic import write_atomic
from whitebox_eval.runs.folder import RunFolder
from whitebox_eval.runs.samples_file import sample_line
from whitebox_eval.runs.parts import read_parts, write_part
from whitebox_eval.runs.pass_plan import plan_of
from whitebox_eval.runs.progress import note, progress

SAMPLES_KEY = "_samples"  # the batch's sample lines inside a part
INDEX_KEY = "index"

Records = list[Mapping[str, Any]] | None
Score = Callable[[list[int]], tuple[Records, Mapping[str, np.ndarray]]]


def parts_dir(folder: RunFolder, name: str) -> Path:
    """Where pass ``name`` keeps its parts."""
    return folder.path / "arrays" / "parts" / name


def run_pass(folder: RunFolder, name: str, ids: Sequence[str | int], batch_size: int, score: Score, *,
             world=None, desc: str | None = None, show_progress: bool | None = None,
             dtype: Any = np.float32, require_all: bool = True, collect: bool = True,
             order: Sequence[int] | None = None) -> dict[str, np.ndarray] | None:
    """Run ``score`` over the batches of pass ``name`` that have no part yet; return its arrays.

    ``score(indices)`` gets a batch of item indices and returns ``(records, arrays)``:
    one sample dict per index whose ``"id"`` is ``ids[i]`` (written as given, key order
    included), or None for a pass without samples; and arrays whose first dimension is
    ``len(indices)``. The result maps each array name to ``[len(ids), ...]`` in item
    order (``dtype``); a row no part holds raises, or is NaN with ``require_all=False``.
    With ``collect=False`` (arrays that are not one row per item, e.g. ragged key sets)
    nothing is returned: read the parts with :func:`iter_parts`. ``order``: the items in the
    order they are batched (default: item order).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise WhiteboxError(f"batch size must be a positive integer, got {batch_size!r}")
    ids = list(ids)
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise WhiteboxError(f"example id {dup!r} appears twice; example ids must be unique "
                            "(check the dataset for duplicate ids)")
    parts = parts_dir(folder, name)
    main = world is None or world.main
    if order is not None and sorted(order) != list(range(len(ids))):
        raise ValueError(f"pass {name}: order must be a permutation of the {len(ids)} items")
    todo = _pending(folder, parts, order if order is not None else range(len(ids)), batch_size, world)
    done_samples = folder.done_ids()
    batches = range(0, len(todo), batch_size)
    plan = plan_of(folder)
    label = plan.label(name) if plan is not None else None
    if label is not None and main:
        note(plan.begin(name, len(todo)), show_progress)
    for start in progress(batches, total=len(batches), desc=f"{label} {desc or name}" if label else desc or name,
                          enabled=show_progress, after=plan.after if label else None):
        chunk = todo[start:start + batch_size]
        records, arrays = score(chunk)
        lines = None
        if records is not None:
            if len(records) != len(chunk):
                raise ValueError(f"pass {name}: {len(records)} records for a batch of {len(chunk)}")
            for i, r in zip(chunk, records):
                if r.get("id") != ids[i]:
                    raise ValueError(f"pass {name}: record id {r.get('id')!r} is not the item's id {ids[i]!r}")
            lines = [sample_line(r) for r in records]
        extra = {SAMPLES_KEY: _pack(lines)} if lines is not None else {}
        write_part(parts / f"{chunk[0]:08d}.npz", **{INDEX_KEY: np.array(chunk, dtype=np.int64)},
                   **{k: np.asarray(v) for k, v in arrays.items()}, **extra)
        if lines is not None:
            new = [line for i, line in zip(chunk, lines) if ids[i] not in done_samples]
            folder.append_lines(new)
            done_samples.update(ids[i] for i in chunk)
    if label is not None:
        plan.end(name)
    if world is not None:
        world.barrier()  # every rank's parts and samples are on disk before anyone reads them
    if main:  # a rank's view reads and rewrites the merged samples.jsonl too
        folder.merge_shards(ids)
        restore_samples(folder, name, ids)
        if order is not None:  # lines were appended in batch order
            wanted = set(ids)
            present = [s["id"] for s in folder.read_samples() if s["id"] in wanted]
            written = set(present)
            if present != [i for i in ids if i in written]:
                _rewrite_in_item_order(folder, ids, {})
    if world is not None:
        world.barrier()
    if not collect:
        return None
    return read_pass(folder, name, len(ids), dtype=dtype, require_all=require_all)


def iter_parts(folder: RunFolder, name: str):
    """Every readable part of pass ``name`` as a dict (``index``: the batch's item indices)."""
    for _, z in read_parts(parts_dir(folder, name), set_aside=False):
        yield z


def _pending(folder: RunFolder, parts: Path, order: Sequence[int], batch_size: int, world) -> list[int]:
    """This rank's share of the items without a readable part, in ``order``, in blocks of ``batch_size``.
    Rank 0 reads the parts and broadcasts: read independently, a late rank would see
    parts another has just written."""
    main = world is None or world.main
    parts.mkdir(parents=True, exist_ok=True)
    done: set[int] = set()
    if main:
        for _, z in read_parts(parts, folder.log, set_aside=True):
            done.update(int(i) for i in z[INDEX_KEY])
    if world is None:
        return [i for i in order if i not in done]
    done = world.broadcast(done)
    return world.shard([i for i in order if i not in done], block=batch_size)


def read_pass(folder: RunFolder, name: str, n: int, *, dtype: Any = np.float32,
              require_all: bool = True) -> dict[str, np.ndarray]:
    """The arrays of pass ``name`` as ``[n, ...]`` in item order, read from its parts."""
    parts = parts_dir(folder, name)
    out: dict[str, np.ndarray] = {}
    filled = np.zeros(n, dtype=bool)
    for _, z in read_parts(parts, set_aside=False):
        rows = np.asarray(z[INDEX_KEY], dtype=np.int64)
        keep = rows < n
        filled[rows[keep]] = True
        for key, value in z.items():
            if key in (INDEX_KEY, SAMPLES_KEY):
                continue
            if key not in out:
                out[key] = np.full((n, *value.shape[1:]), np.nan, dtype=dtype)
            out[key][rows[keep]] = value[keep]
    if require_all and not filled.all():
        missing = int((~filled).sum())
        raise WhiteboxError(
            f"{missing} of {n} items have no scores in {parts}: under torchrun on several nodes every node "
            "must write to the same run folder (a shared file system); copy the other nodes' arrays/parts "
            "and shards here and rerun the same command with --resume to finish")
    return out


def restore_samples(folder: RunFolder, name: str, ids: Sequence[str | int]) -> int:
    """Put back the sample lines of pass ``name`` that ``samples.jsonl`` lacks (a file cut
    short, or lost lines), from the lines its parts carry; returns how many.

    The pass's lines go, in item order, where its first line stood (at the end if none
    is left); other passes' lines keep their order. A part written without sample lines
    cannot restore them: then the run says so in one line.
    """
    have = folder.done_ids()
    missing = [i for i in ids if i not in have]
    if not missing:
        return 0
    lines: dict[str | int, str] = {}
    for _, z in read_parts(parts_dir(folder, name), set_aside=False):
        if SAMPLES_KEY not in z:
            continue
        for line in _unpack(z[SAMPLES_KEY]):
            lines[json.loads(line)["id"]] = line
    if not any(i in lines for i in missing):
        return 0  # a pass that writes no samples
    lost = [i for i in missing if i not in lines]
    if lost:
        raise WhiteboxError(
            f"{folder.samples_path} lacks {len(lost)} samples of pass {name!r} (e.g. {lost[0]!r}) and its parts do "
            "not carry them (written by an older version); start a new run (without --resume) to rebuild them")
    restored = _rewrite_in_item_order(folder, ids, lines)
    folder.log(f"pass {name}: restored {restored} sample lines missing from samples.jsonl from the parts")
    return restored


def _rewrite_in_item_order(folder: RunFolder, ids: Sequence[str | int], lines: Mapping[str | int, str]) -> int:
    """samples.jsonl with the lines of ``ids`` (those present, then ``lines`` for the missing
    ones) in item order where the first of them stood; returns how many came from ``lines``."""
    wanted = set(ids)
    existing = [(s["id"], sample_line(s)) for s in folder.read_samples()]
    own = [i for i, _ in existing if i in wanted]
    at = next((k for k, (i, _) in enumerate(existing) if i in wanted), len(existing))
    before = [line for i, line in existing[:at] if i not in wanted]
    after = [line for i, line in existing[at:] if i not in wanted]
    present = {i: line for i, line in existing if i in wanted}
    mine = [present.get(i) or lines[i] for i in ids if i in present or i in lines]
    write_atomic(folder.samples_path, "".join(before + mine + after))
    folder.forget_done()
    return len(mine) - len(own)


def _pack(lines: Sequence[str]) -> np.ndarray:
    """Sample lines as UTF-8 bytes (each line ends in a newline; JSON escapes the ones inside)."""
    return np.frombuffer("".join(lines).encode("utf-8"), dtype=np.uint8)


def _unpack(data: np.ndarray) -> list[str]:
    text = data.tobytes().decode("utf-8")
    return [line + "\n" for line in text.split("\n")[:-1]]
