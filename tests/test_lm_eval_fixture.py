"""Sanity of the frozen lm-evaluation-harness fixture, on its own.

``tests/fixtures/lm_eval_parity.json`` was written by ``benchmarks/lm_eval_parity.py``
from a real lm-eval 0.4.13 run (see its header). These tests recompute lm-eval's
formulas from the frozen log-likelihoods, independently of lm-eval and of our code,
so the fixture documents them:

- acc: ``np.argmax(lls) == gold``; ties go to the first (lowest-index) choice;
- acc_norm: ``np.argmax(lls / len(choice))``, ``len`` in characters of the choice
  string (lm-eval's ``doc_to_choice``), i.e. the continuation without the target
  delimiter ``" "``; a HellaSwag choice can itself start with a space;
- aggregate: the mean of per-item values; stderr = sample sd (ddof 1) / sqrt(n);
- prompt strings: MMLU header + question + ``A. ..`` lines + ``Answer:``, HellaSwag's
  ``preprocess``, ARC ``Question: ...\\nAnswer:``; each continuation is ``" " + choice``.

Exact float equality is used only where the same stored floats go through the same
operations as lm-eval's (argmax of the stored values); aggregates allow 1e-12.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "lm_eval_parity.json"
RESULTS = REPO_ROOT / "tests" / "fixtures" / "lm_eval_results" / "results_2026-11-23T00-00-00.000000.json"
BLOCKS = ("mmlu", "mmlu_5shot", "hellaswag", "arc_challenge")


@pytest.fixture(scope="module")
def fx() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def first_argmax(values: list[float]) -> int:
    """np.argmax's rule, written out: the lowest index holding the maximum."""
    best = max(values)
    return next(i for i, v in enumerate(values) if v == best)


def items(fx, block):
    return fx["tasks"][block]["items"]


def test_header_and_sizes(fx):
    h = fx["header"]
    assert h["lm_eval_version"] == "0.4.13"
    assert h["dtype"] == "float32" and h["transformers_version"] and h["torch_version"]
    assert h["tokenization"]["bos_added"] is False  # lm-eval adds no BOS with this tokenizer
    assert set(fx["tasks"]) == set(BLOCKS)
    for block in BLOCKS:
        its = items(fx, block)
        assert len(its) == 30
        keys = [json.dumps(it["key"], sort_keys=True) for it in its]
        assert len(set(keys)) == 30
        for it in its:
            n = len(it["continuations"])
            assert len(it["loglik"]) == len(it["is_greedy"]) == len(it["choices"]) == n
            assert 0 <= it["gold"] < n
            assert all(math.isfinite(x) and x < 0 for x in it["loglik"])
    assert FIXTURE.stat().st_size < 400_000


def test_per_item_acc_is_first_argmax_of_loglik(fx):
    for block in BLOCKS:
        for it in items(fx, block):
            assert it["acc"] == float(first_argmax(it["loglik"]) == it["gold"]), (block, it["key"])


def test_acc_norm_divides_by_characters_of_the_choice(fx):
    for block in ("hellaswag", "arc_challenge"):
        for it in items(fx, block):
            assert it["continuations"] == [" " + c for c in it["choices"]]
            normed = [ll / len(c) for ll, c in zip(it["loglik"], it["choices"])]
            assert it["acc_norm"] == float(first_argmax(normed) == it["gold"]), (block, it["key"])


def test_acc_norm_is_not_bytes_of_the_continuation(fx):
    """Dividing by UTF-8 bytes of " " + choice (the old whitebox rule) gives other
    predictions on these items: the fixture can tell the two rules apart."""
    differ = 0
    for it in items(fx, "hellaswag") + items(fx, "arc_challenge"):
        by_chars = first_argmax([ll / len(c) for ll, c in zip(it["loglik"], it["choices"])])
        by_bytes = first_argmax([ll / len(k.encode()) for ll, k in zip(it["loglik"], it["continuations"])])
        differ += by_chars != by_bytes
    assert differ >= 1


def test_aggregates_are_means_with_sample_stderr(fx):
    for block in BLOCKS:
        b = fx["tasks"][block]
        for name, summary in b["lm_eval_tasks"].items():
            its = [it for it in b["items"] if "subject" not in it["key"] or f"mmlu_{it['key']['subject']}" == name]
            n = len(its)
            assert summary["n-samples"] == {"original": n, "effective": n}
            assert summary["n-shot"] == b["num_fewshot"]
            for m in b["metrics"]:
                vals = [it[m] for it in its]
                mean = sum(vals) / n
                sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
                assert summary["aggregate"][m] == pytest.approx(mean, abs=1e-12)
                assert summary["aggregate"][f"{m}_stderr"] == pytest.approx(sd / math.sqrt(n), abs=1e-12)
                assert b["raw"]["results"][name][f"{m},none"] == summary["aggregate"][m]
        for m in b["metrics"]:
            assert b["mean_over_items"][m] == pytest.approx(sum(it[m] for it in b["items"]) / 30, abs=1e-12)


