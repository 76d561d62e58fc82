"""``whitebox-eval finetune`` at micro scale: seeded twice gives the same weights, a crash after a
saved state then --resume gives an uninterrupted run's weights, the folder loads as --model in
mcqa, mui, formats and gar (each consumer's config.yaml records the producer's weights), and a
multiple-choice task is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from whitebox_eval.models.training import TRAINED_FILE, WEIGHTS_FILE, weights_file_sha256

ARGS = ["--task", "arithmetic-gen", "--limit", "40", "--lr", "3e-3", "--train-batch-size", "4", "--epochs", "2",
        "--save-every", "3", "--batch-size", "8", "--max-new-tokens", "4"]


pytestmark = pytest.mark.usefixtures("one_thread")


def _finetune(cli, model, out: Path, run_id: str, *extra: str) -> Path:
    code, _, err = cli(["finetune", "--model", str(model), *ARGS, "--output", str(out), "--run-id", run_id, *extra])
    assert code == 0, err
    return out / run_id


@pytest.fixture(scope="module")
def trained(tiny_smol_folder, tmp_path_factory, finetuned):
    """One finished fine-tuning (run in this process)."""
    return finetuned(tiny_smol_folder, ARGS, tmp_path_factory.mktemp("ft"), "a")


def test_the_run_folder_holds_weights_recipe_splits_curve_and_check(trained, tiny_smol_folder):
    res = json.loads((trained / "results.json").read_text())
    info = json.loads((trained / TRAINED_FILE).read_text())
    conf = yaml.safe_load((trained / "config.yaml").read_text())
    assert (trained / WEIGHTS_FILE).is_file() and (trained / "config.json").is_file()
    assert info["sha256"] == conf["trained_weights"]["sha256"] == weights_file_sha256(trained)
    assert info["sha256"] != weights_file_sha256(tiny_smol_folder)  # the weights moved
    assert set(res["splits"]) == {"train", "validation", "test", "demos"}
    assert set(res) == {"headline", "task", "check", "splits", "duplicates_dropped", "recipe", "training", "loss_first",
                        "loss_last", "paired_tests"}  # no question_recall: planted facts' alone
    assert not (trained / "question_before.json").exists()
    assert all(len(s["sha256"]) == 64 for s in res["splits"].values())
    assert res["training"]["steps"] == info["steps"] > 0 and res["loss_last"] < res["loss_first"]
    h = res["headline"]
    for arm in ("before", "after"):
        assert h[f"accuracy_ci_method,{arm}"] == "wilson" and h[f"accuracy_n,{arm}"] == res["splits"]["test"]["n"]
    assert (trained / "plots" / "loss.png").stat().st_size > 1000
    assert not (trained / "state").exists()  # the training state goes once the weights are in
    splits = json.loads((trained / "splits.json").read_text())
    ids = [set(splits[k]["ids"]) for k in ("train", "validation", "test", "demos")]
    assert sum(map(len, ids)) == len(set().union(*ids))  # no item in two splits


def test_seeded_twice_gives_identical_weights(trained, tiny_smol_folder, tmp_path, cli):
    again = _finetune(cli, tiny_smol_folder, tmp_path, "b")
    assert weights_file_sha256(again) == weights_file_sha256(trained)
    other = _finetune(cli, tiny_smol_folder, tmp_path, "c", "--seed", "1")
    assert weights_file_sha256(other) != weights_file_sha256(trained)


def test_a_crash_after_a_saved_state_then_resume_equals_an_uninterrupted_run(trained, tiny_smol_folder, tmp_path,
                                                                            cli, monkeypatch):
    from whitebox_eval.finetune import study
    from whitebox_eval.models import training

    class Crash(Exception):
        pass

    real = training.train_rows
    seen = []

    def crashing(*a, save_state=None, **kw):
        def save(data: bytes) -> None:
            save_state(data)
            seen.append(len(data))
            if len(seen) == 2:  # killed just after the state of step 6 was written
                raise Crash

        return real(*a, save_state=save, **kw)

    monkeypatch.setattr(study, "train_rows", crashing)
    with pytest.raises(Crash):
        study.run_finetune(study.FinetuneConfig(model=str(tiny_smol_folder), task="arithmetic-gen", limit=40,
                                                learning_rate=3e-3, train_batch_size=4, epochs=2, save_every=3,
                                                batch_size=8, max_new_tokens=4),
                           tmp_path, run_id="k", show_progress=False)
    assert (tmp_path / "k" / study.STATE_FILE).is_file() and not (tmp_path / "k" / WEIGHTS_FILE).exists()
    monkeypatch.setattr(study, "train_rows", real)
    resumed = _finetune(cli, tiny_smol_folder, tmp_path, "k", "--resume")
    assert "training continues from the state saved" in (resumed / "run.log").read_text()
    assert weights_file_sha256(resumed) == weights_file_sha256(trained)
    assert json.loads((resumed / "results.json").read_text())["headline"] == \
        json.loads((trained / "results.json").read_text())["headline"]


@pytest.mark.parametrize("command", [
    ["mcqa", "--task", "ssd", "--limit", "24", "--min-val-items", "4", "--methods", "baseline,qk"],
    ["mui", "--task", "arithmetic-gen", "--limit", "3", "--max-new-tokens", "4"],
    ["formats", "--task", "arithmetic", "--limit", "3", "--n-samples", "2", "--n-bins", "2", "--max-new-tokens", "4"],
    ["gar", "--tasks", "GendersOfPersons/same,CountriesOfCities/same×3", "--limit", "2"],
])
def test_the_run_folder_loads_as_model(trained, tmp_path, cli, command):
    code, _, err = cli([*command, "--model", str(trained), "--output", str(tmp_path), "--run-id", "use"])
    assert code == 0, err
    conf = yaml.safe_load((tmp_path / "use" / "config.yaml").read_text())
    assert conf["model_weights"] == {"producer": "a", "sha256": weights_file_sha256(trained)}


def test_a_consumer_refuses_weights_that_are_not_the_producers(trained, tmp_path, cli):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    data = bytearray((copy / WEIGHTS_FILE).read_bytes())
    data[-1] ^= 1
    (copy / WEIGHTS_FILE).write_bytes(bytes(data))
    code, _, err = cli(["mui", "--task", "arithmetic-gen", "--limit", "2", "--model", str(copy),
                        "--output", str(tmp_path / "out")])
    assert code == 2 and "is not the file its fine-tuning wrote" in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1


@pytest.mark.parametrize("task", ["ssd", "mmlu=x.csv", "arithmetic"])
def test_a_multiple_choice_task_is_refused_in_one_line(task, tmp_path, cli):
    code, _, err = cli(["finetune", "--model", "nowhere", "--task", task, "--output", str(tmp_path)])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "multiple-choice" in lines[0], err
    assert not any(tmp_path.iterdir())  # no run folder


def test_text_trains_on_every_token_and_checks_next_tokens(tiny_smol_folder, tmp_path, cli):
    text = tmp_path / "facts.txt"
    text.write_text("".join(f"The {c} of item {i} is {i * 7 % 13}.\n" for i in range(30) for c in ("colour",)))
    run = _finetune(cli, tiny_smol_folder, tmp_path, "t", "--task", f"text={text}", "--epochs", "1")
    res = json.loads((run / "results.json").read_text())
    before = json.loads((run / "check_before.json").read_text())
    assert res["check"].startswith("next-token accuracy") and all(r["tokens"] >= 8 for r in before)
    assert res["headline"]["accuracy_n,before"] == sum(r["tokens"] for r in before)
    conf = yaml.safe_load((run / "config.yaml").read_text())
    assert conf["data_files"][0]["path"] == str(text)


def test_an_unfinished_run_folder_as_model_is_one_line(tmp_path, cli):
    run = tmp_path / "half"
    run.mkdir()
    (run / "config.yaml").write_text("suite: finetune\n")
    code, _, err = cli(["mui", "--task", "arithmetic-gen", "--limit", "2", "--model", str(run),
                        "--output", str(tmp_path / "out")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "run folder without trained weights" in lines[0], err


def test_patience_stops_early_and_says_so_only_before_the_last_step(tiny_smol_folder, tmp_path, cli, monkeypatch):
    """Validation loss that only rises: ``--patience 1`` stops after the second evaluation and says
    "stopped early"; a patience that runs out exactly at the last planned step stopped nothing."""
    from whitebox_eval.finetune import check

    losses = iter(range(1000))
    monkeypatch.setattr(check, "mean_loss", lambda *a, **k: float(next(losses)))
    early = _finetune(cli, tiny_smol_folder, tmp_path, "early", "--eval-every", "1", "--patience", "1")
    t = json.loads((early / "results.json").read_text())["training"]
    assert t["stopped_early"] and t["steps"] == 2 < t["planned_steps"]
    full = _finetune(cli, tiny_smol_folder, tmp_path, "full", "--eval-every", "1",
                     "--patience", str(t["planned_steps"] - 1))
    t = json.loads((full / "results.json").read_text())["training"]
    assert t["steps"] == t["planned_steps"] and not t["stopped_early"]


def test_answer_end_closes_each_trained_answer_and_config_yaml_omits_the_default(trained, tiny_smol_folder, tmp_path,
                                                                                  cli, monkeypatch):
    """``--answer-end newline`` ends every encoded answer with the newline token (one token here),
    ``none`` with nothing; the default ``eos`` is not written, so earlier run ids stand."""
    from whitebox_eval.finetune import study
    from whitebox_eval.models import load_model

    assert "answer_end" not in yaml.safe_load((trained / "config.yaml").read_text())
    newline = load_model(str(tiny_smol_folder)).tokenizer("\n", add_special_tokens=False)["input_ids"]
    assert len(newline) == 1
    ends = []

    def spy(source, item, tok, demos, eos):
        ends.append(eos)
        return encode(source, item, tok, demos, eos)

    encode = study.encode
    monkeypatch.setattr(study, "encode", spy)
    for end, want in (("newline", newline[0]), ("none", None)):
        ends.clear()
        run = _finetune(cli, tiny_smol_folder, tmp_path, end, "--answer-end", end, "--epochs", "1", "--max-steps", "1")
        assert ends and set(ends) == {want}
        assert yaml.safe_load((run / "config.yaml").read_text())["answer_end"] == end


def test_answer_end_on_a_text_task_is_refused_in_one_line(tmp_path, cli):
    text = tmp_path / "t.txt"
    text.write_text("one two three\n" * 8)
    code, _, err = cli(["finetune", "--model", "nowhere", "--task", f"text={text}", "--answer-end", "newline",
                        "--output", str(tmp_path / "out")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "answer_end" in lines[0], err
    assert not (tmp_path / "out").exists()


def test_train_context_puts_other_training_lines_before_each_and_0_changes_nothing(trained, tiny_smol_folder,
                                                                                     tmp_path, cli, monkeypatch):
    """``--train-context 2``: each training line is encoded after two other training lines (never
    itself, never a validation or test item), each validation line after two training lines; the
    default 0 encodes every line alone and config.yaml omits it (run ids stand)."""
    from whitebox_eval.finetune import study

    assert "train_context" not in yaml.safe_load((trained / "config.yaml").read_text())
    calls = []

    def spy(source, item, tok, demos, eos):
        calls.append((item.id, [d.id for d in demos]))
        return encode(source, item, tok, demos, eos)

    encode = study.encode
    monkeypatch.setattr(study, "encode", spy)
    run = _finetune(cli, tiny_smol_folder, tmp_path, "ctx", "--train-context", "2", "--epochs", "1", "--max-steps", "1")
    splits = json.loads((run / "splits.json").read_text())
    train, val = set(splits["train"]["ids"]), set(splits["validation"]["ids"])
    contexts = {i: d for i, d in calls if i in train | val}
    assert set(contexts) == train | val
    for item, demos in contexts.items():
        assert len(demos) == 2 and set(demos) <= train and item not in demos
    assert len({tuple(d) for d in contexts.values()}) > 1  # drawn per line
    assert yaml.safe_load((run / "config.yaml").read_text())["train_context"] == 2


@pytest.mark.parametrize("task", ["text={file}", "planted-facts"])
def test_train_context_on_a_task_that_trains_lines_alone_is_refused_in_one_line(task, tmp_path, cli):
    text = tmp_path / "t.txt"
    text.write_text("one two three\n" * 8)
    code, _, err = cli(["finetune", "--model", "nowhere", "--task", task.format(file=text), "--train-context", "3",
                        "--output", str(tmp_path / "out")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "train_context" in lines[0], err


def test_line_style_on_another_task_is_refused_in_one_line(tmp_path, cli):
    code, _, err = cli(["finetune", "--model", "nowhere", "--task", "arithmetic-gen", "--line-style", "mixed",
                        "--output", str(tmp_path / "out")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "line_style" in lines[0], err
    assert not (tmp_path / "out").exists()
