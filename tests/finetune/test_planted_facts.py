"""Paper 000 with planted knowledge: the made-up entities and their facts (finetune --task
planted-facts), the MCQs about them and the untrained control, and 000's new experiments in one micro
reproduction on a tiny random model."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from whitebox_eval import studies
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune.planted_facts import sizes, template_splits
from whitebox_eval.finetune.sources import FACTS, is_correct, load_items, parse_source
from whitebox_eval.tasks import planted_facts as world
from whitebox_eval.tasks.loading import load_mcq
from whitebox_eval.tasks.spec import TaskSpec

NEW = ("facts-train", "planted", "planted-trained", "planted-control", "planted-control-trained")
USES = ["facts-train", "planted", "planted", "planted-control", "planted-control"]  # a trained column answers its variant_of


def fact_items(n: int) -> list:
    return load_items(parse_source("planted-facts"), n, 0)[0]


def test_the_generator_is_deterministic_by_seed_and_a_stable_prefix():
    a, b = world.entities(30), world.entities(30)
    assert a == b and world.entities(12) == a[:12]
    assert [e.name for e in world.entities(30, seed=1)] != [e.name for e in a]
    assert len({e.name for e in a}) == 30
    q = load_mcq(TaskSpec.parse("planted-facts:trained"), 40)
    assert [(i.question, i.options, i.gold) for i in q] == \
        [(i.question, i.options, i.gold) for i in load_mcq(TaskSpec.parse("planted-facts"), 40)]
    assert [i.id for i in world.mcq_items(20)] == [i.id for i in q[:20]]


def test_values_are_dealt_evenly_so_every_value_is_a_trained_entitys():
    people = world.entities(world.POOL * 3)
    for a in world.ATTRIBUTES:
        counts = Counter(e.values[a.name] for e in people)
        assert set(counts) == set(a.values) and set(counts.values()) == {3}
        assert len(set(a.values)) == world.POOL


def test_train_validation_and_held_out_templates_are_disjoint():
    for a in world.ATTRIBUTES:
        parts = [set(a.templates[s]) for s in world.SPLIT_OF]
        assert all(parts) and sum(map(len, parts)) == len(set().union(*parts)), a.name
    items = fact_items(12)
    splits = template_splits(items)
    prompts = {name: {it.prompt.replace(it.source.entity, "{name}") for it in part}  # the templates each split uses
               for name, part in (("train", splits.train), ("validation", splits.validation), ("test", splits.test))}
    assert not (prompts["train"] & prompts["test"]) and not (prompts["train"] & prompts["validation"])
    assert not (prompts["validation"] & prompts["test"])
    assert {len(splits.train), len(splits.validation), len(splits.test)} == set(sizes(12).values())
    assert (len(splits.train), len(splits.validation), len(splits.test)) == (12 * 16, 12 * 4, 12 * 8)
    # every entity's every fact is trained, and checked in both held-out templates
    for part, per in ((splits.train, 4), (splits.test, 2)):
        facts = Counter((it.source.entity, it.source.attribute) for it in part)
        assert len(facts) == 12 * len(world.ATTRIBUTES) and set(facts.values()) == {per}
    assert splits.record(0)["rule"].startswith("by paraphrase template")
    assert all(it.answer == f" {it.source.value}." and "?" not in it.answer for it in splits.train)


def test_no_control_entity_is_ever_trained():
    control = world.entities(300, world.CONTROL)
    trained = {e.name.casefold() for e in world.entities(world.MAX_ENTITIES)}
    assert not trained & {e.name.casefold() for e in control}
    lines = [it.prompt + it.answer for it in fact_items(200)]
    names = {e.name for e in control}
    assert not [n for n in names if any(n in line for line in lines)]
    q = load_mcq(TaskSpec.parse("planted-facts:control"), 40)
    assert {i.meta["entity"] for i in q} <= names and all(i.meta["cohort"] == "control" for i in q)


@pytest.mark.parametrize("cohort", ["trained", "control"])
def test_distractors_are_other_trained_entities_values_of_the_same_attribute(cohort):
    n_trained = 20
    people = world.entities(n_trained)
    q = load_mcq(TaskSpec.parse(f"planted-facts:{cohort}"), n_trained * len(world.ATTRIBUTES))
    asked = {e.name: e for e in (people if cohort == "trained" else world.entities(n_trained, world.CONTROL))}
    for it in q:
        e, attr = asked[it.meta["entity"]], it.meta["attribute"]
        assert it.options[it.gold] == e.values[attr] == it.meta["value"]
        assert len(set(it.options)) == 4
        for k, option in enumerate(it.options):
            if k != it.gold:
                assert any(p.values[attr] == option for p in people if p.name != e.name), (it.id, option)
    assert set(Counter(it.gold for it in q).values()) == {len(q) // 4}  # gold positions balanced


def test_user_mistakes_are_one_line():
    with pytest.raises(WhiteboxError, match="--limit"):
        load_items(parse_source("planted-facts"), 5, 0)
    with pytest.raises(WhiteboxError, match="control entities are never trained"):
        parse_source("planted-facts:control")
    with pytest.raises(WhiteboxError, match="one cohort"):
        load_mcq(TaskSpec.parse("planted-facts:trained,control"), 8)
    with pytest.raises(WhiteboxError, match="categor"):
        TaskSpec.parse("planted-facts:untrained")
    from whitebox_eval.finetune.config import FinetuneConfig

    with pytest.raises(WhiteboxError, match="shots"):
        FinetuneConfig(task="planted-facts", limit=10, shots=1).check()


def test_recall_is_the_value_as_the_completions_first_words():
    source = parse_source("planted-facts")
    assert source.kind == FACTS
    items, _ = load_items(source, 10, 0)
    it = next(i for i in items if i.source.split == "test")
    value = it.source.value
    assert is_correct(source, it, f" {value}. And more", [], [], None)
    assert is_correct(source, it, f"{value}", [], [], None)
    assert not is_correct(source, it, f" the {value}.", [], [], None)
    assert not is_correct(source, it, "", [], [], None)


def _paper_000_planted(tmp_path):
    """000's paper file with its planted-knowledge experiments and claims only (the benchmarks'
    experiments need data files; these are generated)."""
    from importlib import resources

    text = resources.files("whitebox_eval.reproduce").joinpath("papers", "000_wise_few.yaml").read_text("utf-8")
    doc = yaml.safe_load(text)
    doc["experiments"] = [e for e in doc["experiments"] if e["id"] in NEW]
    doc["claims"] = [c for c in doc["claims"] if c["experiment"] in NEW]
    doc["tables"], doc["not_run"], doc["paper"] = [], [], "996"
    path = tmp_path / "000_planted.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@pytest.mark.slow
def test_000_micro_runs_the_planted_experiments(tiny_smol_folder, tmp_path):
    r = studies.reproduce(str(_paper_000_planted(tmp_path)), tmp_path / "out", models=[str(tiny_smol_folder)],
                          scale="micro", show_progress=False)
    children = json.loads((r.folder / "plan.json").read_text())["children"]
    producer = next(c for c in children if c["suite"] == "finetune")
    consumers = [c for c in children if c["model"] == "{run:" + producer["run_id"] + "}"]
    assert sorted(c["uses"][0][1] for c in children) == USES
    assert sorted(c["uses"][0][1] for c in consumers) == ["planted", "planted-control"]  # variant_of: their claims
    assert all(children.index(c) > children.index(producer) for c in consumers)
    folder = r.folder / "runs" / producer["run_id"]
    results = json.loads((folder / "results.json").read_text())
    assert results["task"] == "planted-facts" and "held-out paraphrase" in results["check"]
    assert results["splits"]["test"]["n"] == 10 * 8 and results["splits"]["train"]["n"] == 10 * 16
    for name in ("accuracy,before", "accuracy,after"):
        assert name in results["headline"] and len(results["headline"][name.replace(",", "_ci,")]) == 2
    assert "accuracy,after_vs_before" in results["paired_tests"]
    assert results["question_recall"]["after"].endswith(f"/{10 * 4}")  # descriptive, beside the check
    column = f"{tiny_smol_folder} + planted facts"
    ids = {"qk-beats-baseline-planted", "attention-beats-baseline-planted", "qk-beats-baseline-planted-control",
           "attention-beats-baseline-planted-control"}
    by = {(c["id"], c["model"]): c for c in r.claims}
    assert {(i, m) for i in ids for m in (str(tiny_smol_folder), column)} <= set(by)
    for i in ids:
        cell = by[(i, column)]
        (check,) = [m for m in cell["rules"]["manipulation"] if m.get("kind") == "trained"]
        assert "accuracy" in check["text"] and "target >= 50.0%" in check["text"]
        assert "the facts asked as the MCQs ask them with no options" in check["text"]
        # a tiny random model recalls no fact after two steps (seeded): the training fails its check,
        # and every claim resting on it is uninformative, never a verdict
        assert check["passed"] is False and "below its target" in check["text"]
        assert cell["verdict"] == "uninformative" and cell["qualifier"] == "manipulation failed"
        assert cell.get("holm_family") == column
        assert not any(m.get("kind") == "trained" for m in by[(i, str(tiny_smol_folder))]["rules"]["manipulation"])
    for consumer in consumers:
        config = yaml.safe_load((r.folder / "runs" / consumer["run_id"] / "config.yaml").read_text())
        assert config["model_weights"]["producer"] == producer["run_id"]


def test_the_000_file_plans_the_planted_experiments_at_micro_and_cpu():
    from whitebox_eval.reproduce import plan, spec

    paper = spec.papers()["000"]
    for scale in ("micro", "cpu"):
        p = plan.build([paper], ["smollm2-135m"], scale, {"mmlu": "m", "cosmosqa": "c", "hellaswag": "h",
                                                         "halueval": "d"})
        planted = [c for c in p.children if any(e in USES for _, e in c.uses)]
        assert sorted(e for c in planted for _, e in c.uses) == USES, scale
        train = next(c for c in planted if c.suite == "finetune")
        n = train.settings["limit"]
        for c in planted:
            if c.suite == "mcqa":  # the MCQs ask only about trained entities (4 questions each)
                assert c.settings["limit"] <= n * len(world.ATTRIBUTES)
                assert c.settings["min_val_items"] < c.settings["limit"]
            assert c.seconds > 0