def _mmlu_text(doc: dict) -> str:
    return (doc["question"].strip() + "\n"
            + "".join(f"{L}. {c}\n" for L, c in zip("ABCD", doc["choices"])) + "Answer:")


def _header(subject: str) -> str:
    return f"The following are multiple choice questions (with answers) about {subject.replace('_', ' ')}.\n\n"


def test_mmlu_prompt_strings(fx):
    for it in items(fx, "mmlu"):
        doc = it["doc"]
        assert it["context"] == _header(it["key"]["subject"]) + _mmlu_text(doc)
        assert it["continuations"] == [" A", " B", " C", " D"]
        assert it["gold"] == doc["answer"]
    for it0, it5 in zip(items(fx, "mmlu"), items(fx, "mmlu_5shot")):
        assert it0["key"] == it5["key"]
        assert it5["context"].startswith(_header(it5["key"]["subject"]))
        assert it5["context"].endswith("\n\n" + _mmlu_text(it5["doc"]))
        assert it5["context"].count("\nAnswer:") == 6


def _preprocess(text: str) -> str:
    # lm_eval/tasks/hellaswag/utils.py::preprocess (0.4.13), written out
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def test_hellaswag_prompt_strings(fx):
    for it in items(fx, "hellaswag"):
        doc = it["doc"]
        ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
        assert it["context"] == _preprocess(doc["activity_label"] + ": " + ctx)
        assert it["choices"] == [_preprocess(e) for e in doc["endings"]]
        assert it["gold"] == int(doc["label"])
    # some preprocessed endings start with a space ("[substeps] ..."): that space counts in acc_norm
    assert any(c.startswith(" ") for it in items(fx, "hellaswag") for c in it["choices"])


def test_arc_prompt_strings(fx):
    for it in items(fx, "arc_challenge"):
        doc = it["doc"]
        assert it["context"] == f"Question: {doc['question']}\nAnswer:"
        assert it["choices"] == doc["choices"]["text"]
        assert it["gold"] == doc["choices"]["label"].index(doc["answerKey"])


def test_items_are_keyed_to_the_source_files(fx, shared_datasets):
    """Each item key names a row of the local sample files (skipped where they are absent)."""
    hs_rows = [json.loads(line) for line in next((shared_datasets / "hellaswag").glob("*.jsonl")).open()]
    for it in items(fx, "hellaswag"):
        row = hs_rows[it["key"]["row"]]
        assert row["ind"] == it["key"]["ind"] and row["endings"] == it["doc"]["endings"]
    arc_rows = [json.loads(line) for line in next((shared_datasets / "arc").glob("*.jsonl")).open()]
    for it in items(fx, "arc_challenge"):
        row = arc_rows[it["key"]["row"]]
        assert row["query"] == "Question: " + it["doc"]["question"] and row["gold"] == it["gold"]
        assert row["choices"] == it["choices"]

    def read_csv(path):
        with path.open(newline="", encoding="utf-8") as f:
            return [r for r in csv.reader(f) if r]

    for block in ("mmlu", "mmlu_5shot"):
        for it in items(fx, block):
            s = it["key"]["subject"]
            q, *opts, ans = read_csv(shared_datasets / "mmlu" / "test" / f"{s}_test.csv")[it["key"]["row"]]
            assert (q, opts, "ABCD".index(ans)) == (it["doc"]["question"], it["doc"]["choices"], it["gold"])
    # 5-shot demonstrations: the first five dev rows of the same subject, in order (first_n sampler)
    for it in items(fx, "mmlu_5shot"):
        s = it["key"]["subject"]
        demos = read_csv(shared_datasets / "mmlu" / "dev" / f"{s}_dev.csv")[:5]
        expected = _header(s) + "".join(
            _mmlu_text({"question": q, "choices": opts}) + f" {ans}\n\n" for q, *opts, ans in demos)
        assert it["context"] == expected + _mmlu_text(it["doc"])


def test_results_file_has_lm_eval_layout(fx):
    r = json.loads(RESULTS.read_text(encoding="utf-8"))
    for key in ("results", "versions", "n-shot", "higher_is_better", "n-samples", "configs", "config",
                "lm_eval_version", "task_hashes"):
        assert key in r
    assert r["lm_eval_version"] == fx["header"]["lm_eval_version"]
    for task in ("hellaswag", "arc_challenge"):
        assert r["results"][task] == fx["tasks"][task]["raw"]["results"][task]
        assert r["higher_is_better"][task] == {"acc": True, "acc_norm": True}
        assert r["n-samples"][task] == {"original": 30, "effective": 30}
