"""Reading a claim's statistic out of a child's results.json: what the report says when the
child holds no such number (its own reason), a test's n from its two groups, and a claim
marked as not tested at a scale."""

from __future__ import annotations

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import spec, values


def test_an_undefined_estimate_gives_the_child_runs_reason():
    results = {"pearson,mcq~free": None, "pearson_reason,mcq~free": "no variance in free"}
    with pytest.raises(values.Missing, match="undefined in the child run: no variance in free"):
        values.estimate(results, {"key": "pearson,mcq~free"})
    with pytest.raises(values.Missing, match="is None in the child run"):  # no reason written
        values.estimate({"pearson,x": None}, {"key": "pearson,x"})


def test_a_test_not_written_for_an_empty_partition_says_so():
    results = {"mcq_by_free": {"partitions": {"free<0.5": {"n": 40}, "free>=0.5": {"n": 0}}}}
    with pytest.raises(values.Missing, match=r"no item in free>=0.5 \(mcq_by_free\)"):
        values.test(results, {"at": ["mcq_by_free", "test"]})
    with pytest.raises(values.Missing, match="no 'test' in mcq_by_free"):  # both partitions filled
        values.test({"mcq_by_free": {"partitions": {"a": {"n": 3}, "b": {"n": 4}}}}, {"at": ["mcq_by_free", "test"]})


def test_a_group_test_counts_both_groups():
    t = {"diff": -0.1, "diff_ci": [-0.2, 0.0], "p_value": 0.04, "n_correct": 5, "n_incorrect": 43,
         "test": "permutation of group labels"}
    got = values.test({"correct_vs_incorrect": t}, {"at": ["correct_vs_incorrect"]})
    assert got["n"] == 48 and (got["lo"], got["hi"]) == (-0.2, 0.0)
    assert values.test({"x": {**t, "n": 7}}, {"at": ["x"]})["n"] == 7


def test_not_at_marks_a_claim_as_not_run_at_that_scale():
    c = spec.papers()["001"].claims
    masking = next(x for x in c if x.id == "masking-key-below-random-accuracy")
    assert "quick" in masking.not_at and "paper" not in masking.not_at
    doc = {"paper": "9", "short": "x", "title": "t", "seed": "s.txt",
           "experiments": [{"id": "e", "suite": "mcqa", "title": "t", "settings": {}, "scales": {"micro": {}}}],
           "claims": [{"id": "c", "claim": "c", "cite": "Table 1", "experiment": "e", "stat": {"paired": "p"},
                       "direction": "greater", "not_at": {"huge": "why"}}]}
    with pytest.raises(WhiteboxError, match="not_at names unknown scales"):
        spec.parse_paper(doc, "x.yaml")


def test_a_zero_width_bootstrap_at_a_bound_is_read_as_wilson():
    """A child written before stats stopped bootstrapping constants: 12 items all at 0 give
    [0, 0]; the reader gives Wilson's [0, z^2 / (n + z^2)] = [0, 24.3%] instead."""
    results = {"p_correct,free": 0.0, "p_correct_ci,free": [0.0, 0.0], "p_correct_n,free": 12,
               "p_correct_ci_method,free": "bootstrap"}
    got = values.estimate(results, {"key": "p_correct,free"})
    assert (got["lo"], got["method"]) == (0.0, "wilson_at_bound")
    assert got["hi"] == pytest.approx(1.959964 ** 2 / (12 + 1.959964 ** 2), abs=1e-6)
    kept = values.estimate({**results, "p_correct,free": 0.2, "p_correct_ci,free": [0.1, 0.3]}, {"key": "p_correct,free"})
    assert (kept["lo"], kept["hi"], kept["method"]) == (0.1, 0.3, "bootstrap")
