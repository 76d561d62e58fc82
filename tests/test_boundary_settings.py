"""One boundary for what users give: a setting has its field's declared
type, numbers are finite, an unknown key is refused naming the nearest one, and a user's YAML/JSON
file is read with a size cap and without anchors or aliases; each a one-line error, exit 2."""

from __future__ import annotations

import json

import pytest

from whitebox_eval.config_file import MAX_BYTES, read_user_file
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.settings import checked_settings


def _cfg(name):
    from whitebox_eval.lazy import resolve

    return resolve({"mcqa": "whitebox_eval.mcqa.config:MCQAConfig", "span": "whitebox_eval.span.config:SpanConfig",
                    "mui": "whitebox_eval.mui.config:MUIConfig"}[name])


@pytest.mark.parametrize("suite, settings, says", [
    ("mcqa", {"seed": 1.5}, "seed takes a whole number, not float 1.5"),
    ("mcqa", {"seed": 2.0}, "seed takes a whole number"),       # a whole float is still no int
    ("mcqa", {"seed": True}, "seed takes a whole number"),      # nor is a bool
    ("mcqa", {"n_options": "4"}, "n_options takes a whole number"),
    ("mcqa", {"item_views": "no"}, "item_views takes true or false"),
    ("mcqa", {"limit": float("nan")}, "limit must be a finite number"),
    ("mcqa", {"val_fraction": float("inf")}, "val_fraction must be a finite number"),
    ("mcqa", {"labels": 7}, "labels takes text, not int 7 (quote it"),
    ("mcqa", {"methods": [1, 2]}, "methods[0] takes text"),
    ("mcqa", {"seeed": 1}, "did you mean seed?"),
    ("mcqa", {"model": None}, "model must be given"),
    ("span", {"heads": "5,x"}, "heads takes a comma list of whole numbers, not 'x'"),
    ("span", {"values": [0.3, float("-inf")]}, "values[1] must be a finite number"),
    ("span", {"finetune": {"learnin_rate": 1e-4}}, "did you mean learning_rate?"),
    ("span", {"finetune": {"epochs": 1.5}}, "finetune: epochs takes a whole number"),
    ("span", {"finetune": [1, 2]}, "takes a mapping of FinetuneConfig's settings"),
    ("span", {"id_params": {"length": float("nan")}}, "id_params.length must be a finite number"),
    ("mui", {"threshold_value": "high"}, "threshold_value takes a number, not str"),
])
def test_a_wrong_value_is_one_line_naming_the_key(suite, settings, says):
    with pytest.raises(WhiteboxError) as error:
        checked_settings(_cfg(suite), settings, "here")
    assert says in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_right_values_pass_and_take_the_fields_form():
    out = checked_settings(_cfg("mcqa"), {"limit": 0.25, "seed": 3, "methods": "baseline, qk", "val_fraction": 1,
                                          "demos_from": None})
    assert out == {"limit": 0.25, "seed": 3, "methods": ("baseline", "qk"), "val_fraction": 1.0, "demos_from": None}
    assert isinstance(out["val_fraction"], float)
    span = checked_settings(_cfg("span"), {"heads": [1, 2], "values": "0.5,2", "finetune": {"epochs": 2}})
    assert span["heads"] == (1, 2) and span["values"] == (0.5, 2.0) and span["finetune"].epochs == 2


@pytest.mark.parametrize("value, words", [(1.5, "takes a whole number, not float 1.5"),
                                          (True, "takes a whole number, not bool True"),
                                          ("2", "takes a whole number, not str '2'")])
def test_a_paper_entry_and_a_config_are_read_by_one_check(value, words):
    """A paper file's entry (``reproduce/spec_keys``) and a config's settings are checked by one
    function (``runs.settings.checked_keys``): the same fault is the same line at both."""
    from whitebox_eval.reproduce import spec_keys

    with pytest.raises(WhiteboxError) as config:
        checked_settings(_cfg("mcqa"), {"seed": value}, "here")
    with pytest.raises(WhiteboxError) as paper:
        spec_keys.entry({"model": "m", "layers": value}, "saes", "here")
    assert str(config.value) == f"here: seed {words}" and str(paper.value) == f"here: layers {words}"


def test_an_unknown_key_names_the_nearest_at_both_call_sites():
    from whitebox_eval.reproduce import spec_keys

    with pytest.raises(WhiteboxError) as config:
        checked_settings(_cfg("mcqa"), {"limt": 1}, "here")
    with pytest.raises(WhiteboxError) as paper:
        spec_keys.entry({"layrs": 1}, "saes", "here")
    assert str(config.value).startswith("here: unknown setting 'limt' for MCQAConfig (did you mean limit?); "
                                        "the settings are: ")
    assert str(paper.value) == ("here: unknown key 'layrs' (did you mean layers?); the keys are: "
                                "cite, hook, ids, layers, model, release, repo")


def test_a_billion_laughs_file_ends_in_one_line_without_expanding(tmp_path):
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 12):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]")
    f = tmp_path / "laughs.yaml"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(WhiteboxError, match=r"line 1 uses a YAML anchor or alias"):
        read_user_file(f)
    alias_only = tmp_path / "alias.yaml"  # an alias to an anchor defined later still is one
    alias_only.write_text("seed: 1\nlimit: 2\nx: &x 3\ny: *x\n")
    with pytest.raises(WhiteboxError, match="line 3 uses a YAML anchor"):
        read_user_file(alias_only)


@pytest.mark.parametrize("name, text, says", [
    ("c.json", '{"limit": NaN}', "NaN is not a finite number"),
    ("c.json", '{"limit": -Infinity}', "-Infinity is not a finite number"),
    ("c.json", "[1, 2]", "must hold a mapping"),
    ("c.yaml", "- seed\n", "must hold a mapping"),
    ("c.yaml", "limit: [\n", "is not valid YAML"),
])
def test_bad_files_are_one_line(tmp_path, name, text, says):
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(WhiteboxError, match="^--config") as error:
        read_user_file(f)
    assert says in str(error.value)


def test_a_file_over_the_cap_is_refused_unread(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("seed: 1\n" + "#" * MAX_BYTES)
    with pytest.raises(WhiteboxError, match="over the 1,048,576 a settings file may hold"):
        read_user_file(f, "paper file")
    assert read_user_file(_small(tmp_path)) == {"seed": 1}


def _small(tmp_path):
    f = tmp_path / "small.json"
    f.write_text(json.dumps({"seed": 1}))
    return f


@pytest.mark.parametrize("text, says", [
    ("seed: 1.5\n", "seed takes a whole number, not float 1.5"),
    ("limit: .nan\n", "limit must be a finite number"),
    ("limt: 3\n", "did you mean limit?"),
    ("uncertainty: maybe\n", "uncertainty takes true or false"),
    ("batch_size: 2.5\n", "batch_size takes a whole number"),
    ("val_fraction: .inf\n", "val_fraction must be a finite number"),
    ("x: &x 2\nseed: *x\n", "anchor or alias"),
])
def test_cli_config_values_are_checked_as_the_command_line_is(tmp_path, cli, text, says):
    f = tmp_path / "opts.yaml"
    f.write_text(text)
    code, out, err = cli(["mcqa", "--config", str(f), "--output", str(tmp_path / "runs")])
    assert code == 2 and says in err and len(err.strip().splitlines()) <= 3, err
    assert not (tmp_path / "runs").exists()
