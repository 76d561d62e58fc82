"""runs/stages.py: a stage is computed once, written atomically, read back on resume, and
computed again when its file is torn, damaged or does not match the run."""

from __future__ import annotations

import numpy as np
import pytest

from whitebox_eval.runs.kept import JSON, NPY, kept, kept_path


def _counting(value):
    calls = []

    def compute():
        calls.append(1)
        return value

    return compute, calls


def test_a_json_stage_is_computed_once_and_returned_as_read_back(tmp_path):
    compute, calls = _counting({"a": (1, 2), "b": 0.1})
    first = kept(tmp_path, "s", compute)
    again = kept(tmp_path, "s", compute)
    assert first == again == {"a": [1, 2], "b": 0.1}  # a tuple comes back a list, both times
    assert len(calls) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]  # no temporary file left


def test_a_torn_or_unmatched_stage_is_computed_again(tmp_path):
    compute, calls = _counting({"tasks": ["x", "y"]})
    kept_path(tmp_path, "s", JSON).write_text('{"tasks": ["x"')  # cut short by a kill
    assert kept(tmp_path, "s", compute) == {"tasks": ["x", "y"]} and len(calls) == 1
    kept_path(tmp_path, "s", JSON).write_text('{"tasks": ["x"]}')  # an older run's output
    assert kept(tmp_path, "s", compute, valid=lambda v: v["tasks"] == ["x", "y"])["tasks"] == ["x", "y"]
    assert len(calls) == 2
    assert kept(tmp_path, "s", compute, valid=lambda v: v["tasks"] == ["x", "y"]) and len(calls) == 2


def test_an_npy_stage_keeps_the_exact_array_and_maps_it_on_request(tmp_path):
    x = np.arange(12, dtype=np.float16).reshape(3, 4) / 7
    compute, calls = _counting(x)
    got = kept(tmp_path, "resid", compute, kind=NPY, mmap=True)
    assert isinstance(got, np.memmap) and got.dtype == np.float16
    np.testing.assert_array_equal(got, x)
    np.testing.assert_array_equal(kept(tmp_path, "resid", compute, kind=NPY), x)
    assert len(calls) == 1
    kept_path(tmp_path, "resid", NPY).write_bytes(b"\x93NUMPY garbage")
    np.testing.assert_array_equal(kept(tmp_path, "resid", compute, kind=NPY), x)
    assert len(calls) == 2


def test_an_unknown_kind_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown kept kind"):
        kept(tmp_path, "s", dict, kind="pickle")
