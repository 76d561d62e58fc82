"""A fine-tuning on GAR tasks with held-out elements, at micro scale on a tiny random model: its check
per format, its folder loading as ``--model`` in ``gar --elements test`` on the check's own test items
(the base model there gives the check's "before" arm), and 002's trained columns resting on it (a
missed target: "manipulation failed"), the truth-heads one also on its own above-chance check."""

from __future__ import annotations

import copy
import json
from importlib import resources

import pytest
import yaml

from whitebox_eval import studies
from whitebox_eval.models.training import weights_file_sha256

TASKS = "GendersOfPersons/same,CountriesOfCities/same×3; GendersOfPersons/same,CountriesOfCities/same×3 [g2c]"
ARGS = ["--task", f"gar:{TASKS}", "--limit", "16", "--lr", "3e-3", "--train-batch-size", "4", "--max-steps", "2",
        "--save-every", "0", "--batch-size", "4"]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained(tiny_smol_folder, tmp_path_factory, finetuned):
    return finetuned(tiny_smol_folder, ARGS, tmp_path_factory.mktemp("gar-ft"), "g")


def _samples(folder):
    return {json.loads(line)["id"]: json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()}


def test_the_check_reads_app_c_per_format_on_the_test_half(trained):
    res = json.loads((trained / "results.json").read_text())
    h = res["headline"]
    for fmt, n in (("generation", 2), ("classification", 2)):
        for arm in ("before", "after"):
            assert h[f"accuracy_{fmt}_n,{arm}"] == n and h[f"accuracy_{fmt}_ci_method,{arm}"] == "wilson"
        assert res["paired_tests"][f"accuracy_{fmt},after_vs_before"]["test"] == "mcnemar_exact"
    assert res["uninformed"] == {"generation": pytest.approx(1 / 3), "classification": 0.5}
    assert res["element_split"]["test"]["sha256"] in json.loads((trained / "splits.json").read_text())["rule"]
    assert res["splits"]["test"]["n"] == 4 and res["splits"]["demos"]["n"] == 0


def test_gar_elements_test_on_the_base_model_is_the_checks_before_arm(trained, tiny_smol_folder, tmp_path, cli):
    before = {r["id"]: r for r in json.loads((trained / "check_before.json").read_text())}
    for model, run_id in ((tiny_smol_folder, "base"), (trained, "used")):
        code, _, err = cli(["gar", "--model", str(model), "--tasks", TASKS, "--elements", "test", "--limit", "2",
                            "--batch-size", "3", "--output", str(tmp_path), "--run-id", run_id])
        assert code == 0, err
    base = _samples(tmp_path / "base")
    assert {f"test:{k}" for k in base} == set(before)
    for k, s in base.items():  # the same items and the same first-token probabilities (another batching)
        assert s["target_prob"] == pytest.approx(before[f"test:{k}"]["target_prob"], abs=1e-5)
    conf = yaml.safe_load((tmp_path / "used" / "config.yaml").read_text())
    assert conf["model_weights"] == {"producer": "g", "sha256": weights_file_sha256(trained)}
    assert conf["elements"] == "test" and "elements" not in yaml.safe_load((trained / "config.yaml").read_text())
    res = json.loads((tmp_path / "used" / "results.json").read_text())
    assert res["element_split"]["elements"] == "test" and res["n_examples"] == 4


def _paper_002_trained_column(tmp_path, target: float):
    """002's evaluate, gar-train and evaluate-trained as the paper file declares them, with the claims on
    evaluate, and the training's generation target set to ``target``."""
    text = resources.files("whitebox_eval.reproduce.papers").joinpath("002_gar.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    doc["paper"], doc["short"] = "996", "gartrained"
    doc["experiments"] = [copy.deepcopy(e) for e in doc["experiments"] if e["id"] in
                          ("evaluate", "gar-train", "evaluate-trained")]
    doc["claims"] = [c for c in doc["claims"] if c["experiment"] == "evaluate"]
    doc.pop("tables", None)
    train = doc["experiments"][1]
    train["manipulation"] = [{**train["manipulation"][0], "min": target}]
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    return path


def test_a_failed_gar_training_makes_002s_trained_claims_uninformative(tiny_smol_folder, tmp_path):
    r = studies.reproduce(str(_paper_002_trained_column(tmp_path, 1.0)), tmp_path / "out",
                          models=[str(tiny_smol_folder)], scale="micro", show_progress=False)
    column = [c for c in r.claims if c["model"].endswith("+ GAR tasks")]
    assert {c["id"] for c in column} == {c["id"] for c in r.claims if c["model"] == str(tiny_smol_folder)}
    for c in column:
        (check,) = [m for m in c["rules"]["manipulation"] if m.get("kind") == "trained"]
        assert check["passed"] is False and "accuracy_generation" in check["text"]
        assert c["verdict"] == "uninformative" and c["qualifier"] == "manipulation failed", c["id"]


def test_the_truth_heads_column_reads_its_own_check_from_its_own_report_examples(tiny_smol_folder, tmp_path):
    """truth-heads-trained as 002 declares it (probes left out: no data here), after gar-train, on a tiny model."""
    text = resources.files("whitebox_eval.reproduce.papers").joinpath("002_gar.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    doc["paper"], doc["short"] = "995", "gartruth"
    doc["experiments"] = [copy.deepcopy(e) for e in doc["experiments"] if e["id"] in
                          ("truth-heads", "gar-train", "truth-heads-trained")]
    for e in doc["experiments"]:
        e.pop("data", None)
        e["settings"].pop("probe_data", None)
    doc["claims"] = [c for c in doc["claims"] if c["experiment"] == "truth-heads" and "probe" not in c["id"]]
    doc.pop("tables", None)
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    r = studies.reproduce(str(path), tmp_path / "out", models=[str(tiny_smol_folder)], scale="micro",
                          show_progress=False)
    children = json.loads((r.folder / "plan.json").read_text())["children"]
    assert [(c["suite"], c.get("label")) for c in children] == [
        ("gar", None), ("finetune", None), ("gar", f"{tiny_smol_folder} + GAR tasks")]
    column = r.folder / "runs" / children[2]["run_id"]
    report = json.loads((column / "results.json").read_text())["split"]["report"]
    right = sum(bool(s["correct"]) for k, s in _samples(column).items() if k in {f"base:{i}" for i in report})
    claims = [c for c in r.claims if c["model"].endswith("+ GAR tasks")]
    assert {c["id"] for c in claims} == {c["id"] for c in doc["claims"]} and any("rules" in c for c in claims)
    for c in claims:
        if "rules" not in c:  # a statistic undefined on this tiny model: a floor, its checks named in its reason
            assert c["verdict"] != "holds" and c["verdict"] != "contradicted", c["id"]
            continue
        (own,) = [m for m in c["rules"]["manipulation"] if m["kind"] == "above_uninformed"]
        assert own["n"] == len(report) and own["k"] == right and f"{right}/{len(report)}" in own["text"], c["id"]
        assert own["passed"] is (own["p_value"] < 0.05) and own["level"] == pytest.approx(0.5)
        assert any(m["kind"] == "trained" for m in c["rules"]["manipulation"])
        if not all(m.get("passed") for m in c["rules"]["manipulation"]):
            assert c["verdict"] == "uninformative" and c["qualifier"] == "manipulation failed", c["id"]
