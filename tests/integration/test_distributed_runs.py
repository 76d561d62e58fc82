"""torchrun with 2 CPU ranks (gloo) gives the same run folder as one process (MCQA, GAR)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

# several processes on a bundled model: minutes on 2 cores, so `make test-slow` (CI runs it).
# No subprocess timeout: under load a run takes longer, and that must not fail it.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

# torchrun --standalone: a free port for the ranks' rendezvous, not the fixed 29500 another job may hold.
TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]

STUDY = ["mcqa", "--model", "smollm2-135m", "--limit", "20", "--min-val-items", "8", "--batch-size", "4",
         "--methods", "baseline,qk,attention,pa,pride"]


# Each rank pads its own batches (and runs 1 thread against the single process's 2), so the
# float32 kernels see other shapes: a logit moves by ~1e-6 of its size, and a log-likelihood
# summed over a continuation's tokens by ~1e-5 of its size (2.5e-4 on a -16.4 cloze score was
# seen on CI). Relative 1e-4 leaves 10x room; absolute 1e-4 covers values near zero.
TOL = 1e-4


def _results(folder) -> dict:
    """results.json without lm-eval's ``date`` (when each run folder was created)."""
    res = json.loads((folder / "results.json").read_text())
    res.pop("date", None)
    return res


def _close(a, b, path="") -> None:
    """Equal structures; floats equal to ``TOL``."""
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=TOL, abs_tol=TOL), f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def test_two_rank_run_equals_one_process_run(tmp_path):
    # the ranks start on an empty model cache (a fresh machine): both dequantise the GGUF at once
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WHITEBOX_EVAL_CACHE": str(tmp_path / "cache")}
    two = subprocess.run([sys.executable, *TORCHRUN, "-m", "whitebox_eval",
                          *STUDY, "--output", str(tmp_path), "--run-id", "two"],
                         capture_output=True, text=True, env=env)
    assert two.returncode == 0, two.stderr[-3000:]
    one = subprocess.run([sys.executable, "-m", "whitebox_eval", *STUDY, "--output", str(tmp_path), "--run-id", "one"],
                         capture_output=True, text=True, env=env)
    assert one.returncode == 0, one.stderr[-3000:]
    a, b = tmp_path / "one", tmp_path / "two"
    assert "rank 1 of 2" in (b / "run.log").read_text()  # both ranks worked on it
    assert not (b / "shards").exists()  # rank 0 merged the shards away
    _close(_results(a), _results(b))
    sa = [json.loads(line) for line in (a / "samples.jsonl").read_text().splitlines()]
    sb = [json.loads(line) for line in (b / "samples.jsonl").read_text().splitlines()]
    assert [s["id"] for s in sb] == [s["id"] for s in sa]  # merged in example order
    _close(sa, sb)
    for name in ("letter_logits", "qk", "attention"):
        np.testing.assert_allclose(np.load(b / "arrays" / f"{name}.npy"), np.load(a / "arrays" / f"{name}.npy"),
                                   atol=TOL, rtol=TOL, equal_nan=True)
    assert sorted(p.name for p in (b / "plots").iterdir()) == sorted(p.name for p in (a / "plots").iterdir())
    assert "run folder:" in two.stdout and two.stdout.count("run folder:") == 1  # rank 0 alone reports


def test_two_rank_gar_evaluation_equals_one_process(tmp_path):
    # the three truth tasks (sec. 5), 6 examples each: several blocks of 4 for 2 ranks to share
    study = ["gar", "--model", "smollm2-135m", "--tasks", "truth", "--limit", "6", "--batch-size", "4"]
    runs = {}
    for name, launch in (("one", []), ("two", TORCHRUN)):
        cmd = [sys.executable, *launch, "-m", "whitebox_eval", *study, "--output", str(tmp_path), "--run-id", name]
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = done
    a, b = tmp_path / "one", tmp_path / "two"
    assert "rank 1 of 2" in (b / "run.log").read_text()
    _close(_results(a), _results(b))
    sa = {s["id"]: s for s in map(json.loads, (a / "samples.jsonl").read_text().splitlines())}
    sb = {s["id"]: s for s in map(json.loads, (b / "samples.jsonl").read_text().splitlines())}
    assert len(sa) >= 18 and sa.keys() == sb.keys()  # 3 tasks x 6 examples (+ sub-problems)
    _close(sa, sb)
    assert runs["two"].stdout.count("run folder:") == 1


def test_two_rank_cloze_only_run_equals_one_process(tmp_path):
    """A cloze-only study (lm-eval's HellaSwag prompt) streams samples from the cloze pass on every rank."""
    rows = [{"ind": i, "activity_label": "Cooking", "ctx_a": f"A cook adds {i} eggs to a bowl.", "ctx_b": "she",
             "endings": ["whisks them.", "paints the wall.", f"sings {i} songs.", "drives away."], "label": "0"}
            for i in range(10)]
    data = tmp_path / "hellaswag_val.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    study = ["mcqa", "--model", "smollm2-135m", "--task", f"hellaswag={data}", "--prompt", "lm-eval", "--batch-size", "4"]
    for name, launch in (("one", []), ("two", TORCHRUN)):
        done = subprocess.run([sys.executable, *launch, "-m", "whitebox_eval", *study, "--output", str(tmp_path),
                               "--run-id", name], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    a, b = tmp_path / "one", tmp_path / "two"
    assert "rank 1 of 2" in (b / "run.log").read_text() and not (b / "shards").exists()
    _close(_results(a), _results(b))
    sa = [json.loads(line) for line in (a / "samples.jsonl").read_text().splitlines()]
    sb = [json.loads(line) for line in (b / "samples.jsonl").read_text().splitlines()]
    assert [s["id"] for s in sb] == [s["id"] for s in sa] == [f"hellaswag/{i}" for i in range(10)]
    _close(sa, sb)
