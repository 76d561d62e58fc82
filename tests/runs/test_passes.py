"""The one resumable pass (runs/passes.py): parts, torn parts, lost sample lines, sharding order."""

from __future__ import annotations

import numpy as np
import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.atomic import disk_error
from whitebox_eval.runs.folder import RunFolder
from whitebox_eval.runs.passes import parts_dir, read_pass, run_pass


def scorer(calls: list[list[int]], ids):
    def score(idx):
        calls.append(list(idx))
        records = [{"id": ids[i], "x": i * 0.5, "text": f"item {i}\n\u2028é"} for i in idx]
        return records, {"sq": np.array([[i * i, -i] for i in idx], dtype=np.float32)}
    return score


def fresh(tmp_path, name="r"):
    return RunFolder.create(tmp_path, {"suite": "test"}, run_id=name)


def test_arrays_in_item_order_and_samples_streamed(tmp_path):
    folder, ids, calls = fresh(tmp_path), [f"q{i}" for i in range(10)], []
    out = run_pass(folder, "main", ids, 3, scorer(calls, ids), show_progress=False)
    assert calls == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    np.testing.assert_array_equal(out["sq"][:, 0], np.arange(10) ** 2)
    assert [s["id"] for s in folder.read_samples()] == ids
    assert len(sorted(parts_dir(folder, "main").glob("*.npz"))) == 4
    # a second call computes nothing and returns the same arrays
    again = run_pass(folder, "main", ids, 3, scorer(calls, ids), show_progress=False)
    assert len(calls) == 4
    np.testing.assert_array_equal(again["sq"], out["sq"])


def test_torn_part_is_set_aside_and_recomputed(tmp_path):
    ids, calls = [f"q{i}" for i in range(7)], []
    whole = fresh(tmp_path, "whole")
    ref = run_pass(whole, "main", ids, 2, scorer(calls, ids), show_progress=False)
    torn = fresh(tmp_path, "torn")
    run_pass(torn, "main", ids, 2, scorer([], ids), show_progress=False)
    part = parts_dir(torn, "main") / "00000002.npz"
    part.write_bytes(part.read_bytes()[:50])
    calls.clear()
    out = run_pass(torn, "main", ids, 2, scorer(calls, ids), show_progress=False)
    assert calls == [[2, 3]]
    np.testing.assert_array_equal(out["sq"], ref["sq"])
    assert (parts_dir(torn, "main") / "00000002.npz.unreadable").is_file()
    assert "unreadable" in (torn.path / "run.log").read_text()
    assert torn.samples_path.read_bytes() == whole.samples_path.read_bytes()  # no line twice


def test_cut_samples_file_is_restored_from_parts(tmp_path):
    ids, calls = [f"q{i}" for i in range(9)], []
    folder = fresh(tmp_path)
    run_pass(folder, "a", ids, 4, scorer(calls, ids), show_progress=False)
    other = [f"b{i}" for i in range(3)]
    run_pass(folder, "b", other, 2, scorer(calls, other), show_progress=False)
    whole = folder.samples_path.read_bytes()
    lines = whole.splitlines(keepends=True)
    folder.samples_path.write_bytes(b"".join(lines[:4]) + lines[4][:7])  # cut inside line 5
    resumed = RunFolder.open_for_resume(folder.path, {"suite": "test"})
    n = len(calls)
    run_pass(resumed, "a", ids, 4, scorer(calls, ids), show_progress=False)
    run_pass(resumed, "b", other, 2, scorer(calls, other), show_progress=False)
    assert len(calls) == n  # nothing recomputed: every line came back from the parts
    assert resumed.samples_path.read_bytes() == whole
    assert "restored" in (folder.path / "run.log").read_text()


def test_pass_without_samples_and_missing_rows(tmp_path):
    folder = fresh(tmp_path)
    out = run_pass(folder, "perm", list(range(5)), 2, lambda idx: (None, {"v": np.ones(len(idx))}),
                   show_progress=False, dtype=np.float64)
    assert out["v"].dtype == np.float64 and not folder.samples_path.exists()
    with pytest.raises(WhiteboxError, match="1 of 6 items have no scores"):
        read_pass(folder, "perm", 6)
    assert np.isnan(read_pass(folder, "perm", 6, require_all=False)["v"][5])


def test_record_ids_must_match(tmp_path):
    folder = fresh(tmp_path)
    with pytest.raises(ValueError, match="record id"):
        run_pass(folder, "x", ["a", "b"], 2, lambda idx: ([{"id": "b"}, {"id": "a"}], {}), show_progress=False)
    with pytest.raises(WhiteboxError, match="appears twice"):
        run_pass(folder, "y", ["a", "a"], 2, lambda idx: (None, {}), show_progress=False)


def test_short_write_is_a_disk_error(tmp_path):
    err = disk_error(OSError("25920 requested and 3040 written"), tmp_path)
    assert isinstance(err, WhiteboxError) and "disk is full" in str(err) and "--resume" in str(err)
    assert disk_error(OSError("something else"), tmp_path) is None


def test_a_batch_order_groups_items_but_keeps_item_order_on_output(tmp_path):
    ids, order = [f"q{i}" for i in range(7)], [6, 2, 4, 0, 5, 1, 3]
    plain = fresh(tmp_path, "plain")
    ref = run_pass(plain, "main", ids, 3, scorer([], ids), show_progress=False)
    folder, calls = fresh(tmp_path, "ordered"), []
    out = run_pass(folder, "main", ids, 3, scorer(calls, ids), show_progress=False, order=order)
    assert calls == [[6, 2, 4], [0, 5, 1], [3]]
    np.testing.assert_array_equal(out["sq"], ref["sq"])
    assert folder.samples_path.read_bytes() == plain.samples_path.read_bytes()  # item order, not batch order
    with pytest.raises(ValueError, match="permutation"):
        run_pass(folder, "other", ids, 3, scorer([], ids), show_progress=False, order=[0, 1])


def test_an_ordered_pass_resumes_after_a_kill(tmp_path):
    ids, order = [f"q{i}" for i in range(7)], [6, 2, 4, 0, 5, 1, 3]
    plain = fresh(tmp_path, "plain")
    run_pass(plain, "main", ids, 3, scorer([], ids), show_progress=False)
    folder = fresh(tmp_path, "killed")

    def dies_on_second_batch(idx, seen=[]):
        seen.append(idx)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return scorer([], ids)(idx)

    with pytest.raises(KeyboardInterrupt):
        run_pass(folder, "main", ids, 3, dies_on_second_batch, show_progress=False, order=order)
    assert [s["id"] for s in folder.read_samples()] == ["q6", "q2", "q4"]  # streamed in batch order meanwhile
    calls = []
    resumed = RunFolder.open_for_resume(folder.path, {"suite": "test"})
    run_pass(resumed, "main", ids, 3, scorer(calls, ids), show_progress=False, order=order)
    assert calls == [[0, 5, 1], [3]]
    assert resumed.samples_path.read_bytes() == plain.samples_path.read_bytes()
