"""Data-parallel bookkeeping: shards by index and the rank-0 merge of samples."""

from __future__ import annotations

import json

import pytest

from whitebox_eval.runs import RunFolder
from whitebox_eval.runs.distributed import World, world


@pytest.mark.parametrize("size", [1, 2, 3])
@pytest.mark.parametrize("block", [1, 4, 8])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 33])
def test_shards_are_disjoint_cover_and_keep_single_process_batches(size, block, n):
    indices = [10 * i for i in range(n)]
    shards = [World(rank=r, size=size).shard(indices, block=block) for r in range(size)]
    flat = [x for s in shards for x in s]
    assert sorted(flat) == indices and len(flat) == len(set(flat))
    single = [indices[i:i + block] for i in range(0, n, block)]
    per_rank = [s[i:i + block] for s in shards for i in range(0, len(s), block)]
    assert sorted(per_rank) == sorted(single)  # every rank batch is a batch the single process runs


def test_single_process_world_without_launcher(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    w = world()
    assert (w.rank, w.size, w.main, w.distributed) == (0, 1, True, False)
    assert w.broadcast("x") == "x"
    w.barrier()  # a no-op without a process group


def test_shard_rejects_empty_blocks():
    with pytest.raises(ValueError):
        World(rank=0, size=2).shard([1, 2], block=0)


def test_rank_shards_merge_into_samples_in_example_order(tmp_path):
    run = RunFolder.create(tmp_path, {"suite": "t", "model": "m"}, run_id="dp")
    order = [f"x{i}" for i in range(6)]
    ranks = [run.for_rank(r) for r in range(2)]
    ranks[1].append_samples([{"id": "x2", "v": 2}, {"id": "x3", "v": 3}])
    ranks[0].append_samples([{"id": "x0", "v": 0}, {"id": "x1", "v": 1}])
    ranks[0].append_samples([{"id": "x4", "v": 4}])
    assert not run.samples_path.exists()  # ranks never touch the merged file
    assert run.done_ids() == {"x0", "x1", "x2", "x3", "x4"}  # resume sees every rank's work
    with pytest.raises(Exception, match="appears twice"):
        ranks[0].append_samples([{"id": "x3", "v": 9}])  # another rank already has it
    assert ranks[0].merge_shards(order) == 5
    assert [s["id"] for s in run.read_samples()] == order[:5]
    assert not (run.path / "shards").exists()
    ranks[0].annotate_samples({"x2": {"split": "test"}})  # rank 0 annotates the merged file
    merged = [json.loads(line) for line in run.samples_path.read_text().splitlines()]
    assert merged[2] == {"id": "x2", "v": 2, "split": "test"}
    assert ranks[0].merge_shards(order) == 0  # nothing left to merge


def test_merge_keeps_samples_of_an_earlier_single_process_part(tmp_path):
    run = RunFolder.create(tmp_path, {"suite": "t"}, run_id="dp")
    run.append_samples([{"id": 3}])  # e.g. an interrupted 1-process run, resumed with 2 ranks
    run.for_rank(1).append_samples([{"id": 1}])
    run.for_rank(0).append_samples([{"id": 0}, {"id": 2}])
    run.merge_shards([0, 1, 2, 3])
    assert [s["id"] for s in run.read_samples()] == [0, 1, 2, 3]


def test_a_torn_shard_line_is_dropped_before_the_rank_appends_again(tmp_path):
    run = RunFolder.create(tmp_path, {"suite": "t"}, run_id="dp")
    r1 = run.for_rank(1)
    r1.append_samples([{"id": 1}])
    with open(r1.append_path, "a") as f:
        f.write('{"id": 2, "v"')  # killed mid-write
    again = RunFolder.open(run.path).for_rank(1)
    assert again.done_ids() == {1}
    again.append_samples([{"id": 2}])
    run.merge_shards([1, 2])
    assert [s["id"] for s in run.read_samples()] == [1, 2]


def test_commands_that_do_not_shard_refuse_to_run_under_torchrun(monkeypatch, capsys):
    from whitebox_eval.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit) as e:
        main(["span", "--limit", "1"])
    assert e.value.code == 2
    assert "'span' does not share its work among torchrun ranks" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["gar", "--mode", "truth-heads", "--limit", "2"])
    assert e.value.code == 2
    assert "gar --mode truth-heads does not share its work" in capsys.readouterr().err


def _least_on_rank(rank: int, store: str, values: list[int], out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=len(values))
    try:
        found = World(rank=rank, size=len(values)).least(values[rank])
        with open(f"{out}.{rank}", "w", encoding="ascii") as f:
            f.write(str(found))
    finally:
        dist.destroy_process_group()


def test_least_is_the_smallest_value_of_any_rank(tmp_path):
    """``--batch-size auto`` under torchrun: each rank's own size, the smallest taken by all."""
    import torch.multiprocessing as mp

    values = [7, 3]
    mp.spawn(_least_on_rank, args=(str(tmp_path / "store"), values, str(tmp_path / "out")), nprocs=2)
    assert [int((tmp_path / f"out.{r}").read_text()) for r in range(2)] == [3, 3]
    assert World().least(9) == 9  # one process: its own value
