"""The ``report`` and ``compare`` commands."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.report.command import compare, report


def test_report_writes_next_to_the_first_run_by_default(mcqa_run, mui_run):
    a = mcqa_run(run_id="a")
    result = CliRunner().invoke(report, [str(a.path), str(mui_run("m", "ssd", 0.01, 0.01).path)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote {a.path / 'report.html'}"
    assert "Runs side by side" in (a.path / "report.html").read_text(encoding="utf-8")


def test_report_out_static_and_sample_cap(mcqa_run, tmp_path):
    run = mcqa_run(n_samples=5)
    out = tmp_path / "page.html"
    result = CliRunner().invoke(report, [str(run.path), "--out", str(out), "--samples", "2", "--static"])
    assert result.exit_code == 0, result.output
    static = out.read_text(encoding="utf-8")
    assert static.count("<details class=sample>") == 2 and "<script" not in static
    result = CliRunner().invoke(report, [str(run.path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")  # the explorer holds every item; no sample viewer
    assert "<details class=sample>" not in page and page.count("<script") == 2
    assert '"id":"item-4-\\u003cscript\\u003e' in page


def test_compare_prints_an_aligned_delta_table(mcqa_run):
    a = mcqa_run(run_id="a", headline={"acc,baseline": 0.5, "acc,qk_head": 0.25, "only_a": 1})
    b = mcqa_run(run_id="b", headline={"acc,baseline": 0.75, "acc,qk_head": 0.125, "only_b": "x"})
    result = CliRunner().invoke(compare, [str(a.path), str(b.path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("A: a  (mcqa / tiny") and lines[1].startswith("B: b  (mcqa")
    table = lines[3:lines.index("", 3)]  # the paired section follows after a blank line
    assert table[0].split() == ["metric", "A", "B", "B", "-", "A"]
    assert set(table[1]) <= {"-", " "}
    rows = {line.split()[0]: line for line in table[2:]}
    assert rows["acc,baseline"].split() == ["acc,baseline", "0.5", "0.75", "+0.25"]
    assert rows["acc,qk_head"].split() == ["acc,qk_head", "0.25", "0.125", "-0.125"]
    assert rows["only_a"].split() == ["only_a", "1", "\u2014"]
    assert rows["only_b"].split() == ["only_b", "\u2014", "x"]
    # right-aligned numeric columns end in the same place on every full row
    assert len({len(table[0]), len(rows["acc,baseline"]), len(rows["acc,qk_head"])}) == 1


def test_compare_mui_runs_names_the_direction(mui_run):
    a, b = mui_run("base", "ssd", 0.5, 0.02), mui_run("tuned", "ssd", 0.625, 0.03)
    result = CliRunner().invoke(compare, [str(a.path), str(b.path)])
    assert result.exit_code == 0, result.output
    assert "direction on ssd: accumulating (accuracy / mui: 0.5 / 0.02 -> 0.625 / 0.03)" in result.output


def test_compare_needs_finished_runs(mcqa_run, tmp_path):
    from whitebox_eval.runs import RunFolder

    unfinished = RunFolder.create(tmp_path, {"suite": "mcqa", "model": "m", "task": "t"}, run_id="u")
    result = CliRunner().invoke(compare, [str(mcqa_run().path), str(unfinished.path)])
    assert isinstance(result.exception, WhiteboxError)
    assert "has no results.json yet" in str(result.exception)


def test_registered_in_the_cli_and_user_errors_exit_2(tmp_path, capsys):
    import click

    from whitebox_eval.cli import cli, main

    ctx = click.Context(cli)
    assert cli.get_command(ctx, "report") is report and cli.get_command(ctx, "compare") is compare
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "is not a run folder" in err and "Traceback" not in err


def test_compare_rebases_a_row_that_the_first_input_lacks(mcqa_run):
    a = mcqa_run(run_id="a", headline={"acc,x": 0.5})
    b = mcqa_run(run_id="b", headline={"acc,y": 0.25})
    c = mcqa_run(run_id="c", headline={"acc,y": 0.75, "acc,x": 0.25})
    result = CliRunner().invoke(compare, [str(a.path), str(b.path), str(c.path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    table = lines[4:lines.index("", 4)]
    assert "B - first in row" in table[0] and "C - first in row" in table[0]
    rows = {line.split()[0]: line.split() for line in table[2:]}
    assert rows["acc,x"][-1] == "-0.25"  # C - A
    assert rows["acc,y"][-1] == "+0.5" and rows["acc,y"][1] == "\u2014"  # C - B: A lacks the row, B is its first value
