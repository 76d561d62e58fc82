"""Intervals beside their metric and paired tests in words, for any suite that writes them
with whitebox_eval.stats (``acc,x`` + ``acc_ci,x`` ..., ``paired_tests``)."""

from __future__ import annotations

import re

from click.testing import CliRunner

from whitebox_eval import stats
from whitebox_eval.report import write_report
from whitebox_eval.report.command import compare
from whitebox_eval.report.moves import headline_rows
from whitebox_eval.report.metrics import paired_rows
from whitebox_eval.runs.estimates import estimate_rows, format_estimate
from whitebox_eval.report.rundata import load_run
from whitebox_eval.runs import RunFolder


def _results() -> dict:
    head: dict = {}
    stats.add_proportion(head, "acc,baseline", [1] * 6 + [0] * 4)   # 0.6 of 10
    stats.add_proportion(head, "acc,qk_head", [1] * 8 + [0] * 2)    # 0.8 of 10
    head["plain_metric,x"] = 0.5                                      # no interval: shown as is
    res = {"headline": head, "other": {}}
    stats.add_mean(res["other"], "score,gar", [0.1, 0.2, 0.3, 0.4])  # nested, bootstrap
    stats.add_paired(res, "qk_head_vs_baseline", stats.mcnemar([1] * 8 + [0] * 2, [1] * 6 + [0] * 4))
    stats.add_paired(res, "big_vs_small", stats.mcnemar([1] * 40 + [0] * 10, [0] * 40 + [1] * 10))
    return res


def test_estimate_rows_fold_the_derived_keys_into_their_metric():
    res = _results()
    rows = estimate_rows(res["headline"], res)
    assert [k for k, _, _ in rows] == ["acc,baseline", "acc,qk_head", "plain_metric,x"]
    lo, hi = stats.wilson(6, 10)
    assert rows[0][2] == {"lo": lo, "hi": hi, "n": 10, "method": "wilson"}
    assert rows[2][2] is None
    assert format_estimate(0.6, rows[0][2]) == f"0.6 [{lo:.4g}, {hi:.4g}] n=10 wilson"


def test_a_headline_metric_finds_its_interval_at_the_top_level():
    """Suites that write ``acc_ci,x`` beside ``acc,x`` at the top of results.json and copy
    only the value into the headline still get the interval shown."""
    res: dict = {}
    stats.add_proportion(res, "acc,ood", [1, 0, 1, 1])
    res["headline"] = {"acc,ood": res["acc,ood"]}
    (row,) = estimate_rows(res["headline"], res)
    assert row[2]["n"] == 4 and row[2]["method"] == "wilson"


def test_paired_rows_say_in_words_when_not_significant():
    rows = {r["name"]: r for r in paired_rows(_results())}
    # b = 2, c = 0: exact two-sided p = 2 * 0.5**2 = 0.5
    assert abs(rows["qk_head_vs_baseline"]["p_value"] - 0.5) < 1e-12
    assert rows["qk_head_vs_baseline"]["verdict"].startswith("NOT significant")
    assert rows["big_vs_small"]["verdict"] == "significant at 0.05"


def test_report_shows_intervals_beside_metrics_and_a_paired_test_table(tmp_path):
    folder = RunFolder.create(tmp_path, {"suite": "mcqa", "model": "m", "task": "t"}, run_id="r")
    folder.save_results(_results())
    html = write_report([folder.path], tmp_path / "r.html").read_text(encoding="utf-8")
    lo, hi = stats.wilson(8, 10)
    assert f"0.8 [{lo:.4g}, {hi:.4g}] n=10 wilson" in html
    assert not re.search(r"<th>acc_ci,|<th>acc_n,|<th>acc_stderr,|<th>acc_ci_method,", html)  # folded, not rows
    assert "<th>other.score,gar</th>" in html and "n=4 bootstrap" in html
    assert "Paired tests" in html and "<th>qk_head_vs_baseline</th>" in html
    assert "NOT significant: n is too small to tell this difference from chance" in html
    assert "<th>paired_tests." not in html  # the table, not flattened rows


def test_side_by_side_and_compare_carry_the_intervals(tmp_path):
    runs = []
    for name, k in (("a", 6), ("b", 8)):
        folder = RunFolder.create(tmp_path, {"suite": "mcqa", "model": "m", "task": "t"}, run_id=name)
        head: dict = {}
        stats.add_proportion(head, "acc,baseline", [1] * k + [0] * (10 - k))
        folder.save_results({"headline": head})
        runs.append(folder.path)
    rows = headline_rows([load_run(p) for p in runs])
    assert [r.metric for r in rows] == ["acc,baseline"]
    assert rows[0].values == [0.6, 0.8] and rows[0].intervals[1]["n"] == 10
    out = CliRunner().invoke(compare, [str(p) for p in runs]).output
    line = next(x for x in out.splitlines() if x.startswith("acc,baseline"))
    assert "n=10 wilson" in line and line.rstrip().endswith("+0.2")
