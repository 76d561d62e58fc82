"""Where demonstrations come from for every loader: a train/dev split found beside the
evaluated file, ``--demos-from``, or the held-out pool; never an evaluated item."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from whitebox_eval.tasks.registry import record  # noqa: E402
from whitebox_eval.tasks.spec import TaskSpec  # noqa: E402
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import load_mcq_dataset
from whitebox_eval.tasks.hub import HubPath
from whitebox_eval.tasks.demos import (
    DEV_SOURCE, FILE_SOURCE, POOL_SOURCE, SPLIT_SOURCE, demo_source, plan_demonstrations, sibling_split)


def _arc_ai2(path: Path, n: int, tag: str) -> Path:
    """AI2's ARC jsonl with globally unique ids."""
    rows = [{"id": f"{tag}_{i}", "answerKey": "ABCD"[i % 4],
             "question": {"stem": f"{tag} question {i}?", "choices": [{"label": l, "text": f"{tag} {l}{i}"} for l in "ABCD"]}}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _arc_foundry(path: Path, n: int, tag: str) -> Path:
    """llm-foundry's ARC jsonl: no id, so the loader's ids are line numbers (they collide across files)."""
    rows = [{"query": f"Question: {tag} question {i}?\nAnswer:", "choices": [f"{tag} {l}{i}" for l in "ABCD"], "gold": i % 4}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _hellaswag(path: Path, n: int, tag: str) -> Path:
    rows = [{"ind": f"{tag}{i}", "ctx": f"{tag} context {i}", "endings": [f"{tag} end {j}.{i}" for j in range(4)],
             "label": i % 4, "activity_label": "x"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _cosmosqa(path: Path, n: int, tag: str) -> Path:
    lines = ["id,context,question,answer0,answer1,answer2,answer3,label"]
    lines += [f"{tag}{i},{tag} context {i},{tag} question {i}?,{tag} a{i},{tag} b{i},{tag} c{i},{tag} d{i},{i % 4}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _check_apart(demos, evaluated) -> None:
    """The property the issue asks for: no demonstration is ever an evaluated item."""
    ids = set(demos.ids())
    assert ids and not ids & {it.id for it in evaluated}
    shown = {(d.question, tuple(d.options)) for d in (demos.shared or [x for ds in demos.by_subject.values() for x in ds])}
    assert not shown & {(it.question, tuple(it.options)) for it in evaluated}


def test_split_siblings_follow_each_datasets_naming(tmp_path):
    arc = tmp_path / "ARC-V1-Feb2018" / "ARC-Challenge"
    arc.mkdir(parents=True)
    test = _arc_ai2(arc / "ARC-Challenge-Test.jsonl", 4, "test")
    assert sibling_split(record("arc"), Path(test)) is None  # no train or dev file yet
    _arc_ai2(arc / "ARC-Challenge-Dev.jsonl", 4, "dev")
    assert sibling_split(record("arc"), Path(test)) == ("dev", arc / "ARC-Challenge-Dev.jsonl")
    _arc_ai2(arc / "ARC-Challenge-Train.jsonl", 4, "train")
    assert sibling_split(record("arc"), Path(test)) == ("train", arc / "ARC-Challenge-Train.jsonl")  # train first, as lm-eval
    hs = tmp_path / "hs"
    hs.mkdir()
    val = _hellaswag(hs / "hellaswag_val.jsonl", 3, "v")
    _hellaswag(hs / "hellaswag_train.jsonl", 3, "t")
    assert sibling_split(record("hellaswag"), Path(val)) == ("train", hs / "hellaswag_train.jsonl")
    cq = tmp_path / "cosmosqa"
    cq.mkdir()
    valid = _cosmosqa(cq / "valid.csv", 3, "v")
    _cosmosqa(cq / "train.csv", 3, "t")
    assert sibling_split(record("cosmosqa"), Path(valid)) == ("train", cq / "train.csv")
    for split in ("test", "train"):  # sibling folders, same file name
        (tmp_path / "f" / split).mkdir(parents=True)
        _arc_foundry(tmp_path / "f" / split / "arc.jsonl", 3, split)
    assert sibling_split(record("arc"), Path(tmp_path / "f" / "test" / "arc.jsonl")) == ("train", tmp_path / "f" / "train" / "arc.jsonl")
    # words inside other words are not split names; a file without a split word has no sibling
    plain = _arc_foundry(tmp_path / "contest_devices.jsonl", 2, "x")
    _arc_foundry(tmp_path / "contrain_devices.jsonl", 2, "x")
    assert sibling_split(record("arc"), Path(plain)) is None
    assert sibling_split(record("arc"), HubPath.parse("hf:allenai/ai2_arc:ARC-Challenge@test")) == ("train", HubPath.parse("hf:allenai/ai2_arc:ARC-Challenge@train"))
    assert sibling_split(record("hellaswag"), HubPath.parse("hf:Rowan/hellaswag@validation")) == ("train", HubPath.parse("hf:Rowan/hellaswag@train"))
    assert sibling_split(record("halueval"), HubPath.parse("hf:pminervini/HaluEval:dialogue@data")) is None


@pytest.mark.parametrize("maker,name,test_name,train_name", [
    (_arc_ai2, "arc", "ARC-Challenge-Test.jsonl", "ARC-Challenge-Train.jsonl"),
    (_arc_foundry, "arc", "arc_test.jsonl", "arc_train.jsonl"),
    (_hellaswag, "hellaswag", "hellaswag_val.jsonl", "hellaswag_train.jsonl"),
    (_cosmosqa, "cosmosqa", "valid.csv", "train.csv"),
])
def test_train_split_demonstrations_are_never_evaluated(tmp_path, maker, name, test_name, train_name):
    test = maker(tmp_path / test_name, 12, "test")
    train = maker(tmp_path / train_name, 9, "train")
    items = list(load_mcq_dataset(name, test))
    demos, evaluated = plan_demonstrations(TaskSpec.parse(f"{name}={test}"), 3, items, seed=2)
    assert demos.source == SPLIT_SOURCE and demos.split == "train" and demos.where == train
    assert len(evaluated) == 12  # nothing comes off the evaluated items
    assert all(d.options[0].startswith("train") for d in demos.shared) and len(demos.shared) == 3
    _check_apart(demos, evaluated)
    conf = demos.to_config()
    assert conf["source"] == SPLIT_SOURCE and conf["file"] == str(train) and conf["ids"] == demos.ids()
    assert "seed 2" in conf["draw"] and "9 rows" in conf["draw"]
    if maker is _arc_foundry:  # line-number ids collide with the test file's: recorded with the file name
        assert all(i.endswith("@" + train_name) for i in conf["ids"])


def test_demos_from_the_evaluated_file_removes_those_items(tmp_path):
    test = _hellaswag(tmp_path / "hellaswag_val.jsonl", 20, "v")
    items = list(load_mcq_dataset("hellaswag", test))
    demos, evaluated = plan_demonstrations(TaskSpec.parse(f"hellaswag={test}"), 4, items, demos_from=Path(test))
    assert demos.source == FILE_SOURCE and demos.given and len(evaluated) == 16
    assert sorted(demos.to_config()["removed_from_evaluated"]) == sorted(demos.ids())
    assert demos.to_config()["given_by"] == "--demos-from"
    _check_apart(demos, evaluated)


def test_demos_from_a_file_beats_the_sibling_split(tmp_path):
    test = _arc_ai2(tmp_path / "ARC-Easy-Test.jsonl", 6, "test")
    _arc_ai2(tmp_path / "ARC-Easy-Train.jsonl", 6, "train")
    mine = _arc_ai2(tmp_path / "mine.jsonl", 5, "mine")
    demos, evaluated = plan_demonstrations(TaskSpec.parse(f"arc={test}"), 2, list(load_mcq_dataset("arc", test)), demos_from=Path(mine))
    assert demos.source == FILE_SOURCE and all(i.startswith("arc/mine_") for i in demos.ids())
    _check_apart(demos, evaluated)
    with pytest.raises(WhiteboxError, match="has 5 usable rows but --shots 6"):
        plan_demonstrations(TaskSpec.parse(f"arc={test}"), 6, list(load_mcq_dataset("arc", test)), demos_from=Path(mine))


def test_without_a_split_the_pool_comes_off_the_items(tmp_path):
    test = _arc_foundry(tmp_path / "arc_challenge.jsonl", 20, "x")
    assert demo_source(TaskSpec.parse(f"arc={test}"), 3).kind == POOL_SOURCE and demo_source(TaskSpec.parse(f"arc={test}"), 3).takes_pool
    assert demo_source(TaskSpec.parse(f"arc={test}"), 0).kind is None
    items = list(load_mcq_dataset("arc", test))
    demos, evaluated = plan_demonstrations(TaskSpec.parse(f"arc={test}"), 3, items)
    assert demos.source == POOL_SOURCE and len(evaluated) == 5
    assert demos.to_config()["note"] == f"no train/dev split found beside {test}; give one with --demos-from"
    _check_apart(demos, evaluated)
    with pytest.raises(WhiteboxError, match="--demos-from needs a NAME=PATH task"):
        demo_source(TaskSpec.parse("ssd"), 2, demos_from=Path(test))
    with pytest.raises(WhiteboxError, match="write --task hellaswag=PATH"):
        demo_source(TaskSpec.parse("hellaswag"), 2, demos_from=Path(test))


def test_mmlu_demos_from_names_the_dev_split(tmp_path):
    for split, n in (("dev", 5), ("test", 4), ("other", 5)):
        (tmp_path / split).mkdir()
        rows = [f'"astronomy {split} q{i}?",w{i},x{i},y{i},z{i},A' for i in range(n)]
        name = "test" if split == "test" else "dev"  # a dev split kept elsewhere keeps the hendrycks file names
        (tmp_path / split / f"astronomy_{name}.csv").write_text("\n".join(rows) + "\n")
    items = list(load_mcq_dataset("mmlu", tmp_path / "test"))
    src = demo_source(TaskSpec.parse(f"mmlu={tmp_path / 'test'}"), 2, demos_from=Path(tmp_path / "other"))
    assert src.kind == DEV_SOURCE and src.where == tmp_path / "other"
    demos, evaluated = plan_demonstrations(TaskSpec.parse(f"mmlu={tmp_path / 'test'}"), 2, items, demos_from=Path(tmp_path / "other" / "astronomy_dev.csv"))
    assert [d.question for d in demos.by_subject["astronomy"]] == ["astronomy other q0?", "astronomy other q1?"]
    assert demos.to_config()["given_by"] == "--demos-from" and evaluated == items
    _check_apart(demos, evaluated)
