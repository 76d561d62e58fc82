"""The benchmark scripts at a micro size on a tiny random model: each runs to its end, so a
change of the API they call cannot break one silently. Each script is run here, run by
another test (named), or listed with the reason it cannot run in a unit test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "faults"))
from cases import build_model_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
TINY, OUT = "{tiny}", "{out}"

#: script -> its arguments at micro size ({tiny}: a tiny model folder, {out}: a scratch folder)
RUNS: dict[str, list[str]] = {
    "edited_generation.py": ["--model", TINY, "--batch", "2", "--new", "4", "--neurons", "2", "--rounds", "1",
                             "--uncached-rounds", "1"],
    "ig_gradients.py": ["--model", TINY, "--samples", "1", "--steps", "1", "--joint-steps", "1"],
    "mcqa_study.py": ["--model", TINY, "--items", "12", "--min-val-items", "4", "--shots", "0",
                      "--out", OUT + "/mcqa_study.json"],
    "mui_scoring.py": ["--model", TINY, "--task", "ssd", "--limit", "4", "--repeats", "1", "--no-memory"],
    "kill_resume.py": ["--model", "tiny", "--limit", "16", "--kills", "1", "--out", OUT + "/kill"],
    "dtype_agreement.py": ["--models", TINY, "--limit", "12"],
}
#: scripts another test runs at a micro size
ELSEWHERE = {"gpu_check.py": "tests/test_gpu_check.py (--tiny)", "gpu_smoke.py": "tests/test_gpu_smoke.py (--cpu steps)"}
#: scripts that need what a unit test does not have
NOT_RUN = {
    "same_numbers.py": "the bundled SmolLM2 on the shared samples (a recording takes minutes per study)",
    "reproduce_timing.py": "a whole `reproduce all` run, or its finished folder",
    "cli_startup.py": "times fresh processes (14 commands x --repeat), no fixed output to check",
    "engine_overhead.py": "the bundled models (timings against their plain forward pass)",
    "data_parallel.py": "torchrun with two ranks",
    "kshot_prefix.py": "the shared MMLU sample and the bundled model",
    "cloze_context.py": "lm-eval run beside ours on the shared samples",
    "lm_eval_chat_template.py": "lm-eval and the bundled SmolLM2's folder",
    "lm_eval_fixtures.py": "lm-eval and the bundled SmolLM2's folder (writes the fixtures)",
    "lm_eval_generation_fixture.py": "lm-eval and the bundled SmolLM2's folder (writes the fixture)",
    "lm_eval_parity.py": "lm-eval and the bundled SmolLM2's folder (writes the fixture)",
    "lm_eval_side_by_side.py": "an lm-eval results file and our runs of the same tasks",
    "lm_eval_whole_files.py": "lm-eval on the shared samples' whole files",
    "fault_table.py": "two checkouts (--before SRC)",
    "saelens_fixture.py": "SAELens (not installed here; writes tests/fixtures/saelens)",
    "sae_training.py": "the bundled model's layer 15 (not yet given a tiny size)",
    "sae_dead_features.py": "the bundled model's layer 15 (not yet given a tiny size)",
    "report_size.py": "the shared MMLU and ARC samples, 1,000 items (no smaller size yet; the report's own tests "
                      "build the same pages on tiny runs)",
    "explorer_screenshots.py": "headless Chromium and chromedriver, clicking through every view (the explorer's "
                               "browser tests drive the same views)",
    "reproduce_commit.py": "writes benchmarks/results/reproduce_quick/ from a finished reproduction (it would "
                           "overwrite the committed quick run)",
}


def test_every_benchmark_is_run_or_listed_with_its_reason():
    scripts = {p.name for p in BENCHMARKS.glob("*.py")}
    listed = set(RUNS) | set(ELSEWHERE) | set(NOT_RUN)
    assert scripts == listed, {"unlisted": sorted(scripts - listed), "gone": sorted(listed - scripts)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_model_dir(tmp_path_factory.mktemp("bench") / "tiny"))


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RUNS))
def test_benchmark_runs_at_micro_size(script, tiny, tmp_path):
    args = [a.replace(TINY, tiny).replace(OUT, str(tmp_path)) for a in RUNS[script]]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "WHITEBOX_EVAL_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
