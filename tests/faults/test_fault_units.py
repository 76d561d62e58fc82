"""Unit checks behind the fault cases: the GGUF cache key, atomic array parts, the
safetensors check, the probe-file loaders and the report of a corrupted results.json."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.models import loading  # noqa: E402
from whitebox_eval.runs.parts import read_parts, write_part  # noqa: E402


# ---------------------------------------------------------------------- GGUF cache


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    """A 3 MiB stand-in GGUF file, a private cache and a dequantizer that records its calls."""
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))
    calls = []

    def dequantize(gguf, target):
        calls.append(target)
        target.mkdir(parents=True)
        (target / "config.json").write_text(json.dumps({"from": gguf.read_bytes()[-8:].hex()}))

    monkeypatch.setattr(loading, "_dequantize_gguf_to_cache", dequantize)
    path = tmp_path / "model.gguf"
    path.write_bytes(np.random.default_rng(0).bytes(3 << 20))
    return path, calls


def _edit_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_editing_one_byte_near_the_end_of_a_gguf_gives_a_new_cache_entry(fake_gguf):
    path, calls = fake_gguf
    first = loading._cached_gguf(path)
    assert loading._cached_gguf(path) == first and len(calls) == 1  # cached
    st = path.stat()
    _edit_byte(path, st.st_size - 10)  # same name, same size, same first MiB
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    second = loading._cached_gguf(path)
    assert second != first and len(calls) == 2
    assert json.loads((Path(second) / "config.json").read_text())["from"] == path.read_bytes()[-8:].hex()


def test_gguf_hash_is_reused_only_while_size_and_mtime_are_unchanged(fake_gguf):
    import hashlib

    path, _ = fake_gguf
    digest = loading.gguf_sha256(path)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    record = next((loading.cache_root() / "gguf" / "hashes").glob("*.json"))
    stored = json.loads(record.read_text())
    record.write_text(json.dumps({**stored, "sha256": "f" * 64}))
    assert loading.gguf_sha256(path) == "f" * 64  # same size, mtime, inode: the record is trusted
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert loading.gguf_sha256(path) == digest  # touched: hashed again


# ---------------------------------------------------------------------- array parts


def test_a_failed_part_write_leaves_neither_a_part_nor_a_temporary_file(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WhiteboxError, match="the disk is full"):
        write_part(tmp_path / "00000000.npz", index=np.arange(3))
    assert list(tmp_path.iterdir()) == []


def test_read_parts_skips_and_sets_aside_an_unreadable_part(tmp_path):
    write_part(tmp_path / "00000000.npz", index=np.arange(2), x=np.ones((2, 3)))
    write_part(tmp_path / "00000002.npz", index=np.arange(2, 4), x=np.zeros((2, 3)))
    torn = tmp_path / "00000002.npz"
    torn.write_bytes(torn.read_bytes()[:100])
    (tmp_path / "00000004.npz").write_bytes(b"")
    notes = []
    got = list(read_parts(tmp_path, notes.append))
    assert [p.name for p, _ in got] == ["00000000.npz"]
    np.testing.assert_array_equal(got[0][1]["x"], np.ones((2, 3)))
    assert len(notes) == 2 and all("is unreadable" in n for n in notes)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000.npz", "00000002.npz.unreadable", "00000004.npz.unreadable"]


# ---------------------------------------------------------------------- safetensors


def test_check_safetensors_accepts_a_good_file_and_names_a_bad_one(tmp_path):
    import torch
    from safetensors.torch import save_file

    good = tmp_path / "good.safetensors"
    save_file({"w": torch.ones(4, 4)}, str(good))
    loading.check_safetensors(good)
    data = good.read_bytes()
    for name, content, why in [("empty", b"", "the file is empty"), ("short", data[:5], "only 5 bytes"),
                               ("cut", data[:-1], "truncated"), ("header", b"\x04" + b"\x00" * 7 + b"{{{{" + data[12:],
                                                                "corrupted header")]:
        bad = tmp_path / f"{name}.safetensors"
        bad.write_bytes(content)
        with pytest.raises(WhiteboxError, match=rf"{name}\.safetensors is not a readable safetensors file \({why}"):
            loading.check_safetensors(bad)


# ---------------------------------------------------------------------- probe files


def test_snli_null_sentence_is_a_bad_row(fixtures):
    from whitebox_eval.gar.probe import load_snli

    with pytest.raises(WhiteboxError, match=r"snli_null\.jsonl:3: sentence2 is None"):
        load_snli(fixtures / "snli_null.jsonl")
    with pytest.warns(UserWarning, match="skipped 1 malformed row"):
        rows = load_snli(fixtures / "snli_null.jsonl", on_bad_row="skip")
    assert len(rows) == 12 and "snli_null.jsonl:3" not in [r.source for r in rows]
    assert rows.bad_rows == [f"{fixtures / 'snli_null.jsonl'}:3: sentence2 is None; both sentences must be text"]


def test_geometry_of_truth_in_latin1_names_the_line(fixtures):
    from whitebox_eval.gar.probe import load_geometry_of_truth

    with pytest.raises(WhiteboxError, match=r"got_latin1\.csv:3: not UTF-8 text \(byte 0xFC\)"):
        load_geometry_of_truth(fixtures / "got_latin1.csv")
    with pytest.warns(UserWarning):
        rows = load_geometry_of_truth(fixtures / "got_latin1.csv", on_bad_row="skip")
    assert len(rows) == 12 and "got_latin1.csv:3" not in [r.source for r in rows]
    assert rows[0].source == "got_latin1.csv:2" and rows[0].label == 0 and rows[1].label == 1
    with pytest.raises(WhiteboxError, match=r"got_binary\.csv:1: "):
        load_geometry_of_truth(fixtures / "got_binary.csv", on_bad_row="skip")


# ---------------------------------------------------------------------- report


def test_report_of_a_corrupted_results_json_shows_a_warning_and_the_rest(fixtures, cli, tmp_path):
    out = tmp_path / "r.html"
    code, _, err = cli(["report", str(fixtures / "runs" / "corrupt"), "--out", str(out)])
    assert code == 0 and "results.json is corrupted" in err
    page = out.read_text()
    assert "Warning: results.json is unreadable" in page
    assert "q1" in page and "qk_head_accuracy" in page  # samples and arrays still shown


# ---------------------------------------------------------------------- OSError -> one line


def test_disk_error_names_the_run_folder_or_the_file(tmp_path):
    import errno

    from whitebox_eval.runs import RunFolder
    from whitebox_eval.runs.folder import disk_error, start_command

    start_command()
    assert disk_error(OSError(errno.ENOSPC, "No space left on device")).args[0].startswith(
        "cannot write the output: the disk is full")
    folder = RunFolder.create(tmp_path, {"suite": "t"}, run_id="r")
    full = disk_error(OSError(errno.ENOSPC, "No space left on device"))
    assert str(full).startswith(f"cannot write to {folder.path}: the disk is full") and "--resume" in str(full)
    inner = disk_error(OSError(errno.EROFS, "Read-only file system"), folder.path / "arrays" / "parts" / "main")
    assert str(inner).startswith(f"cannot write to {folder.path}: the file system is read-only")
    denied = disk_error(PermissionError(errno.EACCES, "Permission denied", "/data/x.csv"))
    assert str(denied).startswith("cannot access /data/x.csv: permission denied")
    assert disk_error(FileNotFoundError(errno.ENOENT, "No such file")) is None
    start_command()
