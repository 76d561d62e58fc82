"""A paper's experiment on a trained model: a finetune producer, then a formats consumer that loads the
producer's run folder by reference (``model: "{run.ID}"``), one micro reproduction on a tiny random model."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from whitebox_eval import studies
from whitebox_eval.errors import WhiteboxError

FORMATS = {"task": "arithmetic:add2,sub2", "shots": 1, "n_samples": 2, "max_new_tokens": 4, "n_bins": 2,
           "batch_size": 4, "temperature": 1.0}
ARMS = {"a": {"label": "free P(correct)", "samples": "p_correct.free", "answers": "free", "gold": "answer"},
        "b": {"label": "MCQ P(correct)", "samples": "p_correct.mcq", "answers": "options", "options": 4, "gold": "gold"}}
PAPER = {
    "paper": "997", "short": "trained", "title": "A paper asked of a trained model", "seed": "none.txt",
    "experiments": [
        {"id": "arithmetic", "suite": "formats", "settings": FORMATS, "scales": {"micro": {"limit": 4}}},
        {"id": "arith-train", "suite": "finetune",
         "settings": {"task": "arithmetic-text:add2,sub2", "learning_rate": 3e-3, "train_batch_size": 4,
                      "save_every": 0, "shots": 1, "check_samples": 2, "max_new_tokens": 4},
         "manipulation": [{"kind": "trained", "key": "p_correct", "min": 0.0, "label": "training check"}],
         "scales": {"micro": {"limit": 16, "max_steps": 2}}},
        {"id": "arithmetic-trained", "suite": "formats", "model": "{run.arith-train}", "label": "arithmetic",
         "variant_of": "arithmetic", "settings": FORMATS, "scales": {"micro": {"limit": 4}},
         "differs": "the model is trained on arithmetic text first"},
    ],
    "claims": [{"id": "free-beats-mcq", "claim": "Free generation beats MCQ", "cite": "sec. 1",
                "experiment": "arithmetic", "stat": {"paired": "free_vs_mcq"}, "direction": "greater",
                "published": {"text": "more"}, "arms": ARMS}],
}


def _write(tmp_path, doc, name="paper.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_a_consumer_loads_its_producer_by_reference(tiny_smol_folder, tmp_path):
    r = studies.reproduce(str(_write(tmp_path, PAPER)), tmp_path / "out", models=[str(tiny_smol_folder)],
                          scale="micro", show_progress=False)
    children = json.loads((r.folder / "plan.json").read_text())["children"]
    assert [c["suite"] for c in children] == ["formats", "finetune", "formats"]
    producer, consumer = children[1], children[2]
    assert consumer["model"] == "{run:" + producer["run_id"] + "}"
    assert consumer["label"] == f"{tiny_smol_folder} + arithmetic"
    assert consumer["uses"] == [["997", "arithmetic"]]
    config = yaml.safe_load((r.folder / "runs" / consumer["run_id"] / "config.yaml").read_text())
    trained = json.loads((r.folder / "runs" / producer["run_id"] / "trained.json").read_text())
    assert config["model_weights"] == {"producer": producer["run_id"], "sha256": trained["sha256"]}
    by_model = {c["model"]: c for c in r.claims}
    assert set(by_model) == {str(tiny_smol_folder), f"{tiny_smol_folder} + arithmetic"}
    base, column = by_model[str(tiny_smol_folder)], by_model[f"{tiny_smol_folder} + arithmetic"]
    assert not any(m.get("kind") == "trained" for m in base["rules"]["manipulation"])
    (check,) = [m for m in column["rules"]["manipulation"] if m.get("kind") == "trained"]
    assert "p_correct" in check["text"] and check["passed"] in (True, False)
    assert any(c.get("p_value") is not None for c in (base, column))
    for c in (base, column):  # Holm's family is one paper x one model variant: one claim each here
        if c.get("p_value") is not None:
            assert c["p_holm"] == pytest.approx(c["p_value"], rel=1e-12)
    if not check["passed"]:  # a tiny random model rarely learns in two steps: the claim rests on it
        assert column["verdict"].startswith("uninformative") and column.get("qualifier") == "manipulation failed"


def test_a_failed_training_makes_the_claim_uninformative(tiny_smol_folder, tmp_path):
    doc = copy.deepcopy(PAPER)
    doc["experiments"][1]["manipulation"] = [{"kind": "trained", "key": "p_correct", "min": 1.0}]  # out of reach
    r = studies.reproduce(str(_write(tmp_path, doc)), tmp_path / "out", models=[str(tiny_smol_folder)],
                          scale="micro", show_progress=False)
    (column,) = [c for c in r.claims if c["model"].endswith("+ arithmetic")]
    (check,) = [m for m in column["rules"]["manipulation"] if m.get("kind") == "trained"]
    assert check["passed"] is False and "below its target" in check["text"]
    assert column["verdict"] == "uninformative" and column["qualifier"] == "manipulation failed"


def test_the_same_training_in_two_papers_runs_once(tiny_smol_folder, tmp_path):
    from whitebox_eval.reproduce import plan, spec

    other = copy.deepcopy(PAPER)
    other.update(paper="996", short="trained-again")
    papers = spec.resolve([str(_write(tmp_path, PAPER)), str(_write(tmp_path, other, "other.yaml"))])
    p = plan.build(papers, [str(tiny_smol_folder)], "micro", {})
    assert [c.suite for c in p.children] == ["formats", "finetune", "formats"]
    assert [c.uses for c in p.children][1:] == [[("997", "arith-train"), ("996", "arith-train")],
                                               [("997", "arithmetic"), ("996", "arithmetic")]]


@pytest.mark.parametrize("change, message", [
    ({"model": "{run.arithmetic}"}, "declares its check"),
    ({"label": None}, "needs a label"),
    ({"variant_of": "arith-train"}, "same suite"),
    ({"manipulation": [{"kind": "above_uninformed", "applies_to": "free_vs_mcq"}]}, "apply to every claim"),
])
def test_a_trained_column_is_declared_whole(tmp_path, change, message):
    from whitebox_eval.reproduce import spec

    doc = copy.deepcopy(PAPER)
    doc["experiments"][2].update(change)
    doc["experiments"][2] = {k: v for k, v in doc["experiments"][2].items() if v is not None}
    with pytest.raises(WhiteboxError, match=message):
        spec.paper_file(_write(tmp_path, doc))


def _check_results(before, after):
    from whitebox_eval import stats

    head: dict = {}
    stats.add_mean(head, "p_correct,before", before)
    stats.add_mean(head, "p_correct,after", after)
    results = {"headline": head}
    stats.add_paired(results, "p_correct,after_vs_before", stats.paired_bootstrap(after, before))
    return results


@pytest.mark.parametrize("after, floor, passed, says", [
    ([0.6] * 30, 0.3, True, "target >= 30.0%"),
    ([0.6] * 30, 0.9, False, "below its target"),
    ([0.1] * 30, 0.0, False, "not significantly up"),
])
def test_the_training_check_needs_a_significant_rise_to_its_target(after, floor, passed, says):
    from whitebox_eval.reproduce.trained import reached

    out = reached({"kind": "trained", "key": "p_correct", "min": floor}, _check_results([0.1] * 30, after))
    assert out["passed"] is passed and says in out["text"]
    assert out["before"] == pytest.approx(0.1) and out["after"] == pytest.approx(after[0])


def test_a_consumer_waits_for_its_producer():
    from whitebox_eval.reproduce.assemble import Outcome
    from whitebox_eval.reproduce.children import _unready_producer
    from whitebox_eval.reproduce.plan import Child, run_ref

    producer = Child("finetune-x-1", "finetune", "study", "x", {})
    consumer = Child("formats-x-2", "formats", None, run_ref(producer.run_id), {}, label="x + arithmetic")
    assert _unready_producer(Child("formats-x-3", "formats", None, "x", {}), {}) is None
    assert "did not finish (out of memory)" in _unready_producer(
        consumer, {producer.run_id: Outcome(producer, "failed", "out of memory")})
    assert _unready_producer(consumer, {producer.run_id: Outcome(producer, "done", folder="f")}) is None
