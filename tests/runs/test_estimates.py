"""Reading and printing estimates (whitebox_eval.runs.estimates): the one reader and formatter
every command's summary, report.html and compare use."""

from __future__ import annotations

from whitebox_eval import stats
from whitebox_eval.runs.estimates import (describe, estimate_rows, format_estimate, format_number, headline_lines,
                                          interval)


def _results() -> dict:
    res: dict = {"headline": {}}
    stats.add_proportion(res["headline"], "acc,baseline", [1] * 6 + [0] * 4)  # in the headline
    stats.add_mean(res, "p_target", [0.1, 0.2, 0.3, 0.4])                      # at the top level only
    res["headline"]["p_target"] = res["p_target"]
    res["headline"]["label"] = "x"
    return res


def test_interval_reads_the_keys_stats_writes():
    res = _results()
    lo, hi = stats.wilson(6, 10)
    assert interval("acc,baseline", res["headline"]) == {"lo": lo, "hi": hi, "n": 10, "method": "wilson"}
    assert interval("p_target", res["headline"]) is None  # not in that mapping
    assert interval("p_target", res["headline"], res)["method"] == "bootstrap"
    assert interval("acc,baseline", {"acc,baseline": 0.6, "acc_ci,baseline": "broken"}) is None


def test_estimate_rows_fold_every_derived_key_into_its_metric():
    res = _results()
    rows = estimate_rows(res["headline"], res)
    assert [k for k, _, _ in rows] == ["acc,baseline", "p_target", "label"]
    assert rows[0][2]["n"] == 10 and rows[1][2]["n"] == 4 and rows[2][2] is None
    # a metric without an interval keeps a key that only looks derived
    assert [k for k, _, _ in estimate_rows({"x": 1.0, "x_n": 3})] == ["x", "x_n"]


def test_older_percent_pairs_are_read_as_one_estimate_in_fractions():
    """Runs written before the contract hold ``name_percent`` beside ``name_ci_percent`` (and ``n``)."""
    head = {"accuracy_percent": 12.5, "accuracy_ci_percent": [2.5, 47.5], "mui_percent": 0.25, "n": 8}
    rows = estimate_rows(head)
    assert [k for k, _, _ in rows] == ["accuracy", "mui_percent"]  # n went into the interval
    assert rows[0][1:] == (0.125, {"lo": 0.025, "hi": 0.475, "n": 8, "method": None})
    assert rows[1][2] is None  # no interval beside it: left as it is
    assert format_estimate(rows[0][1], rows[0][2], ".1%") == "12.5% [2.5%, 47.5%] n=8"
    # never renamed onto a key the mapping already has, and without n the n row stays
    both = {"accuracy": 0.1, "accuracy_percent": 10.0, "accuracy_ci_percent": [1.0, 20.0], "n": 3}
    assert [k for k, _, _ in estimate_rows(both)] == ["accuracy", "accuracy_percent", "accuracy_ci_percent", "n"]
    assert [k for k, _, _ in estimate_rows({"x_percent": 1.0, "x_ci_percent": [0.5, 2.0]})] == ["x"]
    flat = {"n": 99, "g.a.acc_percent": 50.0, "g.a.acc_ci_percent": [10.0, 90.0], "g.a.n": 2}  # report's dotted rows
    assert estimate_rows(flat) == [("n", 99, None), ("g.a.acc", 0.5, {"lo": 0.1, "hi": 0.9, "n": 2, "method": None})]


def test_format_estimate_one_line_with_a_spec():
    ci = {"lo": 0.3702, "hi": 0.45551, "n": 475, "method": "wilson"}
    assert format_estimate(0.41234, ci) == "0.4123 [0.3702, 0.4555] n=475 wilson"
    assert format_estimate(0.41234, ci, "6.1%") == " 41.2% [37.0%, 45.6%] n=475 wilson"
    assert format_estimate(0.41234, ci, "+.3f", n=False, method=False) == "+0.412 [+0.370, +0.456]"
    assert format_estimate(0.5, None, ".1%") == "50.0%"
    assert format_estimate(None, ci) == "n/a"
    est = stats.proportion([1, 1, 0, 0])
    assert format_estimate(est, spec=".1%") == f"50.0% [{est.lo:.1%}, {est.hi:.1%}] n=4 wilson"
    assert format_number(3) == "3" and format_number(1234567) == "1234567" and format_number(1 / 3) == "0.3333"
    assert format_number(float("nan")) == "nan" and format_number("text") == "text"


def test_describe_and_headline_lines():
    res = _results()
    lo, hi = stats.wilson(6, 10)
    assert describe(res["headline"], "acc,baseline", ".1%") == f"60.0% [{lo:.1%}, {hi:.1%}] n=10"
    assert describe(res["headline"], "acc,baseline", ".1%", n=False, method=True) == \
        f"60.0% [{lo:.1%}, {hi:.1%}] wilson"
    assert describe(res, "missing") == "n/a"
    lines = headline_lines(res, "6.1%")
    assert lines[0] == f"  {'acc,baseline':28s}  60.0% [{lo:.1%}, {hi:.1%}] n=10 wilson"
    assert lines[1].split()[-2:] == ["n=4", "bootstrap"]  # its interval found at the top level
    assert lines[2] == f"  {'label':28s} x"
    assert headline_lines({}) == []
