"""Where a model goes under torchrun and device maps (GPU counts simulated: no GPU needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from accelerate.hooks import AlignDevicesHook, add_hook_to_module

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_loaded  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.models import loading, placement  # noqa: E402


@pytest.fixture
def gpus(monkeypatch):
    def see(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
    return see


def test_each_torchrun_rank_gets_its_own_gpu_or_a_clear_error(gpus, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    gpus(2)
    assert placement.rank_device("cuda") == "cuda:1"
    assert placement.rank_device("auto") == "cuda:1"
    assert placement.rank_device("cuda:0") == "cuda:0"  # an explicit GPU stays
    gpus(1)  # CUDA_VISIBLE_DEVICES set per rank: the one GPU it sees is cuda:0
    assert placement.rank_device("cuda") == "cuda:0"
    monkeypatch.setenv("LOCAL_RANK", "3")
    gpus(2)
    with pytest.raises(WhiteboxError, match=r"local rank 3 has no GPU of its own: this process sees 2 GPUs.*CUDA_VISIBLE_DEVICES"):
        placement.rank_device("cuda")


def test_a_device_map_is_refused_under_torchrun(monkeypatch):
    monkeypatch.setattr(placement, "PLACEMENT", placement.Placement())
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(WhiteboxError, match="--device-map is not for torchrun"):
        placement.set_placement("cpu", "auto")
    with pytest.raises(WhiteboxError, match="--device-map is not for torchrun"):
        loading.load_model("/nonexistent/model", device_map="auto")  # before anything is read
    placement.set_placement("cpu")  # torchrun without a map is the data-parallel run
    monkeypatch.setenv("WORLD_SIZE", "1")
    placement.set_placement("cpu", "auto")  # one process may split a model


def test_offloaded_map_entries_compute_on_the_maps_gpu():
    # accelerate's dispatch_model runs "cpu"/"disk" entries on the main device: the first GPU of the map
    placed = {"model.embed_tokens": "cpu", "model.layers.0": 0, "model.layers.1": 1, "lm_head": "disk"}
    assert placement.execution_device("cpu", placed) == torch.device("cuda", 0)
    assert placement.execution_device("disk", placed) == torch.device("cuda", 0)
    assert placement.execution_device("cpu", {"a": "cpu", "b": "disk"}) == torch.device("cpu")
    assert placement.execution_device(1, placed) == torch.device("cuda", 1)


def test_inputs_go_where_accelerates_hook_on_the_embedding_computes():
    lm = tiny_loaded("llama")
    lm.model.hf_device_map = {"model.embed_tokens": "cpu", "model.layers": "cpu", "model.norm": "cpu", "lm_head": "cpu"}
    assert lm.device == torch.device("cpu")
    add_hook_to_module(lm.arch.embed, AlignDevicesHook(execution_device="meta", io_same_device=False))
    assert lm.device == torch.device("meta")  # the hook, not the map's "cpu", says where it computes


def test_config_yaml_records_device_gpu_map_and_sdpa_backends(tmp_path, gpus, monkeypatch):
    from whitebox_eval.runs.folder import RunFolder
    from whitebox_eval.runs.provenance import read_config

    monkeypatch.setattr(placement, "PLACEMENT", placement.Placement())
    run = RunFolder.create(tmp_path, {"suite": "mcqa", "model": "m"}, run_id="cpu")
    assert read_config(run.path)["placement"] == {"device": "cpu", "device_map": None, "gpu": None, "sdpa_backends": None}
    gpus(2)  # a (simulated) GPU machine, torchrun rank 1
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: f"Simulated GPU {torch.device(d).index}")
    for flag, on in (("flash", False), ("mem_efficient", True), ("cudnn", False), ("math", True)):
        monkeypatch.setattr(torch.backends.cuda, f"{flag}_sdp_enabled", lambda on=on: on)
    assert placement.record() == {"device": "cuda:1", "device_map": None, "gpu": "Simulated GPU 1",
                                  "sdpa_backends": ["efficient", "math"]}
    monkeypatch.delenv("LOCAL_RANK")  # plain "cuda": the current device, by its number
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    placement.set_placement("cuda")
    assert placement.record()["device"] == "cuda:0"
