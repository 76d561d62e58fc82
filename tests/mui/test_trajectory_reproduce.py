"""Paper 001's trajectory as its paper file declares it (arith-train keeping checkpoints, then
mui-trajectory on its run folder by reference, the claim trajectory-accumulating), in one micro
reproduction on a tiny random model: the claim on the trained column gets a verdict, or
"uninformative (manipulation failed)" when the training missed its check."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))

from tiny_models import tiny_folder  # noqa: E402
from whitebox_eval import studies  # noqa: E402

IDS = ("arith-train", "mui-trajectory")


def _paper(name: str) -> dict:
    papers = Path(studies.__file__).parent / "reproduce" / "papers"
    return yaml.safe_load(next(papers.glob(f"{name}_*.yaml")).read_text(encoding="utf-8"))


def test_001_and_004_declare_one_training_keeping_its_checkpoints():
    ours = next(e for e in _paper("001")["experiments"] if e["id"] == "arith-train")
    theirs = next(e for e in _paper("004")["experiments"] if e["id"] == "arith-train")
    ours, theirs = copy.deepcopy(ours), copy.deepcopy(theirs)
    assert ours["settings"]["keep_checkpoints"] == 6
    ours.pop("differs"), theirs.pop("differs")
    assert ours == theirs  # one training: the same child (run id) in both papers


def test_the_trajectory_claim_gets_a_verdict_at_micro_scale(tmp_path):
    doc = _paper("001")
    doc.update(paper="996", short="trajectory", experiments=[e for e in doc["experiments"] if e["id"] in IDS],
               claims=[c for c in doc["claims"] if c["id"] == "trajectory-accumulating"], tables=[], not_run=[])
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    model = tiny_folder("llama", tmp_path / "tiny")
    r = studies.reproduce(str(path), tmp_path / "out", models=[str(model)], scale="micro", show_progress=False)
    children = json.loads((r.folder / "plan.json").read_text())["children"]
    assert [(c["suite"], c.get("mode")) for c in children] == [("finetune", None), ("mui", "trajectory")]
    producer, consumer = children
    assert consumer["model"] == "{run:" + producer["run_id"] + "}"
    traj = json.loads((r.folder / "runs" / consumer["run_id"] / "results.json").read_text())
    assert traj["order"][0] == "step-000000" and len(traj["order"]) >= 3  # before training and along it
    (column,) = [c for c in r.claims if c["model"].endswith("+ arithmetic")]
    (check,) = [m for m in column["rules"]["manipulation"] if m.get("kind") == "trained"]
    if check["passed"] is False:  # before the trend's own floor (too few checkpoints answering anything right)
        assert column["verdict"] == "uninformative" and column["qualifier"] == "manipulation failed"
        assert "p_correct" in column["reason"]
    else:  # the training took: the trend's verdict, or its floor
        assert column["verdict"] in ("holds", "contradicted", "not shown at this n", "uninformative")
    (base,) = [c for c in r.claims if c["model"] == str(model)]
    assert base["verdict"] == "not run"  # the trajectory runs on the trained column only
