"""The run folder: config round trip, streamed samples, resume, results, listing."""

from __future__ import annotations

import io
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

import whitebox_eval
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs import RunFolder, default_run_id, list_runs, plain_value, progress

CONFIG = {"suite": "mcqa", "model": "smollm2-135m", "task": "ssd", "seed": 0,
          "methods": ["baseline", "qk"], "batch_size": 8, "output": "runs/x",
          "_volatile": ["batch_size", "output"], "command": "whitebox-eval mcqa --task ssd"}


def make_run(tmp_path: Path, **overrides) -> RunFolder:
    return RunFolder.create(tmp_path, {**CONFIG, **overrides}, run_id="r1")


# ---------------------------------------------------------------- config


def test_config_round_trip_records_versions_and_command(tmp_path):
    run = RunFolder.create(tmp_path, {**CONFIG, "scale": np.float32(0.5), "path": Path("a/b"),
                                      "shape": (2, 3)}, run_id="r1")
    stored = yaml.safe_load((run.path / "config.yaml").read_text())
    assert stored["methods"] == ["baseline", "qk"]
    assert stored["scale"] == 0.5 and stored["path"] == "a/b" and stored["shape"] == [2, 3]
    assert stored["whitebox_eval_version"] == whitebox_eval.__version__
    assert stored["torch_version"] == torch.__version__
    import transformers

    assert stored["transformers_version"] == transformers.__version__
    assert re.fullmatch(r"3\.\d+\.\d+.*", stored["python_version"])
    assert stored["command"] == CONFIG["command"]
    assert stored["run_id"] == "r1"
    assert RunFolder.open(run.path).config == stored
    assert not list(run.path.glob(".*.tmp"))  # atomic write left no temp file


def test_default_run_id_is_timestamp_suite_model_task_sanitised(tmp_path):
    when = datetime(2024, 5, 1, 12, 30, 45, tzinfo=UTC)
    run_id = default_run_id({"suite": "mui", "model": "./ckpts/my model/", "task": "a/b c"},
                            when)
    assert run_id == "20240501-123045-mui-my-model-a-b-c"
    assert default_run_id({"model": "HuggingFaceTB/SmolLM2-135M"}, when) == \
        "20240501-123045-HuggingFaceTB-SmolLM2-135M"
    first = RunFolder.create(tmp_path, {"suite": "gar"})
    second = RunFolder.create(tmp_path, {"suite": "gar"})
    assert first.path != second.path  # same second, same keys: still two folders
    assert re.fullmatch(r"\d{8}-\d{6}-gar(-\d+)?", first.run_id)


def test_bad_run_id_is_refused(tmp_path):
    with pytest.raises(WhiteboxError, match="plain folder name"):
        RunFolder.create(tmp_path, CONFIG, run_id="../escape")


# ---------------------------------------------------------------- samples and resume


def test_samples_stream_and_resume_skips_done_ids(tmp_path):
    from whitebox_eval.runs.passes import run_pass

    items = [f"question {i}" for i in range(7)]
    ids = [f"q{i}" for i in range(7)]
    run, seen = make_run(tmp_path), []

    def score(batch, stop_after=None):
        seen.append([ids[i] for i in batch])
        if stop_after is not None and len(seen) > stop_after:
            raise KeyboardInterrupt  # interrupted mid-pass
        return [{"id": ids[i], "answer": items[i].upper()} for i in batch], {}

    with pytest.raises(KeyboardInterrupt):
        run_pass(run, "p", ids, 3, lambda b: score(b, stop_after=1), show_progress=False)
    # interrupted here; resume with a different batch size (volatile) and output
    resumed = RunFolder.create(tmp_path, {**CONFIG, "batch_size": 2, "output": "elsewhere"},
                               run_id="r1", resume=True)
    assert resumed.done_ids() == {"q0", "q1", "q2"}
    seen.clear()
    run_pass(resumed, "p", ids, 2, score, show_progress=False)
    assert seen == [["q3", "q4"], ["q5", "q6"]]
    samples = list(resumed.read_samples())
    assert [s["id"] for s in samples] == ids
    assert samples[4]["answer"] == "QUESTION 4"


def test_resume_with_different_config_names_each_key(tmp_path):
    make_run(tmp_path).append_samples([{"id": 1}])
    with pytest.raises(WhiteboxError) as err:
        RunFolder.create(tmp_path, {**CONFIG, "seed": 1, "task": "mmlu", "batch_size": 64},
                         run_id="r1", resume=True)
    message = str(err.value)
    assert "seed: 0 (this run) -> 1 (now)" in message
    assert "task: 'ssd' (this run) -> 'mmlu' (now)" in message
    assert "batch_size" not in message  # volatile
    assert "--output" in message and "--resume" in message


