"""Every suite on the one resumable pass: a torn part, a cut samples.jsonl and a disk that
really fills up each lose at most the batch in flight, and ``--resume`` then gives the same
results.json, samples.jsonl and arrays as an uninterrupted run.

The disk-full cases mount a small tmpfs (root only; skipped with the reason otherwise),
let the run fill it, then grow it ("free space") and resume.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

pytestmark = pytest.mark.slow

SUITES = {
    "mcqa": ["mcqa", "--model", "{d}/tiny", "--limit", "8", "--min-val-items", "2", "--batch-size", "4",
             "--methods", "baseline,qk,pride,pa"],
    "formats": ["formats", "--model", "{d}/tiny", "--limit", "4", "--shots", "1", "--n-samples", "2",
                "--max-new-tokens", "3", "--n-bins", "2", "--batch-size", "2"],
    "gar": ["gar", "--model", "{d}/tiny_smol", "--tasks", "generation", "--limit", "2", "--batch-size", "4"],
    "mui": ["mui", "--model", "{d}/tiny", "--task", "arithmetic-gen", "--limit", "4", "--max-new-tokens", "3",
            "--batch-size", "2"],
    "masking": ["mui", "masking", "--model", "{d}/tiny", "--source-task", "arithmetic-gen", "--eval-task", "ssd",
                "--ks", "1", "--limit", "4", "--random-draws", "1", "--max-new-tokens", "3", "--no-generate",
                "--batch-size", "2"],
    "span": ["span", "--model", "{d}/tiny", "--task", "string_reversal", "--split", "id", "--limit", "4",
             "--batch-size", "2"],
}


def _args(suite: str, d: Path, out: Path, run_id: str, *extra: str) -> list[str]:
    return [a.replace("{d}", str(d)) for a in SUITES[suite]] + ["--output", str(out), "--run-id", run_id, *extra]


def _results(folder: Path) -> bytes:
    """results.json without the lines that name when or where the run was made."""
    lines = (folder / "results.json").read_bytes().splitlines(keepends=True)
    return b"".join(line for line in lines
                    if not line.lstrip().startswith((b'"date": ', b'"start_time"', b'"end_time"', b'"git_hash"')))


def assert_same_run(a: Path, b: Path) -> None:
    assert _results(a) == _results(b)
    assert (a / "samples.jsonl").read_bytes() == (b / "samples.jsonl").read_bytes()
    arrays = sorted(p.name for p in (a / "arrays").glob("*.npy"))
    assert arrays == sorted(p.name for p in (b / "arrays").glob("*.npy"))
    for name in arrays:
        assert (a / "arrays" / name).read_bytes() == (b / "arrays" / name).read_bytes(), name


@pytest.fixture(scope="module")
def smol_fixtures(fixtures) -> Path:
    """The fixtures plus ``tiny_smol``: GAR needs a tokenizer with word-initial tokens."""
    from cases import build_smollm2_vocab_model_dir

    from whitebox_eval.errors import WhiteboxError

    if not (fixtures / "tiny_smol").is_dir():
        try:
            build_smollm2_vocab_model_dir(fixtures / "tiny_smol")
        except WhiteboxError as e:
            pytest.skip(f"the bundled smollm2-135m is needed for its tokenizer: {e}")
    return fixtures


@pytest.fixture
def model_dir(request, fixtures):
    """The fixture folder a suite's command reads (GAR's tiny model is built on demand)."""
    suite = request.node.callspec.params["suite"]
    return request.getfixturevalue("smol_fixtures") if suite == "gar" else fixtures


@pytest.fixture(scope="module")
def wholes(fixtures, tmp_path_factory):
    """One uninterrupted run per suite, made on demand."""
    from whitebox_eval.cli import main

    out, made = tmp_path_factory.mktemp("whole"), {}

    def get(suite: str) -> Path:
        if suite not in made:
            main(_args(suite, fixtures, out, suite))
            made[suite] = out / suite
        return made[suite]

    return get


@pytest.mark.parametrize("suite", list(SUITES))
def test_torn_part_is_recomputed(suite, model_dir, wholes, cli, tmp_path):
    fixtures = model_dir
    whole = wholes(suite)
    run = tmp_path / suite
    shutil.copytree(whole, run)
    parts = sorted((run / "arrays" / "parts").rglob("*.npz"))
    assert parts, "every suite keeps its batches as parts"
    torn = parts[len(parts) // 2]
    torn.write_bytes(torn.read_bytes()[:40])
    (run / "results.json").unlink()
    code, out, err = cli(_args(suite, fixtures, tmp_path, suite, "--resume"))
    assert code == 0, err
    assert "unreadable" in (run / "run.log").read_text()
    assert_same_run(whole, run)


@pytest.mark.parametrize("suite", ["mcqa", "gar", "span"])
def test_cut_samples_file_is_rebuilt_on_resume(suite, model_dir, wholes, cli, tmp_path):
    fixtures = model_dir
    whole = wholes(suite)
    run = tmp_path / suite
    shutil.copytree(whole, run)
    data = (run / "samples.jsonl").read_bytes()
    cut = data.index(b"\n", len(data) // 3) + 5  # inside a line: a half-written tail as well
    (run / "samples.jsonl").write_bytes(data[:cut])
    code, out, err = cli(_args(suite, fixtures, tmp_path, suite, "--resume"))
    assert code == 0, err
    assert_same_run(whole, run)


def _mount_tmpfs(where: Path, size: int) -> str | None:
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    return None if proc.returncode == 0 else (proc.stderr.strip() or "mount failed")


def _du(path: Path) -> int:
    return sum(-(-p.stat().st_size // 4096) * 4096 for p in path.rglob("*") if p.is_file())


@pytest.mark.parametrize("suite", list(SUITES))
def test_real_full_disk_ends_in_one_line_and_resumes(suite, model_dir, wholes, cli, tmp_path):
    fixtures = model_dir
    whole = wholes(suite)
    mnt = tmp_path / "small"
    why = _mount_tmpfs(mnt, max(8192, _du(whole) // 2))
    if why:
        pytest.skip(f"cannot mount a small tmpfs here ({why}); the simulated faults cover this")
    try:
        code, out, err = cli(_args(suite, fixtures, mnt, suite))
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert code == 2, err[-2000:]
        assert len(lines) == 1 and "disk is full" in lines[0] and "--resume" in lines[0], err[-2000:]
        assert "Traceback" not in err
        assert (mnt / suite / "config.yaml").is_file(), "the run had started before the disk filled"
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
        code, out, err = cli(_args(suite, fixtures, mnt, suite, "--resume"))
        assert code == 0, err[-2000:]
        assert_same_run(whole, mnt / suite)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
