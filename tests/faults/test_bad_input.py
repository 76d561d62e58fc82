"""The bad-input cases that need more than one ``error:`` line checked: run ids outside
``--output`` (every command), a reproduction whose plan partly fails, skipped-row warnings,
``runs`` on damaged folders, and the one read-error path under the readers (units)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cases import REPRODUCE  # noqa: E402

from whitebox_eval.errors import WhiteboxError  # noqa: E402

#: every command that takes --run-id, with what it needs besides
RUN_ID_COMMANDS = {
    "mcqa": ["mcqa", "--model", "{d}/tiny", "--limit", "8", "--min-val-items", "2"],
    "formats": ["formats", "--model", "{d}/tiny", "--limit", "2", "--n-bins", "2"],
    "mui": ["mui", "--model", "{d}/tiny", "--task", "arithmetic-gen", "--limit", "2"],
    "mui masking": ["mui", "masking", "--model", "{d}/tiny", "--limit", "2"],
    "gar": ["gar", "--model", "{d}/tiny", "--limit", "2"],
    "span": ["span", "--model", "{d}/tiny", "--task", "string_reversal", "--limit", "2"],
    "reproduce": REPRODUCE,
}


def _args(argv: list[str], d: Path) -> list[str]:
    return [a.replace("{d}", str(d)) for a in argv]


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


# ---------------------------------------------------------------------- case 5: run ids


@pytest.mark.parametrize("escape", ["../escaped", "ABSOLUTE"])
@pytest.mark.parametrize("command", list(RUN_ID_COMMANDS))
def test_no_command_accepts_a_run_id_outside_its_output(command, escape, fixtures, cli, tmp_path):
    output = tmp_path / "out"
    run_id = str(tmp_path / "absolute") if escape == "ABSOLUTE" else escape
    code, _, err = cli([*_args(RUN_ID_COMMANDS[command], fixtures), "--output", str(output), "--run-id", run_id])
    assert code == 2 and "Traceback" not in err, err
    (line,) = _error_lines(err)
    assert f"run id {run_id!r} is not a plain folder name" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing is written, inside or outside --output"


def test_studies_refuse_a_run_id_outside_the_output_folder(fixtures, tmp_path):
    from whitebox_eval import studies

    with pytest.raises(WhiteboxError, match="not a plain folder name"):
        studies.reproduce("004", tmp_path / "out", run_id="../escaped", models=[str(fixtures / "tiny")],
                          scale="micro", data={"triviaqa": str(fixtures / "trivia.jsonl")}, show_progress=False)
    with pytest.raises(WhiteboxError, match="not a plain folder name"):
        studies.span(tmp_path / "out", run_id="../escaped", model=str(fixtures / "tiny"), limit=2)
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------------- case 6: a plan that partly fails


def test_a_partly_failed_reproduction_finishes_marks_the_failures_and_exits_3(fixtures, cli, tmp_path):
    from whitebox_eval.reproduce.command import PARTLY_RUN

    missing = str(tmp_path / "no-such-model")
    argv = _args([*REPRODUCE, "--model", missing, "--output", str(tmp_path / "out"), "--run-id", "r"], fixtures)
    code, out, err = cli(argv)
    assert code == PARTLY_RUN == 3, err
    assert f"warning: model {missing}: model path not found: {missing} (4 run(s) will be marked not run" in err  # 004's two children, its training and the run on the trained model
    assert err.strip().splitlines()[-1].startswith("warning: 3 of 7 child runs failed and are marked not run")  # the run on its trained model is not run, not failed
    assert "reproduction folder:" in out
    claims = json.loads((tmp_path / "out" / "r" / "claims.json").read_text())["papers"][0]
    status: dict[str, set[str]] = {}
    for run in claims["runs"]:
        status.setdefault(run["model"], set()).add(run["status"])
    tiny = str(fixtures / "tiny")
    assert status == {missing: {"failed"}, f"{missing} + arithmetic": {"skipped"}, tiny: {"done"},
                      f"{tiny} + arithmetic": {"done"}}
    verdicts = {c["model"]: c["verdict"] for c in claims["claims"] if c["model"].startswith(missing)}
    assert set(verdicts.values()) == {"not run"}


def test_a_reproduction_whose_every_child_fails_while_running_exits_2(fixtures, cli, tmp_path):
    """A model the checks before the plan pass (its config.json loads) but that does not load
    (no tokenizer): every child fails, so the command ends in one error line, not exit 0."""
    model = tmp_path / "no_tokenizer"
    shutil.copytree(fixtures / "tiny", model)
    for f in model.iterdir():
        if "token" in f.name:
            f.unlink()
    code, out, err = cli(_args(_with_model(model) + ["--output", str(tmp_path / "out"), "--run-id", "r"], fixtures))
    assert code == 2, err
    (line,) = _error_lines(err)
    assert line.startswith(f"error: no child run could run (3 failed; the first: model {model} did not load: ")  # 004 micro: two children and the training
    assert line.endswith(f"{tmp_path / 'out' / 'r' / 'reproduction.md'} lists them all: fix that and rerun with --resume")
    assert "reproduction folder:" not in out


def _with_model(model: Path) -> list[str]:
    argv = list(REPRODUCE)
    argv[argv.index("--model") + 1] = str(model)
    return argv


# ---------------------------------------------------------------------- case 8: warnings, runs


def test_a_skipped_row_is_one_warning_line_naming_file_and_row(fixtures, cli, tmp_path):
    path = fixtures / "gen_one_bad.jsonl"
    code, _, err = cli(["mui", "--model", str(fixtures / "tiny"), "--task", f"gen={path}", "--limit", "2",
                        "--max-new-tokens", "2", "--output", str(tmp_path), "--run-id", "skip"])
    assert code == 0, err
    about = [line for line in err.splitlines() if "gen_one_bad" in line or "warnings.warn" in line]
    assert about == [f"warning: skipped 1 malformed row(s) loading gen from {path}: {path}:2: no answer column "
                     "(looked for answer, answers, reference, references, target, targets, gold, output; columns: "
                     "question); name it with --field answer=COLUMN"], err


def test_runs_flags_damaged_folders_and_counts_only_samples(fixtures, cli, tmp_path):
    from whitebox_eval.runs import list_runs

    root = tmp_path / "runs"
    for name in ("good", "corrupt", "noconfig"):
        shutil.copytree(fixtures / "runs" / name, root / name)
    with open(root / "good" / "samples.jsonl", "a") as f:
        f.write("garbage\n[1, 2]\n")
    (root / "badyaml").mkdir()
    (root / "badyaml" / "config.yaml").write_text("suite: [unclosed\n")
    by_id = {r.id: r for r in list_runs(root)}
    assert by_id["good"].n_samples == 1
    assert by_id["good"].damage == ["samples.jsonl has 2 line(s) that are not samples (line 2, ...)"]
    assert by_id["corrupt"].damage[0].startswith("results.json is corrupted (")
    assert by_id["noconfig"].damage == ["config.yaml is missing"] and by_id["noconfig"].n_samples == 1
    assert by_id["badyaml"].damage[0].startswith("config.yaml is unreadable (")
    code, out, _ = cli(["runs", "--output", str(root)])
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert code == 0 and set(rows) == {"good", "corrupt", "noconfig", "badyaml"}
    assert "n=1 " in rows["good"] and "DAMAGED: samples.jsonl has 2 line(s)" in rows["good"]
    assert "DAMAGED: config.yaml is missing" in rows["noconfig"]


# ---------------------------------------------------------------------- the readers (units)


def test_eio_while_reading_is_the_one_line_of_a_failed_open(fixtures):
    from whitebox_eval import datafiles
    from whitebox_eval.tasks.rows import read_csv

    for read in (lambda: list(datafiles.json_lines(fixtures / "eio.jsonl")),
                 lambda: list(read_csv(fixtures / "eio.csv")),
                 lambda: datafiles.check_readable(fixtures / "eio.csv", text=False)):
        with pytest.raises(WhiteboxError, match=r"^cannot read .*eio\.(jsonl|csv): Input/output error \(the disk"):
            read()
    with pytest.raises(WhiteboxError, match=r"^cannot read .*missing\.jsonl: No such file or directory$"):
        list(datafiles.json_lines(fixtures / "missing.jsonl"))


def test_text_that_is_not_utf8_names_its_line_past_a_character_cut_between_pieces(tmp_path):
    from whitebox_eval import datafiles

    head = b"x" * ((1 << 20) - 1) + "\u00e9\n".encode()  # the 2-byte \u00e9 straddles the 1 MiB piece boundary
    path = tmp_path / "big.jsonl"
    path.write_bytes(head + b'{"a": 1}\n' * 3 + b'{"a": "\xff"}\n')
    with pytest.raises(WhiteboxError, match=r"big\.jsonl:5: not UTF-8 text \(byte 0xFF\); re-save the file as UTF-8"):
        datafiles.check_readable(path)
    path.write_bytes(head + b'{"a": 1}\n')
    datafiles.check_readable(path)  # all of it is UTF-8


def test_error_texts_without_typos(tmp_path):
    from whitebox_eval import datafiles
    from whitebox_eval.tasks.rows import existing

    with pytest.raises(WhiteboxError, match=r"a folder of subject CSVs\), or a Hugging Face dataset"):
        existing(tmp_path / "none.csv")
    path = tmp_path / "u.jsonl"
    path.write_text('{"a": "unterminated')  # the last line, with no newline to end the string
    assert list(datafiles.json_lines(path)) == [(1, "invalid JSON (Unterminated string starting at column 7)")]


def test_lm_eval_data_that_is_not_json_names_the_file_and_the_parse_error(tmp_path):
    pytest.importorskip("lm_eval", reason="the lm-eval extra is not installed")
    from whitebox_eval.tasks.lm_eval_tasks import load_items

    here = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_tasks" / "data" / "sciq"
    shutil.copytree(here, tmp_path / "sciq")
    (tmp_path / "sciq" / "test.jsonl").write_text('{"question": "ok"}\nthis is not JSON\n')
    with pytest.raises(WhiteboxError, match=r"^--lm-eval-data: .*sciq/test\.jsonl:2: invalid JSON \(Expecting value at "
                                            r"column 1\); fix or remove the line$"):
        load_items("sciq", shots=0, data=tmp_path / "sciq")


def test_resume_without_config_yaml_says_so_and_touches_nothing(tmp_path):
    from whitebox_eval.runs import RunFolder

    run = RunFolder.create(tmp_path, {"suite": "t"}, run_id="r")
    run.append_samples([{"id": 1}])
    (run.path / "config.yaml").unlink()
    before = {p.name: p.read_bytes() for p in run.path.iterdir()}
    with pytest.raises(WhiteboxError) as err:
        RunFolder.create(tmp_path, {"suite": "t"}, run_id="r", resume=True)
    assert str(err.value).startswith(f"cannot resume {run.path}: its config.yaml is missing")
    assert "restore config.yaml" in str(err.value) and "pass --resume" not in str(err.value)
    assert {p.name: p.read_bytes() for p in run.path.iterdir()} == before