def test_resume_reports_added_and_removed_nested_keys(tmp_path):
    make_run(tmp_path, engine={"chunk": 4}).append_samples([{"id": 1}])
    with pytest.raises(WhiteboxError) as err:
        RunFolder.open_for_resume(tmp_path / "r1", {**CONFIG, "engine": {"prefix": True}})
    assert "engine.chunk: 4 (this run) -> <absent> (now)" in str(err.value)
    assert "engine.prefix: <absent> (this run) -> True (now)" in str(err.value)


def test_resume_without_run_folder_says_so(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(WhiteboxError, match="no config.yaml"):
        RunFolder.open_for_resume(tmp_path / "plain", CONFIG)


def test_truncated_last_line_is_ignored_and_cut_on_resume(tmp_path):
    run = make_run(tmp_path)
    run.append_samples([{"id": 0, "x": 1}, {"id": 1, "x": 2}])
    with open(run.samples_path, "ab") as f:  # killed mid-write
        f.write(b'{"id": 2, "x": [1, 2')
    assert run.done_ids() == {0, 1}
    assert [s["id"] for s in run.read_samples()] == [0, 1]
    resumed = RunFolder.open_for_resume(run.path, CONFIG)
    assert run.samples_path.read_bytes().endswith(b'"x": 2}\n')
    resumed.append_samples([{"id": 2, "x": 3}])
    lines = run.samples_path.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [0, 1, 2]
    assert "dropped a half-written last line" in (run.path / "run.log").read_text()


def test_complete_last_record_missing_only_newline_is_kept(tmp_path):
    run = make_run(tmp_path)
    run.samples_path.write_text('{"id": "a"}\n{"id": "b"}')
    assert RunFolder.open_for_resume(run.path, CONFIG).done_ids() == {"a", "b"}
    assert run.samples_path.read_text() == '{"id": "a"}\n{"id": "b"}\n'


def test_corrupt_middle_line_raises_with_line_number(tmp_path):
    run = make_run(tmp_path)
    run.samples_path.write_text('{"id": 1}\nnot json\n{"id": 3}\n')
    with pytest.raises(WhiteboxError, match="line 2"):
        run.done_ids()


def test_refuses_to_overwrite_finished_work(tmp_path):
    make_run(tmp_path).append_samples([{"id": 1}])
    with pytest.raises(WhiteboxError, match="--resume.*--output"):
        make_run(tmp_path)
    assert (tmp_path / "r1" / "samples.jsonl").read_text() == '{"id": 1}\n'


def test_duplicate_or_missing_ids_are_rejected_before_writing(tmp_path):
    run = make_run(tmp_path)
    run.append_samples([{"id": "a"}])
    with pytest.raises(WhiteboxError, match="'a' appears twice"):
        run.append_samples([{"id": "b"}, {"id": "a"}])
    with pytest.raises(WhiteboxError, match="no usable 'id'"):
        run.append_samples([{"answer": 3}])
    from whitebox_eval.runs.passes import run_pass

    with pytest.raises(WhiteboxError, match="appears twice"):
        run_pass(run, "p", ["c", "c"], 4, lambda b: (None, {}), show_progress=False)
    with pytest.raises(WhiteboxError, match="batch size"):
        run_pass(run, "p", ["c"], 0, lambda b: (None, {}), show_progress=False)
    assert run.done_ids() == {"a"}  # the rejected batch wrote nothing


def test_numpy_torch_and_nan_become_plain_json(tmp_path):
    run = make_run(tmp_path)
    run.append_samples([{
        "id": np.int64(7), "score": np.float32(0.25), "nan": float("nan"),
        "inf": np.float64("inf"), "flag": np.bool_(True),
        "vector": np.array([1.0, np.nan]), "tensor": torch.tensor([[1, 2], [3, 4]]),
        "half": torch.tensor([0.5, float("nan")], dtype=torch.bfloat16),
    }])
    line = run.samples_path.read_text()
    assert "NaN" not in line and "Infinity" not in line
    sample = json.loads(line)
    assert sample == {"id": 7, "score": 0.25, "nan": None, "inf": None, "flag": True,
                      "vector": [1.0, None], "tensor": [[1, 2], [3, 4]], "half": [0.5, None]}
    assert run.done_ids() == {7}


def test_plain_value_rejects_unknown_objects():
    with pytest.raises(TypeError, match="object"):
        plain_value({"x": object()})


# ---------------------------------------------------------------- results, arrays, plots


def test_results_arrays_plots_and_log(tmp_path):
    run = make_run(tmp_path)
    path = run.save_results({"per_task": {"b": 1, "a": float("nan")},
                             "headline": {"accuracy": np.float64(0.75), "auc": 0.5}})
    text = path.read_text()
    assert "NaN" not in text and text.index('"headline"') < text.index('"per_task"')
    assert text.index('"a"') < text.index('"b"')  # sorted
    assert run.load_results() == {"headline": {"accuracy": 0.75, "auc": 0.5},
                                  "per_task": {"a": None, "b": 1}}
    scores = np.arange(12, dtype=np.float32).reshape(3, 4)
    run.save_array("head_scores", scores)
    run.save_array("bf16", torch.ones(2, dtype=torch.bfloat16))
    np.testing.assert_array_equal(run.load_array("head_scores"), scores)
    assert run.load_array("bf16").dtype == np.float32
    with pytest.raises(WhiteboxError, match="bf16, head_scores"):
        run.load_array("missing")
    with pytest.raises(ValueError):
        run.save_array("../x", scores)
    assert run.plot_path("heads") == run.path / "plots" / "heads.png"
    assert run.plot_path("heads").parent.is_dir()
    run.log("batch 1 done")
    assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ batch 1 done$",
                     (run.path / "run.log").read_text(), re.M)
    assert not list(run.path.rglob("*.tmp"))


