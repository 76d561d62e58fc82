"""benchmarks/reproduce_commit.py copies a reproduction with no absolute path of the machine left:
data paths relative to the data root, the cache root as <cache>/, any other absolute path refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import reproduce_commit as rc  # noqa: E402


def test_data_and_cache_paths_become_relative_and_others_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "datasets"
    folder = tmp_path / "repro"
    folder.mkdir()
    (folder / "plan.json").write_text(json.dumps({"data": {"gsm8k": str(data / "gsm8k" / "test.jsonl"),
                                                           "mmlu": str(data / "mmlu" / "test")}}))
    roots = rc.path_roots(folder, None)
    src = tmp_path / "config.yaml"
    src.write_text(f"task: gsm8k={data}/gsm8k/test.jsonl\nsae: {tmp_path}/cache/sae/m-L1\n")
    rc.copy_relative(src, tmp_path / "out.yaml", roots)
    assert (tmp_path / "out.yaml").read_text() == "task: gsm8k=gsm8k/test.jsonl\nsae: <cache>/sae/m-L1\n"
    src.write_text("file: /home/someone/elsewhere.csv\n")
    with pytest.raises(SystemExit, match="/home/someone/elsewhere.csv"):
        rc.copy_relative(src, tmp_path / "out.yaml", roots)
    # a child reused from a reproduction folder beside this one (the same --output): runs/<child>, as here
    (tmp_path / "earlier" / "runs").mkdir(parents=True)
    src.write_text(f"sae: {tmp_path}/earlier/runs/sae-m-run-1/sae\n")
    rc.copy_relative(src, tmp_path / "out.yaml", rc.path_roots(folder, None))
    assert (tmp_path / "out.yaml").read_text() == "sae: runs/sae-m-run-1/sae\n"


def test_changes_counts_the_verdicts_that_moved_per_paper_and_how():
    from reproduce_commit import changes

    def claims(*cells):
        papers = {}
        for paper, cid, model, verdict, qualifier in cells:
            papers.setdefault(paper, []).append({"id": cid, "model": model, "verdict": verdict, "qualifier": qualifier})
        return {"papers": [{"number": k, "claims": v} for k, v in papers.items()]}

    before = claims(("002", "gen", "m", "holds", None), ("002", "swap", "m", "holds", None),
                    ("004", "free", "m", "contradicted", None))
    after = claims(("002", "gen", "m", "uninformative", "at chance"), ("002", "swap", "m", "holds", None),
                   ("004", "free", "m", "uninformative", "at chance"), ("004", "new", "m", "not shown at this n", None))
    assert changes(before, after).splitlines() == [
        "2 of 3 cells both hold changed verdict: 002: 1, 004: 1",
        "  002: holds -> uninformative (at chance) x1",
        "  004: contradicted -> uninformative (at chance) x1",
        "1 new cells: 004: 1"]
