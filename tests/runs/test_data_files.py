"""config.yaml ``data_files``: what a run read, by sha256; --resume refuses changed data."""

from __future__ import annotations

import hashlib

import pytest

from whitebox_eval import datafiles
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs import RunFolder
from whitebox_eval.runs import data_files as df


def test_file_record_streams_in_chunks_and_equals_hashlib(tmp_path, monkeypatch):
    path = tmp_path / "big.jsonl"
    data = b"".join(f'{{"i": {i}, "t": "\u00e9t\u00e9"}}\n'.encode() for i in range(5000))
    path.write_bytes(data)
    monkeypatch.setattr(df, "CHUNK", 4096)  # many chunks, a partial last one
    rec = df.file_record(path)
    assert rec == {"path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    assert df.file_record(empty)["sha256"] == hashlib.sha256(b"").hexdigest()
    with pytest.raises(WhiteboxError, match="cannot read"):
        df.file_record(tmp_path / "missing.csv")


def test_recording_collects_each_opened_file_once_in_order(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"x": 1}\n')
    b.write_text('{"x": 2}\n')
    with datafiles.recording() as outer:
        list(datafiles.json_lines(b))
        with datafiles.recording() as inner:
            list(datafiles.json_lines(a))
        list(datafiles.json_lines(b))
    list(datafiles.json_lines(a))  # after the block: not recorded
    assert outer == [b, a] and inner == [a]
    assert [r["path"] for r in df.data_file_records([b, a, b])] == [str(b), str(a)]


def test_mmlu_folder_and_dev_split_are_all_recorded(tmp_path):
    from whitebox_eval.tasks import load_mcq_dataset

    for split in ("test", "dev"):
        (tmp_path / split).mkdir()
        for subject in ("anatomy", "virology"):
            (tmp_path / split / f"{subject}_{split}.csv").write_text("q?,a,b,c,d,A\nr?,a,b,c,d,B\n")
    with datafiles.recording() as read:
        load_mcq_dataset("mmlu", tmp_path / "test", limit=1)  # the limit does not skip a file
        load_mcq_dataset("mmlu", tmp_path / "dev" / "virology_dev.csv")
    assert [p.name for p in read] == ["anatomy_test.csv", "virology_test.csv", "virology_dev.csv"]


def _records(tmp_path, text: str):
    f = tmp_path / "task.jsonl"
    f.write_text(text)
    return df.data_file_records([f])


def test_changes_are_named_in_one_line(tmp_path):
    old = _records(tmp_path, "one\n")
    assert df.data_files_change(old, old) is None
    assert df.data_files_change(None, old) is None  # runs from before data files were recorded
    new = _records(tmp_path, "two!\n")
    msg = df.data_files_change(old, new)
    assert msg.startswith(f"data file {tmp_path / 'task.jsonl'} changed since the run started")
    assert "4 -> 5 bytes" in msg and "\n" not in msg
    extra = new + [{"path": "other.csv", "sha256": "0", "bytes": 1}]
    assert "other.csv is read now but was not read" in df.data_files_change(new, extra)
    assert "other.csv was read by this run but not" in df.data_files_change(extra, new)


def test_resume_refuses_changed_data(tmp_path):
    config = {"suite": "mcqa", "model": "m", "task": "hellaswag=x", "data_files": _records(tmp_path, "one\n")}
    RunFolder.create(tmp_path / "runs", config, run_id="r")
    RunFolder.create(tmp_path / "runs", config, run_id="r", resume=True)  # unchanged: resumes
    changed = {**config, "data_files": _records(tmp_path, "two\n")}
    with pytest.raises(WhiteboxError, match=r"cannot resume .*: data file .*task.jsonl changed since the run started") as e:
        RunFolder.create(tmp_path / "runs", changed, run_id="r", resume=True)
    assert "\n" not in str(e.value)
    # a run written before data files were recorded still resumes
    legacy = {k: v for k, v in config.items() if k != "data_files"}
    RunFolder.create(tmp_path / "runs", legacy, run_id="old")
    RunFolder.create(tmp_path / "runs", config, run_id="old", resume=True)


def test_a_hub_dataset_records_its_exported_cache_file(tmp_path, monkeypatch):
    from whitebox_eval.tasks.loading import load_from_hub

    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))
    rows = [{"question": "Sky?", "choices": {"text": ["blue", "green"], "label": ["A", "B"]}, "answerKey": "A"}]
    with datafiles.recording() as read:
        load_from_hub("arc", "allenai/ai2_arc:ARC-Challenge@test", load_dataset=lambda *a, **k: rows)
    assert len(read) == 1 and read[0].parent == tmp_path / "cache" / "datasets" and read[0].suffix == ".jsonl"
    rec = df.data_file_records(read)[0]
    assert rec["sha256"] == hashlib.sha256(read[0].read_bytes()).hexdigest()
    with datafiles.recording() as again:  # the second time the cache is read, not the hub: same file
        load_from_hub("arc", "allenai/ai2_arc:ARC-Challenge@test", load_dataset=lambda *a, **k: [])
    assert df.data_file_records(again) == [rec]