def test_load_results_of_unfinished_run_raises(tmp_path):
    with pytest.raises(WhiteboxError, match="did not finish"):
        make_run(tmp_path).load_results()


def test_list_runs_summarises_each_folder(tmp_path):
    done = RunFolder.create(tmp_path, CONFIG, run_id="a")
    done.append_samples([{"id": i} for i in range(3)])
    done.save_results({"headline": {"mcqa_accuracy": 0.5, "auc": 0.9}})
    RunFolder.create(tmp_path, {**CONFIG, "suite": "mui", "task": "arith"}, run_id="b")
    (tmp_path / "not-a-run").mkdir()
    runs = list_runs(tmp_path)
    assert [r.id for r in runs] == ["a", "b"]
    a, b = runs
    assert (a.suite, a.model, a.task, a.n_samples) == ("mcqa", "smollm2-135m", "ssd", 3)
    assert (a.headline, a.headline_value) == ("mcqa_accuracy", 0.5)
    assert (b.suite, b.n_samples, b.headline) == ("mui", 0, None)
    assert a.created and a.path == tmp_path / "a"
    with pytest.raises(WhiteboxError, match="no runs folder"):
        list_runs(tmp_path / "nowhere")


# ---------------------------------------------------------------- progress


def test_progress_passes_items_through_and_can_be_forced(monkeypatch, capsys):
    assert list(progress(range(3), total=3, desc="x", enabled=False)) == [0, 1, 2]
    assert capsys.readouterr().err == ""
    assert list(progress(iter("ab"), total=2, desc="forced", enabled=True)) == ["a", "b"]
    assert "forced" in capsys.readouterr().err
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a TTY: plain lines, no bar
    assert list(progress([1], total=1, desc="auto")) == [1]
    assert sys.stderr.getvalue().splitlines()[-1].startswith("auto: 1/1 (100%)")
    assert "\r" not in sys.stderr.getvalue()


def test_progress_lines_every_tenth_and_every_minute_and_in_run_log(monkeypatch, tmp_path):
    """Under nohup / CI / a redirect, a long loop says where it is: stderr and run.log."""
    monkeypatch.setattr(sys.modules["whitebox_eval.runs.progress"], "_log_sink", None)  # restored after
    monkeypatch.delenv("WHITEBOX_PROGRESS", raising=False)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    run = RunFolder.create(tmp_path, {"suite": "t"}, run_id="r")  # becomes the progress log
    now = [0.0]

    def clock():
        return now[0]

    for _ in progress(range(20), desc="batches", clock=clock):
        now[0] += 3.0  # 3 s per item: 10% = 2 items
    lines = sys.stderr.getvalue().splitlines()
    assert len(lines) == 10 and lines[0].startswith("batches: 2/20 (10%)")
    assert lines[-1] == "batches: 20/20 (100%), 3 s/it, elapsed 1:00"
    assert "ETA 0:54" in lines[0]
    log = (run.path / "run.log").read_text()
    assert "batches: 20/20 (100%)" in log and "batches: 2/20 (10%)" in log

    sys.stderr.truncate(0), sys.stderr.seek(0)
    for _ in progress(range(1000), desc="slow", clock=clock):
        now[0] += 31.0  # a minute passes every 2 items: lines by time, before 10% is reached
    lines = sys.stderr.getvalue().splitlines()
    assert lines[0].startswith("slow: 2/1000 (0%)")


def test_progress_env_override(monkeypatch):
    monkeypatch.setattr("sys.stderr", io.StringIO())
    monkeypatch.setenv("WHITEBOX_PROGRESS", "off")
    assert list(progress(range(3), desc="quiet")) == [0, 1, 2]
    assert sys.stderr.getvalue() == ""


def test_config_records_the_git_commit_of_a_checkout(tmp_path):
    """Two runs can be compared after the fact: the code's commit is in config.yaml."""
    import subprocess

    root = Path(whitebox_eval.__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("whitebox-eval is not running from a git checkout here")
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    run = RunFolder.create(tmp_path, {"suite": "t"}, run_id="g")
    stored = yaml.safe_load((run.path / "config.yaml").read_text())
    assert stored["whitebox_eval_git_commit"].removesuffix("+dirty") == head
    assert RunFolder.create(tmp_path, {"suite": "t"}, run_id="g", resume=True)  # never compared on resume
