"""Each suite from Python (whitebox_eval.studies): the same run folder as the command, read back."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "faults"))
from cases import build_fixtures, build_smollm2_vocab_model_dir  # noqa: E402

from whitebox_eval import studies  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_fixtures(tmp_path_factory.mktemp("api")) / "tiny")


def test_mcqa_from_python_equals_the_command(tiny, tmp_path):
    from whitebox_eval.cli import main

    main(["mcqa", "--model", tiny, "--limit", "8", "--min-val-items", "2", "--batch-size", "4",
          "--methods", "baseline,qk", "--output", str(tmp_path), "--run-id", "cli"])
    r = studies.mcqa(tmp_path, run_id="py", model=tiny, limit=8, min_val_items=2, batch_size=4,
                     methods=["baseline", "qk"], show_progress=False)
    cli = studies.read(tmp_path / "cli")
    assert r.folder == tmp_path / "py"
    assert [s["id"] for s in r.samples] == [s["id"] for s in cli.samples] and len(r.samples) == 8
    assert r.samples == cli.samples
    assert r.headline == cli.headline and r.headline
    assert set(r.arrays) == set(cli.arrays) and len(r.arrays) > 0
    for name in r.arrays:
        np.testing.assert_array_equal(r.arrays[name], cli.arrays[name])
    with pytest.raises(KeyError, match="the run has"):
        r.arrays["no_such_array"]


def test_every_suite_runs_from_python(tiny, tmp_path):
    runs = {
        "formats": studies.formats(tmp_path, model=tiny, limit=4, shots=1, n_samples=2, max_new_tokens=3, n_bins=2,
                                   show_progress=False),
        "mui": studies.mui(tmp_path, model=tiny, task="arithmetic-gen", limit=4, max_new_tokens=3, show_progress=False),
        "span": studies.span(tmp_path, model=tiny, task="string_reversal", split="id", limit=4, show_progress=False),
    }
    # a config field named like the record's own mode argument (span's reinforcement mode) is a setting
    conditional = studies.span(tmp_path, run_id="conditional", model=tiny, task="value_assignment", split="id", limit=4,
                               mode="conditional", show_progress=False)
    assert conditional.config["mode"] == "conditional"
    for suite, r in runs.items():
        assert r.config["suite"] in (suite, f"{suite}-study"), r.config["suite"]
        assert r.samples and r.results, suite


@pytest.mark.integration
def test_gar_from_python(tmp_path):
    smol = build_smollm2_vocab_model_dir(tmp_path / "tiny_smol")  # GAR needs word-initial tokens
    r = studies.gar("evaluate", tmp_path / "runs", model=str(smol), tasks="generation", limit=2, show_progress=False)
    assert r.config["mode"] == "evaluate" and r.samples and r.headline
    assert len(r.samples) == len({s["id"] for s in r.samples})


def test_unknown_setting_or_mode_is_one_line(tmp_path):
    with pytest.raises(WhiteboxError, match="unknown gar mode 'evaluat'"):
        studies.gar("evaluat", tmp_path)
    with pytest.raises(WhiteboxError, match="unknown setting.*limt.*the settings are"):
        studies.mcqa(tmp_path, limt=3)


def test_edits_from_python_equal_the_command_and_a_bad_one_is_one_line(tiny, tmp_path, capsys):
    """``--edit`` on a study command and ``edits=[...]`` in ``studies`` write the same run."""
    import yaml

    from whitebox_eval.cli import main

    edit = ["neurons:0:1,2=3", "ablate:L1H0"]
    args = ["--model", tiny, "--limit", "3", "--shots", "1", "--n-samples", "2", "--max-new-tokens", "3", "--n-bins", "2"]
    main(["formats", *args, "--edit", edit[0], "--edit", edit[1], "--output", str(tmp_path), "--run-id", "cli"])
    r = studies.formats(tmp_path, run_id="py", model=tiny, limit=3, shots=1, n_samples=2, max_new_tokens=3, n_bins=2,
                        edits=edit, show_progress=False)
    assert r.samples == studies.read(tmp_path / "cli").samples
    assert yaml.safe_load((tmp_path / "cli" / "config.yaml").read_text())["edits"] == edit == r.config["edits"]
    for command in (["formats", *args], ["mui", "--model", tiny, "--task", "arithmetic-gen", "--limit", "2"], ["span", "--model", tiny, "--limit", "2"],
                    ["gar", "--model", tiny, "--limit", "2"]):
        capsys.readouterr()
        with pytest.raises(SystemExit) as code:
            main([*command, "--edit", "neurons:99:1", "--output", str(tmp_path), "--run-id", "bad"])
        assert code.value.code == 2
        err = capsys.readouterr().err.strip()
        assert "layer 99 is outside this model" in err and len(err.splitlines()) == 1, (command, err)
        assert not (tmp_path / "bad").exists()
