"""Every paper's reproduction end to end at micro scale on tiny random models, and a
reproduction killed with -9 then resumed gives a byte-identical claims.json."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
from cases import build_fixtures, build_smollm2_vocab_model_dir  # noqa: E402

from whitebox_eval import studies  # noqa: E402
from whitebox_eval.reproduce import CLAIMS_FILE, HTML_FILE, MARKDOWN_FILE, verdicts  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_fixtures(tmp_path_factory.mktemp("papers")) / "tiny")


def _check(r, paper: str) -> None:
    assert (r.folder / MARKDOWN_FILE).is_file() and (r.folder / HTML_FILE).is_file()
    (p,) = r.content["papers"]
    assert p["number"] == paper and p["tables"] and p["claims"] and p["runs"]
    assert all(run["status"] == "done" for run in p["runs"]), p["runs"]
    assert all(c["verdict"] in verdicts.VERDICTS for c in p["claims"])
    tested = [c for c in p["claims"] if c["verdict"] not in (verdicts.NOT_RUN, verdicts.NOT_TESTED)]
    assert tested, [(c["id"], c.get("reason")) for c in p["claims"]]
    for c in tested:
        if c["verdict"] == verdicts.UNINFORMATIVE:
            assert c["reason"]  # names the failed precondition or the explaining control
        if "statistic" in c or c["verdict"] != verdicts.UNINFORMATIVE:  # a group too small has none
            assert c["statistic"]["test"] and c["statistic"]["n"] is not None
        assert all("passed" in x or "error" in x for x in c.get("preconditions", ()))
    # every tested cell recomputes from its per-item evidence alone (benchmarks/recompute_claims.py)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import recompute_claims

    ck = recompute_claims.recompute(r.folder)
    assert not ck.bad, ck.bad
    assert not ck.from_counts and not ck.unrecomputed, (dict(ck.from_counts), dict(ck.unrecomputed))


@pytest.mark.slow
@pytest.mark.parametrize("paper", ["000", "001", "003"])
def test_paper_end_to_end_on_a_tiny_model(paper, tiny, tmp_path, shared_datasets):
    r = studies.reproduce(paper, tmp_path, models=[tiny], scale="micro", data_root=str(shared_datasets),
                          show_progress=False)
    _check(r, paper)


@pytest.mark.slow
@pytest.mark.integration
def test_gar_end_to_end_on_a_tiny_model_with_smollm2s_tokenizer(tmp_path, shared_datasets):
    smol = build_smollm2_vocab_model_dir(tmp_path / "smol")  # GAR needs word-initial tokens
    r = studies.reproduce("002", tmp_path, models=[str(smol)], scale="micro", data_root=str(shared_datasets),
                          show_progress=False)
    _check(r, "002")


def _command(tiny: str, data: Path, out: Path, run_id: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "whitebox_eval", "reproduce", "004", "--scale", "micro", "--model", tiny,
            "--data-root", str(data), "--output", str(out), "--run-id", run_id, *extra]


@pytest.mark.slow
def test_kill_9_then_resume_gives_the_same_claims_json(tiny, tmp_path, shared_datasets):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "WHITEBOX_PROGRESS": "off"}
    clean = subprocess.run(_command(tiny, shared_datasets, tmp_path / "clean", "r"), env=env,
                           capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
    out = tmp_path / "killed"
    proc = subprocess.Popen(_command(tiny, shared_datasets, out, "r"), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    runs = out / "r" / "runs"
    killed = False
    while proc.poll() is None:  # no deadline: under load the children take longer, and the run ends anyway
        started = [d for d in runs.iterdir() if (d / "config.yaml").is_file()] if runs.is_dir() else []
        finished = [d for d in started if (d / "results.json").is_file()]
        if len(finished) == 1 and len(started) == 2:  # the second child is under way
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.02)
    proc.wait()
    assert killed, "the reproduction ended before it could be killed"
    assert not (out / "r" / CLAIMS_FILE).exists()
    resumed = subprocess.run(_command(tiny, shared_datasets, out, "r", "--resume"), env=env,
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "r" / CLAIMS_FILE).read_bytes() == (tmp_path / "clean" / "r" / CLAIMS_FILE).read_bytes()
    assert (out / "r" / MARKDOWN_FILE).read_bytes() == (tmp_path / "clean" / "r" / MARKDOWN_FILE).read_bytes()
