"""Data-parallel runs over processes: ranks, shards by index, and the rank-0 merge.

Launch a study that shards (``mcqa``, ``gar --mode evaluate``) with
``torchrun --nproc-per-node N -m whitebox_eval ...``. Each rank scores a disjoint shard of the
examples, dealt in batch-sized blocks of consecutive indices so every batch is the
batch a single process would have run; parts land in the shared run folder, each rank
streams its own ``shards/rank<r>.samples.jsonl``, and rank 0 merges them into
``samples.jsonl`` in example order and writes the results. Ranks talk only through
the run folder and a few barriers (gloo, also when the models sit on GPUs), so several
nodes work the same way when they share the run folder's file system.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Sequence, TypeVar

T = TypeVar("T")

#: how long a rank waits for the others at a barrier (a slow pass on another rank)
BARRIER_TIMEOUT = timedelta(hours=6)


@dataclass(frozen=True)
class World:
    """This process's place among the data-parallel ranks (size 1: a plain run)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """Rank 0 writes the merged samples, results, arrays and plots."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def shard(self, indices: Sequence[T], block: int = 1) -> list[T]:
        """This rank's share of ``indices``: blocks of ``block`` consecutive entries
        dealt round-robin (block b goes to rank b mod size). Shards are disjoint and
        together cover ``indices``; with ``block`` = the batch size each batch equals
        the single-process batch."""
        if block < 1:
            raise ValueError(f"block must be >= 1, got {block}")
        return [x for b in range(self.rank * block, len(indices), self.size * block) for x in indices[b:b + block]]

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def broadcast(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank (a picklable object).

        Use it for what every rank must agree on before sharding, e.g. the work already
        done: read independently, a rank that starts late would see parts another rank
        wrote meanwhile and shard a different list, leaving items to nobody."""
        if not self.distributed:
            return value
        import torch.distributed as dist

        box = [value if self.main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def least(self, value: int) -> int:
        """The smallest of every rank's ``value`` (e.g. a batch size each rank found on its own
        GPU: shards are blocks of the batch size, so every rank must use the same one)."""
        if not self.distributed:
            return value
        import torch
        import torch.distributed as dist

        box = torch.tensor([int(value)])
        dist.all_reduce(box, op=dist.ReduceOp.MIN)
        return int(box.item())


def launched_size() -> int:
    """How many ranks the launcher started (``WORLD_SIZE``; 1 without torchrun), read
    without starting a process group."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def world() -> World:
    """The current ranks, read from the launcher's environment (``WORLD_SIZE``, ``RANK``,
    ``LOCAL_RANK``); the process group is started on first use (gloo: the ranks only
    exchange a few small objects, the data goes through the run folder)."""
    if launched_size() <= 1:
        return World()
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=BARRIER_TIMEOUT)
    return World(rank=dist.get_rank(), size=dist.get_world_size(), local_rank=int(os.environ.get("LOCAL_RANK", "0")))
