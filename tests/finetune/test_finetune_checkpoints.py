"""Checkpoints kept along a fine-tuning (``--keep-checkpoints``, models/checkpoints.py): the model
before training and at evenly spaced steps, each a folder that loads as --model with its fingerprint;
keeping them changes no weight and no output of a run without them; a crash then --resume keeps the
same checkpoints as an uninterrupted run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from whitebox_eval.models.checkpoints import checkpoint_steps, list_checkpoints
from whitebox_eval.models.training import TRAINED_FILE, weights_file_sha256

ARGS = ["--task", "arithmetic-gen", "--limit", "40", "--lr", "3e-3", "--train-batch-size", "4", "--epochs", "2",
        "--save-every", "3", "--batch-size", "8", "--max-new-tokens", "4"]
KEEP = ["--keep-checkpoints", "3"]


pytestmark = pytest.mark.usefixtures("one_thread")


def _main(args) -> None:
    from whitebox_eval.cli import main

    try:
        main(args)
    except SystemExit as e:
        assert e.code in (0, None)


@pytest.fixture(scope="module")
def runs(tiny_smol_folder, tmp_path_factory):
    """The same fine-tuning without checkpoints (``off``) and keeping 3 (``on``)."""
    out = tmp_path_factory.mktemp("ftc")
    _main(["finetune", "--model", str(tiny_smol_folder), *ARGS, "--output", str(out), "--run-id", "off"])
    _main(["finetune", "--model", str(tiny_smol_folder), *ARGS, *KEEP, "--output", str(out), "--run-id", "on"])
    return out / "off", out / "on"


def test_checkpoint_steps_are_spread_evenly_and_end_at_the_last_step():
    assert checkpoint_steps(600, 6) == [100, 200, 300, 400, 500, 600]
    assert checkpoint_steps(14, 3) == [5, 9, 14]
    assert checkpoint_steps(2, 6) == [1, 2]  # fewer steps than checkpoints: each step once
    assert checkpoint_steps(10, 0) == []


def test_checkpoints_are_kept_with_their_fingerprints_and_change_nothing_else(runs, tiny_smol_folder):
    from whitebox_eval.models import load_model
    from whitebox_eval.models.training import weights_fingerprint

    off, on = runs
    info = json.loads((on / TRAINED_FILE).read_text())
    steps = checkpoint_steps(info["planned_steps"], 3)
    kept = list_checkpoints(on)
    assert [c["step"] for c in kept] == [0, *steps] and len(steps) == 3
    for c in kept:
        assert c["sha256"] == weights_file_sha256(c["path"]) and c["run_id"] == "on"
    assert info["checkpoints"] == [{"step": c["step"], "sha256": c["sha256"]} for c in kept]
    assert kept[-1]["sha256"] == weights_file_sha256(on)  # the last checkpoint is the final model
    assert len({c["sha256"] for c in kept}) == len(kept)  # every checkpoint moved
    base, first = load_model(str(tiny_smol_folder)), load_model(kept[0]["path"])
    assert weights_fingerprint(first.model) == weights_fingerprint(base.model)  # step 0: the model before training
    # the option off: the same weights, results and config.yaml (no new key) as before the option existed
    assert weights_file_sha256(on) == weights_file_sha256(off)
    r_off, r_on = (json.loads((p / "results.json").read_text()) for p in (off, on))
    assert "checkpoints" not in r_off and r_on.pop("checkpoints") and r_on == r_off
    conf_off, conf_on = (yaml.safe_load((p / "config.yaml").read_text()) for p in (off, on))
    assert "keep_checkpoints" not in conf_off and conf_on["keep_checkpoints"] == 3
    assert not (off / "checkpoints").exists()


def test_a_checkpoint_loads_as_model_and_is_recorded(runs, tmp_path, cli):
    _, on = runs
    c = list_checkpoints(on)[1]
    code, _, err = cli(["mui", "--task", "arithmetic-gen", "--limit", "3", "--max-new-tokens", "4",
                        "--model", c["path"], "--output", str(tmp_path), "--run-id", "use"])
    assert code == 0, err
    conf = yaml.safe_load((tmp_path / "use" / "config.yaml").read_text())
    assert conf["model_weights"] == {"producer": "on", "sha256": c["sha256"], "step": c["step"]}


def test_a_crash_then_resume_keeps_the_same_checkpoints(runs, tiny_smol_folder, tmp_path, cli, monkeypatch):
    from whitebox_eval.finetune import study
    from whitebox_eval.models import training

    class Crash(Exception):
        pass

    real, seen = training.train_rows, []

    def crashing(*a, save_state=None, **kw):
        def save(data: bytes) -> None:
            save_state(data)
            seen.append(1)
            if len(seen) == 2:  # killed just after the state of step 6 (past the first checkpoint, step 5)
                raise Crash

        return real(*a, save_state=save, **kw)

    monkeypatch.setattr(study, "train_rows", crashing)
    with pytest.raises(Crash):
        study.run_finetune(study.FinetuneConfig(model=str(tiny_smol_folder), task="arithmetic-gen", limit=40,
                                                learning_rate=3e-3, train_batch_size=4, epochs=2, save_every=3,
                                                batch_size=8, max_new_tokens=4, keep_checkpoints=3),
                           tmp_path, run_id="k", show_progress=False)
    assert [c["step"] for c in list_checkpoints(tmp_path / "k")] == [0, 5]
    monkeypatch.setattr(study, "train_rows", real)
    code, out, err = cli(["finetune", "--model", str(tiny_smol_folder), *ARGS, *KEEP, "--output", str(tmp_path),
                          "--run-id", "k", "--resume"])
    assert code == 0, err
    assert "checkpoints (each loads as --model)" in out and "steps 0, 5, 9, 14" in out
    _, on = runs
    assert [c["sha256"] for c in list_checkpoints(tmp_path / "k")] == [c["sha256"] for c in list_checkpoints(on)]
    assert weights_file_sha256(tmp_path / "k") == weights_file_sha256(on)


def test_a_folder_without_checkpoints_is_one_line(runs):
    from whitebox_eval.errors import WhiteboxError

    with pytest.raises(WhiteboxError, match="keep-checkpoints"):
        list_checkpoints(Path(runs[0]))
