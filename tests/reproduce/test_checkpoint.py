"""``benchmarks/reproduce_checkpoint.py``: a reproduction's finished children saved into the
repository and restored on another machine give the same claims, with nothing rerun."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests"), str(ROOT / "tests" / "faults")]
from benchmark_data import write_datasets  # noqa: E402
from cases import build_model_dir  # noqa: E402
from reproduce_checkpoint import compare, restore, save  # noqa: E402

from whitebox_eval import studies  # noqa: E402


def _claims(content: dict) -> list:
    return [(p["number"], c["id"], c["model"], c["verdict"], c.get("statistic"), c.get("p_value"))
            for p in content["papers"] for c in p["claims"]]


def test_saved_children_restore_to_the_same_claims(tmp_path):
    tiny = str(build_model_dir(tmp_path / "tiny"))
    data = str(write_datasets(tmp_path / "data"))
    first = studies.reproduce("003", tmp_path / "a", models=[tiny], scale="micro", data_root=data, show_progress=False)
    plan = json.loads((first.folder / "plan.json").read_text(encoding="utf-8"))
    state = save(first.folder, tmp_path / "saved")
    assert set(state) == {c["run_id"] for c in plan["children"]}
    assert all(s == "saved" or s.startswith("not run") for s in state.values()), state
    again = tmp_path / "saved2"
    save(first.folder, again)  # an unchanged child saves the same bytes
    for f in sorted((tmp_path / "saved").rglob("*")):
        if f.is_file():  # progress.md's restore command names where it was saved
            twin = (again / f.relative_to(tmp_path / "saved")).read_bytes()
            assert f.read_bytes() == twin.replace(b"saved2", b"saved"), f
    text = "".join(f.read_text(encoding="utf-8") for f in (tmp_path / "saved").rglob("*") if f.suffix in (".json", ".yaml"))
    assert str(tmp_path) not in text  # no path of this machine
    assert restore(tmp_path / "saved", tmp_path / "b") == sum(s == "saved" for s in state.values())
    # the other machine: nothing runs (reuse only), every child comes from the checkpoint
    second = studies.reproduce("003", tmp_path / "b", models=[tiny], scale="micro", data_root=data,
                               show_progress=False, reuse_only=True)
    assert _claims(second.content) == _claims(first.content)
    log = (second.folder / "reproduction.log").read_text(encoding="utf-8")
    assert "reused from checkpoint" in log
    # beside the committed twins (the first reproduction as reproduce_commit.py commits it): identical in
    # every value; one value changed is named with both values
    import subprocess

    committed = tmp_path / "committed"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reproduce_commit.py"), str(first.folder), "--dest",
                    str(committed), "--md", str(tmp_path / "r.md"), "--page", str(tmp_path / "page.md")],
                   check=True, capture_output=True)
    rows = compare(tmp_path / "saved", committed / "runs")
    saved = [r for r in rows[2:] if r.startswith("| ")]
    assert saved and all(r.split(" | ")[1] == r.split(" | ")[2] and r.endswith("| 0 | 0 |") for r in saved), rows
    child = next(p for p in (committed / "runs").iterdir() if (p / "results.json").is_file())
    results = json.loads((child / "results.json").read_text(encoding="utf-8"))
    key = next(k for k, v in results.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
    text = next(k for k, v in results.items() if isinstance(v, str))
    results[key] = results[key] * (1 + 1e-7) + 1e-9  # float rounding
    before, results[text] = results[text], "changed"
    (child / "results.json").write_text(json.dumps(results), encoding="utf-8")
    row = next(r for r in compare(tmp_path / "saved", committed / "runs") if child.name in r)
    assert "| 1 (largest relative gap " in row and f"| 1: `/{text}` \"changed\" -> {json.dumps(before)}" in row, row


def test_a_child_that_feeds_one_still_to_run_is_kept_back(tmp_path, monkeypatch):
    """A finished child named by ``{run:...}`` in a child not finished waits: its files are not carried."""
    from whitebox_eval.runs import RunFolder

    folder = tmp_path / "repro"
    (folder / "runs").mkdir(parents=True)
    plan = {"scale": "micro", "data": {}, "models": [], "papers": [], "children": [
        {"run_id": "sae-x", "suite": "sae", "mode": None, "model": "m", "settings": {}, "skip": None, "items": 1, "uses": []},
        {"run_id": "mui-y", "suite": "mui", "mode": None, "model": "m", "settings": {"sae": ["{run:sae-x}"]},
         "skip": None, "items": 1, "uses": []},
    ]}
    (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    run = RunFolder.create(folder / "runs", {"suite": "sae", "model": "m"}, run_id="sae-x")
    (run.path / "results.json").write_text("{}", encoding="utf-8")
    import reproduce_checkpoint

    monkeypatch.setattr(reproduce_checkpoint, "_estimated", lambda child: 1.0)  # made-up children: no estimate
    state = save(folder, tmp_path / "saved")
    assert state == {"sae-x": "kept back: its folder feeds mui-y, still to run", "mui-y": "to run"}
    assert not (tmp_path / "saved" / "runs" / "sae-x").exists()
    plan["children"][1]["skip"] = "it is scored by running the model's code"  # never run: nothing to wait for
    (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    state = save(folder, tmp_path / "saved")
    assert state["sae-x"] == "saved" and state["mui-y"].startswith("not run")
    # a call that allowed code execution ran the skipped child beside this folder: it is saved, and the
    # command to go on allows it too
    plan["children"][1]["skip"] = "it is scored by running the model's code: give --allow-code-execution to run it"
    (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    other = RunFolder.create(tmp_path / "other" / "runs", {"suite": "mui", "model": "m"}, run_id="mui-y")
    (other.path / "results.json").write_text("{}", encoding="utf-8")
    shutil.move(str(tmp_path / "other"), str(tmp_path / "repro-code"))  # a sibling reproduction folder
    (folder.parent / "repro-code" / "plan.json").write_text("{}", encoding="utf-8")
    state = save(folder, tmp_path / "saved")
    assert state == {"sae-x": "saved", "mui-y": "saved"} and (tmp_path / "saved" / "runs" / "mui-y" / "results.json").is_file()
    assert "--allow-code-execution" in (tmp_path / "saved" / "progress.md").read_text(encoding="utf-8")


def test_progress_restores_from_where_the_children_were_saved(tmp_path):
    """progress.md's restore command names ``--dest`` unless the children are in the default place
    (a quick re-run saved to reproduce_quick_progress restored the cpu children without it)."""
    from reproduce_checkpoint import DEST, ROOT, progress

    plan = {"scale": "quick", "papers": ["003"], "models": ["m"], "children": []}
    assert "restore OUTPUT\n" in progress(plan, {}, DEST) and "restore OUTPUT\n" in progress(plan, {})
    inside = ROOT / "benchmarks" / "results" / "reproduce_quick_progress"
    assert "restore OUTPUT --dest benchmarks/results/reproduce_quick_progress\n" in progress(plan, {}, inside)
    assert f"restore OUTPUT --dest {(tmp_path / 'saved').resolve().as_posix()}\n" in progress(plan, {}, tmp_path / "saved")
