"""Parity with real lm-evaluation-harness numbers.

``tests/fixtures/lm_eval_parity.json`` was written by ``benchmarks/lm_eval_parity.py``,
which ran lm-eval 0.4.13 itself (its own task configs, prompts and metrics) on 30 items
each of MMLU (0- and 5-shot), HellaSwag and ARC-Challenge with the bundled
SmolLM2-135M in float32. The fixture carries every document, so this test rebuilds the
data files from it (no ``../shared`` needed, no lm-eval installed), runs ``mcqa --prompt
lm-eval`` on them and asks for the same prompts and continuations, log-likelihoods within
1e-4 (plus 1e-4 of their size when this CPU's float32 kernels differ from the fixture's)
and the same acc / acc_norm on every item but at most one near-tie.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the bound, 1e-4 (our padded batches vs lm-eval's batch size 1: <= 6.1e-5 on one machine), plus a
# part of the size for another CPU's float32 kernels and thread count
from float_tolerance import loglik_slack  # noqa: E402

from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa  # noqa: E402
from whitebox_eval.tasks.arc import hub_row as arc_hub_row  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "lm_eval_parity.json").read_text())


@pytest.fixture(scope="module")
def smollm():
    from whitebox_eval.models import load_model

    return load_model("smollm2-135m", dtype="float32")


def _samples(folder) -> dict[str, dict]:
    return {s["id"]: s for s in map(json.loads, (folder.path / "samples.jsonl").read_text().splitlines())}


def _mmlu_files(root: Path, block: dict) -> Path:
    """hendrycks CSVs (question,A,B,C,D,letter) rebuilt from the fixture's documents."""
    rows: dict[tuple[str, str], list] = {}
    for it in block["items"]:
        d = it["doc"]
        rows.setdefault(("test", d["subject"]), []).append([d["question"], *d["choices"], "ABCD"[d["answer"]]])
    for d in block.get("fewshot_docs", []):
        rows.setdefault(("dev", d["subject"]), []).append([d["question"], *d["choices"], "ABCD"[d["answer"]]])
    for (split, subject), recs in rows.items():
        (root / split).mkdir(parents=True, exist_ok=True)
        with (root / split / f"{subject}_{split}.csv").open("w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(recs)
    return root / "test"


def _near_tie(scores: np.ndarray, ours: int, theirs: int, slack: np.ndarray) -> bool:
    """Whether lm-eval's scores for our pick and its pick are within the tolerance of each other."""
    return abs(scores[ours] - scores[theirs]) <= slack[ours] + slack[theirs]


def _check(folder, block: dict, ids: list[str], metrics: tuple[str, ...]) -> None:
    samples = _samples(folder)
    assert len(samples) == len(ids) == 30
    differing = {"acc": 0, "acc_norm": 0}
    for sid, ref in zip(ids, block["items"]):
        s = samples[sid]
        assert s["prompt"] == ref["context"], sid
        assert s["continuations"] == ref["continuations"], sid
        ours, theirs = np.array(s["cloze_loglik"]), np.array(ref["loglik"])
        slack = loglik_slack(theirs)
        np.testing.assert_array_less(np.abs(ours - theirs), slack, err_msg=sid)
        lengths = np.array([len(c) for c in ref["choices"]], float)
        for m, pred, scores, tol in (("acc", s["pred_cloze"], theirs, slack),
                                     ("acc_norm", s["pred_cloze_norm"], theirs / lengths, slack / lengths)):
            if m in metrics and pred != int(np.argmax(scores)):  # only a near-tie may go the other way
                assert _near_tie(scores, pred, int(np.argmax(scores)), tol), (sid, m)
                differing[m] += 1
    assert max(differing.values()) <= 1, differing  # the "at most one item, from a near-tie"
    head = folder.load_results()["headline"]
    for m in metrics:
        assert head[f"{m},cloze"] == pytest.approx(block["mean_over_items"][m], abs=differing[m] / 30 + 1e-12)


@pytest.mark.parametrize("name", ["hellaswag", "arc_challenge"])
def test_cloze_tasks_equal_lm_eval(name, smollm, tmp_path):
    block = FIXTURE["tasks"][name]
    if name == "hellaswag":
        path = tmp_path / "hellaswag_val.jsonl"
        path.write_text("".join(json.dumps(it["doc"]) + "\n" for it in block["items"]))
        ids = [f"hellaswag/{it['doc']['ind']}" for it in block["items"]]
    else:
        path = tmp_path / "ARC-Challenge-Test.jsonl"
        path.write_text("".join(json.dumps(arc_hub_row(it["doc"])) + "\n" for it in block["items"]))
        ids = [f"arc/{i + 1}" for i in range(30)]
    cfg = MCQAConfig(model="smollm2-135m", task=f"{name.split('_')[0]}={path}", prompt="lm-eval", methods=("cloze",))
    folder = run_mcqa(cfg, tmp_path / "runs", run_id=name, loaded=smollm, show_progress=False)
    _check(folder, block, ids, ("acc", "acc_norm"))
    res = folder.load_results()
    assert res["n_total"] == res["n_evaluated"] == 30


@pytest.mark.parametrize("name", ["mmlu", "mmlu_5shot"])
def test_mmlu_equals_lm_eval_and_the_letter_baseline_agrees(name, smollm, tmp_path):
    block = FIXTURE["tasks"][name]
    shots = block["num_fewshot"]
    test_dir = _mmlu_files(tmp_path / "mmlu", block)
    cfg = MCQAConfig(model="smollm2-135m", task=f"mmlu={test_dir}", prompt="lm-eval", shots=shots,
                     methods=("baseline", "cloze"), uncertainty=False)
    folder = run_mcqa(cfg, tmp_path / "runs", run_id=name, loaded=smollm, show_progress=False)
    by_subject: dict[str, int] = {}
    ids = []
    for it in block["items"]:
        subject = it["doc"]["subject"]
        by_subject[subject] = by_subject.get(subject, 0) + 1
        ids.append(f"mmlu/{subject}/{subject}_test.csv:{by_subject[subject]}")
    _check(folder, block, ids, ("acc",))
    samples = _samples(folder)
    # the letter baseline reads the same next-token distribution: the cloze's answer on every item
    assert [samples[i]["pred_baseline"] for i in ids] == [samples[i]["pred_cloze"] for i in ids]
    head = folder.load_results()["headline"]
    assert head["acc,baseline"] == head["acc,cloze"]
