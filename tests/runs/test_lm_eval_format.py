"""lm-eval's results-file blocks and per-sample fields (runs/lm_eval_format.py), checked
against lm-eval 0.4.13's source layout and hand computations."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from datetime import UTC, datetime

import pytest

from whitebox_eval import stats
from whitebox_eval.runs.lm_eval_format import (
    add_lm_eval_fields, doc_hash, hash_string, item_accuracy, lm_eval_fields, sample_fields)
from whitebox_eval.tasks.spec import TaskSpec  # noqa: E402
from whitebox_eval.tasks.items import MCQItem


def _results(k: int = 6, n: int = 10) -> dict:
    head: dict = {}
    stats.add_proportion(head, "acc,baseline", [1] * k + [0] * (n - k))
    stats.add_proportion(head, "acc_norm,cloze", [1] * (k - 1) + [0] * (n - k + 1))
    head["selection_bias"] = 0.3  # no filter: not an lm-eval metric
    return {"headline": head, "n_items": n, "split": {"seed": 0}}


CONFIG = {"suite": "mcqa", "model": "smollm2-135m", "task": "hellaswag=/data/hs.jsonl",
          "task_spec": {"name": "hellaswag", "path": "/data/hs.jsonl", "categories": []}, "shots": 0, "seed": 3,
          "dtype": "float32", "batch_size": 8, "limit": None, "methods": ["baseline", "cloze"],
          "created": "2026-11-23T19:00:00Z", "transformers_version": "4.57.1", "whitebox_eval_git_commit": "abc123"}


def test_hash_string_is_sha256_of_utf8_as_lm_eval_defines_it():
    # lm_eval/utils.py: hashlib.sha256(string.encode("utf-8")).hexdigest()
    assert hash_string("Answer: é") == hashlib.sha256("Answer: é".encode()).hexdigest()
    doc = {"question": "2+2 ≠ 5?", "choices": ["a", "b"]}
    # evaluator.py: hash_string(json.dumps(doc, indent=2, default=..., ensure_ascii=False))
    assert doc_hash(doc) == hashlib.sha256(json.dumps(doc, indent=2, ensure_ascii=False).encode()).hexdigest()
    assert "≠" in json.dumps(doc, indent=2, ensure_ascii=False)  # not escaped: the hash depends on it


def test_task_names():
    assert TaskSpec.parse("hellaswag=/x/y.jsonl").name == "hellaswag"
    assert TaskSpec.parse("MMLU=hf:cais/mmlu:all@test").name == "mmlu"
    assert TaskSpec.parse("arithmetic:add1,mul2").name == "arithmetic"
    assert TaskSpec.parse("ssd").name == "ssd"


def test_results_blocks_follow_lm_eval_layout():
    res = _results()
    out = lm_eval_fields(res, CONFIG, "hellaswag")
    entry = out["results"]["hellaswag"]
    assert entry["alias"] == entry["name"] == "hellaswag" and entry["sample_len"] == 10
    assert entry["acc,baseline"] == 0.6
    # lm-eval's mean_stderr: sample sd (ddof=1) / sqrt(n) = sqrt(p(1-p) n/(n-1)) / sqrt(n)
    assert entry["acc_stderr,baseline"] == pytest.approx(math.sqrt(0.6 * 0.4 * 10 / 9) / math.sqrt(10), rel=1e-12)
    assert entry["acc_norm,cloze"] == 0.5 and "acc_norm_stderr,cloze" in entry
    assert entry["sample_count"] == {"acc,baseline": 10, "acc_norm,cloze": 10}
    assert not any(k.startswith(("acc_ci", "acc_n,", "acc_norm_n,", "selection_bias")) for k in entry)  # only estimates and stderrs
    assert out["n-samples"] == {"hellaswag": {"original": 10, "effective": 10}}
    assert out["n-shot"] == {"hellaswag": 0} and out["versions"] == {"hellaswag": None}
    assert out["higher_is_better"] == {"hellaswag": {"acc": True, "acc_norm": True}}
    assert out["group_subtasks"] == {}
    cfg = out["configs"]["hellaswag"]
    assert cfg["dataset_path"] == "/data/hs.jsonl" and cfg["num_fewshot"] == 0 and cfg["output_type"] == "multiple_choice"
    assert [m["metric"] for m in cfg["metric_list"]] == ["acc", "acc_norm"]
    assert out["config"]["model"] == "smollm2-135m"
    assert out["config"]["model_args"] == {"pretrained": "smollm2-135m", "dtype": "float32"}
    assert out["config"]["batch_size"] == 8 and out["config"]["random_seed"] == 3 and out["config"]["limit"] is None
    assert out["git_hash"] == "abc123" and out["transformers_version"] == "4.57.1"
    assert out["date"] == datetime(2026, 11, 23, 19, tzinfo=UTC).timestamp()
    assert "lm_eval_version" not in out  # not invented


def test_counts_prefer_n_total_and_n_evaluated_and_nothing_is_replaced():
    res = {**_results(), "n_total": 14042, "n_evaluated": 10}
    assert lm_eval_fields(res, CONFIG, "mmlu")["n-samples"] == {"mmlu": {"original": 14042, "effective": 10}}
    res = {**_results(), "n_total": {"mmlu": 57}, "n_evaluated": {"mmlu": 10}}
    assert lm_eval_fields(res, CONFIG, "mmlu")["n-samples"]["mmlu"] == {"original": 57, "effective": 10}
    # a --limit run that does not say how many items the task has: no invented total
    limited = lm_eval_fields(_results(), {**CONFIG, "limit": 10}, "mmlu")
    assert "n-samples" not in limited and limited["results"]["mmlu"]["sample_len"] == 10
    mine = {**_results(), "config": "ours"}
    add_lm_eval_fields(mine, CONFIG, "hellaswag")
    assert mine["config"] == "ours" and "results" in mine and mine["headline"]["acc,baseline"] == 0.6


def test_missing_config_values_are_left_out():
    out = lm_eval_fields({"headline": {}}, {"task": "ssd"}, "ssd")
    assert out["results"] == {"ssd": {"alias": "ssd", "name": "ssd"}}
    assert "n-samples" not in out and "n-shot" not in out and "git_hash" not in out and "date" not in out
    assert out["config"] == {} and "dataset_path" not in out["configs"]["ssd"]


def test_make_table_of_real_lm_eval_prints_our_results(tmp_path):
    utils = pytest.importorskip("lm_eval.utils")
    pytest.importorskip("pytablewriter")
    table = utils.make_table(lm_eval_fields(_results(), CONFIG, "hellaswag"))
    row = next(line for line in table.splitlines() if "baseline" in line)
    assert "hellaswag" in row and "0.6" in row and "acc" in row


def test_sample_fields_of_an_item():
    it = MCQItem(id="hs/1", question="A man sits", options=["runs.", "eats."], gold=1, context="ctx", subject="Sports")
    f = sample_fields(it, 7, [("Sports: ctx A man sits", " runs."), ("Sports: ctx A man sits", " eats.")])
    assert f["doc_id"] == 7 and f["target"] == "1" and f["prompt"] == "Sports: ctx A man sits"
    assert f["doc"] == {"id": "hs/1", "question": "A man sits", "choices": ["runs.", "eats."], "gold": 1,
                        "context": "ctx", "subject": "Sports"}
    assert f["prompt_hash"] == hashlib.sha256(b"Sports: ctx A man sits").hexdigest()
    assert f["target_hash"] == hashlib.sha256(b"1").hexdigest()
    assert f["doc_hash"] == doc_hash(f["doc"]) and f["continuations"] == [" runs.", " eats."]
    # lm-eval's samples file: every request, arguments[i] = {arg_0: context, arg_1: continuation}
    assert f["arguments"] == {"gen_args_0": {"arg_0": "Sports: ctx A man sits", "arg_1": " runs."},
                              "gen_args_1": {"arg_0": "Sports: ctx A man sits", "arg_1": " eats."}}
    bare = sample_fields(MCQItem(id="x", question="q", options=["a", "b"], gold=0), 0, [("p", " a"), ("p", " b")])
    assert "context" not in bare["doc"] and "subject" not in bare["doc"]


def test_one_context_per_choice_keeps_every_context():
    it = MCQItem(id="w/0", question="q", options=["Anna", "Maria"], gold=0)
    f = sample_fields(it, 0, [("Anna helped because Anna", " was kind."), ("Anna helped because Maria", " was kind.")])
    assert [a["arg_0"] for a in f["arguments"].values()] == ["Anna helped because Anna", "Anna helped because Maria"]
    assert f["prompt"] == "Anna helped because Anna" and f["continuations"] == [" was kind.", " was kind."]


def test_item_accuracy():
    assert item_accuracy(2, {"baseline": 2, "qk_head": 0, "pride": None, "acc_norm,cloze": 2}) == {
        "acc,baseline": 1.0, "acc,qk_head": 0.0, "acc_norm,cloze": 1.0}


PARITY = Path(__file__).parents[1] / "fixtures" / "lm_eval_parity.json"


def test_hashes_equal_those_of_real_lm_eval_samples():
    """doc_hash / prompt_hash of 120 real lm-eval 0.4.13 --log_samples records (the parity
    fixture of benchmarks/lm_eval_parity.py: HellaSwag, ARC-Challenge, MMLU 0- and 5-shot)."""
    if not PARITY.is_file():
        pytest.skip("tests/fixtures/lm_eval_parity.json (benchmarks/lm_eval_parity.py) is not in this checkout")
    tasks = json.loads(PARITY.read_text(encoding="utf-8"))["tasks"]
    items = [it for t in tasks.values() for it in t["items"]]
    assert len(items) == 120
    for it in items:
        assert hash_string(it["context"]) == it["prompt_hash"]
        assert doc_hash(it["doc"]) == it["doc_hash"]
