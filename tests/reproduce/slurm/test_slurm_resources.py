"""What a child's job asks for (reproduce/costs.py), the run-folder lock, and
``--status`` on a folder with no reproduction; no job runs here."""

from __future__ import annotations

import math

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import costs as resources
from whitebox_eval.reproduce.launch import jobs
from whitebox_eval.reproduce.children import producers
from whitebox_eval.reproduce.plan import Child, Plan, run_ref


def _child(suite, model, settings=None, mode=None, gpu_seconds=600.0):
    return Child("r", suite, mode, model, settings or {}, items=10, seconds=100.0, gpu_seconds=gpu_seconds)


def test_gpus_memory_and_time_follow_the_model_and_the_estimate():
    big = resources.size(_child("mcqa", "meta-llama/Llama-2-70b-hf"), time_factor=3)
    params = big.params
    assert 68e9 < params < 70e9  # Llama-2-70B's shapes in model_configs.yaml
    assert big.gpus == math.ceil(params * 2 * 1.25 / 1e9 / resources.GPU_USABLE_GB) == 3 and big.tasks == 1
    assert big.mem_gb == 16 + math.ceil(params * 2 / 1e9 * 1.5)
    assert big.minutes == math.ceil(600 * 3 / 60) + resources.MARGIN_MINUTES
    assert resources.size(_child("mcqa", "meta-llama/Llama-2-7b-hf"), 3).gpus == 1
    trained = resources.size(_child("contamination", "meta-llama/Meta-Llama-3-8B-Instruct"), 3)
    assert trained.trains and trained.gpus == math.ceil(trained.params * 16 / 1e9 / resources.GPU_USABLE_GB) == 2
    span = resources.size(_child("span", "meta-llama/Llama-3.2-1B-Instruct", {"finetune_examples": 0}), 3)
    assert not span.trains  # span trains only when it has examples to fine-tune on
    long = resources.size(_child("mcqa", "meta-llama/Llama-2-7b-hf", gpu_seconds=5 * 3600), 3)
    assert long.tasks == long.gpus == 3  # sharded over data-parallel tasks, its time divided among them
    assert long.minutes == math.ceil(5 * 3600 / 3 * 3 / 60) + resources.MARGIN_MINUTES
    unknown = resources.size(_child("mcqa", "no/such-model", gpu_seconds=None), 2)
    assert unknown.params is None and unknown.gpus == 1 and unknown.minutes == math.ceil(100 * 2 / 60) + 15


def test_producers_are_run_references_in_settings_and_model():
    a, b = Child("a", "mcqa", None, "m", {}), Child("b", "mcqa", None, "m", {})
    c = Child("c", "mui", None, run_ref("b"), {"sae": [{"path": run_ref("a") + "/sae"}], "x": "{run:zz}"})
    plan = Plan([], ["m"], "micro", {}, [a, b, c])
    assert producers(c, plan) == ["a", "b"] and producers(a, plan) == []


def test_a_run_folder_is_written_by_one_job_at_a_time(tmp_path):
    with jobs.run_lock(tmp_path, "child", "1234"):
        with pytest.raises(WhiteboxError, match=r"being written by job 1234 .*leaves it to that one"):
            with jobs.run_lock(tmp_path, "child", "5678"):
                pass
    with jobs.run_lock(tmp_path, "child", "5678"):  # released when the holder ends
        assert (tmp_path / "child.lock").read_text().startswith("5678 ")


def test_status_of_a_folder_with_no_reproduction_is_one_line(cli, tmp_path):
    code, _, err = cli(["reproduce", "--status", str(tmp_path)])
    assert code == 2 and "holds no reproduction (plan.json missing)" in err
