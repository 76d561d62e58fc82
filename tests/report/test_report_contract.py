"""The results contract end to end: a real MUI run's results.json, read by report.html and
``compare`` with each headline number and its interval on one row; a run written the older
way is still read; and no suite imports the report."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1] / "mui"))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval import stats  # noqa: E402
from whitebox_eval.mui.study import MUIConfig, run_mui  # noqa: E402
from whitebox_eval.report import write_report  # noqa: E402
from whitebox_eval.report.command import compare  # noqa: E402
from whitebox_eval.runs.estimates import format_estimate, interval  # noqa: E402

SRC = Path(__file__).parents[2] / "src" / "whitebox_eval"
SUITES = ("mcqa", "formats", "mui", "gar", "span", "sae")


def _mui_runs(root: Path) -> list[Path]:
    cfg = dict(model="tiny", task="arithmetic-gen:add1,mul1", limit=6, batch_size=3, max_new_tokens=4,
               threshold="topk", threshold_value=2)
    return [run_mui(MUIConfig(**cfg), root, run_id=f"m{seed}", loaded=tiny_lm("llama", seed=seed),
                    show_progress=False).path for seed in (0, 1)]


def _cells(row: str) -> list[str]:
    return re.findall(r"<td>(.*?)</td>", row)


def test_a_mui_run_shows_accuracy_and_mui_each_with_its_interval_on_one_row(tmp_path):
    a, b = _mui_runs(tmp_path / "runs")
    res = json.loads((a / "results.json").read_text())
    head = res["headline"]
    assert list(head) == [stats.derived_key(name, s) if s else name
                          for name in ("accuracy", "mui") for s in ("", "ci", "n", "stderr", "ci_method")]
    assert 0 <= head["accuracy"] <= 1 and head["accuracy_ci_method"] == "wilson" and head["mui_n"] == 6
    shown = {k: format_estimate(head[k], interval(k, head)) for k in ("accuracy", "mui")}
    assert "n=6 wilson" in shown["accuracy"] and "n=6 jackknife" in shown["mui"]

    html = write_report([a], tmp_path / "one.html").read_text(encoding="utf-8")
    summary = html[html.index("<h3>Summary metrics</h3>"):]
    for key in ("accuracy", "mui"):
        (row,) = re.findall(rf"<tr class=headline><th>{key}</th><td>(.*?)</td></tr>", summary)
        assert row == shown[key]
    assert not re.search(r"<tr class=headline><th>(accuracy|mui)_(ci|n|stderr|ci_method)</th>", summary)

    side = write_report([a, b], tmp_path / "two.html").read_text(encoding="utf-8")
    side = side[side.index("<section id=\"comparison\">"):side.index("</section>")]
    for key in ("accuracy", "mui"):
        (row,) = re.findall(rf"<tr><th>{key}</th>(.*?)</tr>", side)
        assert _cells(row)[0] == shown[key]
    assert not re.search(r"<th>(accuracy|mui)_(ci|n|stderr|ci_method)</th>", side)
    assert "Direction each task moved" in side

    out = CliRunner().invoke(compare, [str(a), str(b)]).output
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()}
    for key in ("accuracy", "mui"):
        assert rows[key].split()[1:6] == shown[key].split()[:5]  # value [lo, hi] n=6 method of A
        assert rows[key].count("n=6") == 2
    assert not any(re.match(r"(accuracy|mui)_(ci|n|stderr|ci_method)\b", k) for k in rows)
    assert re.search(r"^direction on arithmetic-gen:add1,mul1: \w+ \(accuracy / mui: ", out, re.M)


def test_a_run_written_the_older_way_is_still_read(old_mui_run, mui_run, tmp_path):
    """The older percent headline is read as the same estimates in fractions, so old and new
    runs line up row by row."""
    old = old_mui_run("old")
    html = write_report([old.path], tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<tr class=headline><th>accuracy</th><td>0.125 [0.0224, 0.4709] n=8</td></tr>" in html
    assert "<tr class=headline><th>mui</th><td>0.002279 [0.002022, 0.002535] n=8</td></tr>" in html
    assert not re.search(r"<tr class=headline><th>((accuracy|mui)_(ci_)?percent|n)</th>", html)
    assert "<th>by_group.add1.accuracy_ci_percent</th>" not in html
    assert "<th>by_group.add1.accuracy</th><td>1 [0.2065, 1] n=1</td>" in html  # n from its group
    new = mui_run("new", "ssd", 0.25, 0.002)
    out = CliRunner().invoke(compare, [str(old.path), str(new.path)])
    assert out.exit_code == 0, out.output
    rows = {line.split()[0]: line.split() for line in out.output.splitlines() if line.split()}
    assert rows["accuracy"][1:5] == ["0.125", "[0.0224,", "0.4709]", "n=8"] and rows["accuracy"][-1] == "+0.125"
    assert rows["mui"][-1] == "-0.000279"
    assert "direction on" not in out.output  # older runs declare no moves


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_no_suite_imports_the_report_and_the_report_imports_no_suite():
    suite_files = [p for s in SUITES for p in sorted((SRC / s).rglob("*.py"))]
    assert len(suite_files) > 20
    bad = [f"{p.relative_to(SRC)}: {n}" for p in suite_files for n in sorted(_imports(p))
           if n == "whitebox_eval.report" or n.startswith("whitebox_eval.report.")]
    assert not bad, bad
    report_files = sorted((SRC / "report").rglob("*.py"))
    bad = [f"{p.relative_to(SRC)}: {n}" for p in report_files for n in sorted(_imports(p))
           if any(n == f"whitebox_eval.{s}" or n.startswith(f"whitebox_eval.{s}.") for s in SUITES)]
    assert not bad, bad
