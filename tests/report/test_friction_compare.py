"""``compare`` names a run without samples.jsonl, prints exact
p-values and writes them unrounded with ``--json``; ``runs`` shows what a run ran under.

The McNemar reference is scipy's two-sided binomial test on the discordant counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from scipy.stats import binomtest

from whitebox_eval import stats
from whitebox_eval.cli import cli
from whitebox_eval.report.command import compare
from whitebox_eval.runs import RunFolder, list_runs

# 7 items right only in B, 1 right only in A, 12 agreeing: p = binom(1; 8, 0.5) * 2 = 0.0703125
A = [0] * 7 + [1] + [1] * 6 + [0] * 6
B = [1] * 7 + [0] + [1] * 6 + [0] * 6


def _run(root, run_id, right, extra=None, samples=True):
    folder = RunFolder.create(root, {"suite": "mcqa", "model": "m", "task": "ssd", **(extra or {})}, run_id=run_id)
    if samples:
        folder.append_samples([{"id": f"q{i}", "acc,baseline": float(r), "score": 0.1 * i + r}
                               for i, r in enumerate(right)])
    head: dict = {}
    stats.add_proportion(head, "acc,baseline", [float(r) for r in right])
    folder.save_results({"headline": head})
    return folder


def test_a_run_without_samples_is_named_not_said_to_share_no_id(tmp_path):
    a = _run(tmp_path, "base", A)
    b = _run(tmp_path, "nosamples", B, samples=False)
    out = CliRunner().invoke(compare, [str(a.path), str(b.path)])
    assert out.exit_code == 0, out.output
    assert "B (nosamples) has no samples.jsonl" in out.output
    assert "share no item id" not in out.output
    # the first run lacking them is named too, in the table and the JSON
    out = CliRunner().invoke(compare, [str(b.path), str(a.path), "--json"])
    data = json.loads(out.output)
    assert data["paired"] == [{"a": "A", "b": "B", "error": data["paired"][0]["error"]}]
    assert "A (nosamples) has no samples.jsonl" in data["paired"][0]["error"]


def test_an_empty_samples_file_is_named(tmp_path):
    a = _run(tmp_path, "base", A)
    b = _run(tmp_path, "empty", B, samples=False)
    (b.path / "samples.jsonl").write_text("")
    out = CliRunner().invoke(compare, [str(a.path), str(b.path)])
    assert "B (empty) has an empty samples.jsonl" in out.output


def test_json_holds_exact_p_values_and_the_flips(tmp_path):
    a = _run(tmp_path, "base", A)
    b = _run(tmp_path, "edited", B)
    out = CliRunner().invoke(compare, [str(a.path), str(b.path), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert [i["label"] for i in data["inputs"]] == ["A", "B"] and data["inputs"][1]["run_id"] == "edited"
    acc = next(m for m in data["paired"][0]["metrics"] if m["metric"] == "acc,baseline")
    reference = binomtest(1, 8, 0.5).pvalue
    assert acc["p_value"] == pytest.approx(reference, rel=1e-12) and acc["p_value"] == 0.0703125
    assert (acc["b"], acc["c"], acc["n"]) == (7, 1, 20)
    assert acc["gained"] == [f"q{i}" for i in range(7)] and acc["lost"] == ["q7"]
    assert acc["diff"] == pytest.approx(6 / 20, abs=1e-15)
    score = next(m for m in data["paired"][0]["metrics"] if m["metric"] == "score")
    assert score["test"] == "paired_bootstrap" and "gained" not in score
    row = next(r for r in data["rows"] if r["metric"] == "acc,baseline")
    assert row["values"]["A"]["value"] == pytest.approx(sum(A) / 20)
    assert row["values"]["B"]["interval"]["n"] == 20
    # the table shows the same p to six significant digits, not rounded to two or three
    table = CliRunner().invoke(compare, [str(a.path), str(b.path)]).output
    line = next(x for x in table.splitlines() if x.strip().startswith("acc,baseline") and "McNemar" in x)
    assert "0.0703125" in line


def test_runs_listing_tells_an_edited_or_adapted_run_from_its_twin(tmp_path):
    _run(tmp_path, "plain", A, {"created": "2026-01-01T00:00:00"})
    _run(tmp_path, "ablated", A, {"created": "2026-01-01T00:00:01", "edits": ["zero:mlp.14:n=3"]})
    _run(tmp_path, "adapted", A, {"created": "2026-01-01T00:00:02", "model_load": {
        "adapter": {"path": "/x/y/lora-7", "mode": "keep", "sha256": "0" * 64},
        "model_args": {"revision": "v2", "torch_dtype": "float16"}, "model_commit": "abcdef0123456789"}})
    by_id = {r.id: r.variant for r in list_runs(tmp_path)}
    assert by_id["plain"] == []
    assert by_id["ablated"] == ["edit zero:mlp.14:n=3"]
    assert by_id["adapted"] == ["adapter lora-7 (keep)", "revision v2", "commit abcdef012345", "torch_dtype=float16"]
    out = CliRunner().invoke(cli, ["runs", "--output", str(tmp_path)])
    assert out.exit_code == 0, out.output
    lines = {line.split()[0]: line for line in out.output.splitlines()}
    assert "[edit zero:mlp.14:n=3]" in lines["ablated"] and "[" not in lines["plain"].split("n=")[1]
    assert "adapter lora-7 (keep); revision v2" in lines["adapted"]


def test_json_beside_an_lm_eval_file_holds_its_rows_and_no_pairing(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from test_compare_lm_eval import REAL, _lm_eval_output, _run as lm_run

    ours = lm_run(tmp_path / "runs", "hs", "hellaswag=/data/hellaswag/validation.jsonl",
                  {"acc,cloze": [1] * 8 + [0] * 22}, prompt="lm-eval")
    out = _lm_eval_output(tmp_path)
    got = CliRunner().invoke(compare, [str(ours.path), str(out), "--json"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    assert data["inputs"][1]["path"].endswith(REAL.name) and "run_id" not in data["inputs"][1]
    row = next(r for r in data["rows"] if (r["task"], r["metric"]) == ("hellaswag", "acc,cloze"))
    lm_value = json.loads(REAL.read_text())["results"]["hellaswag"]["acc,none"]
    assert row["values"]["B"]["value"] == lm_value and row["values"]["A"]["value"] == pytest.approx(8 / 30)
    assert data["paired"] == [] and any("normal-approx" in n for n in data["notes"])
