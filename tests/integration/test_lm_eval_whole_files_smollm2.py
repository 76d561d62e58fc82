"""Whole-file settings on SmolLM2: our log-likelihoods and acc / acc_norm equal lm-eval's own run.

``tests/fixtures/lm_eval_whole_files.json`` holds lm-eval 0.4.13's scored run of every row
of the shared ARC-Challenge, HellaSwag and MMLU samples (0-shot; MMLU 5-shot; ARC 25-shot
and HellaSwag 10-shot with the first rows as the train split). Every prompt is compared
row by row without a model in ``tests/tasks/test_lm_eval_whole_files.py``; here the first
``N`` evaluated items of each setting are scored (lm-eval's ``--limit N`` sees exactly the
first N contexts of the full run, the per-item draws included), within the tolerance of
``tests/float_tolerance.py``. The whole files are compared by
``benchmarks/lm_eval_whole_files.py`` (``benchmarks/results/lm_eval_whole_files.md``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lm_eval_whole_files_data import task_spec  # noqa: E402
from float_tolerance import loglik_slack  # noqa: E402

from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIXTURE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_whole_files.json").read_text())
N = 12
SETTINGS = [("arc_challenge/0", "arc", 0), ("hellaswag/0", "hellaswag", 0), ("mmlu/0", "mmlu", 0),
            ("mmlu/5", "mmlu", 5), ("hellaswag/10", "hellaswag", 10), ("arc_challenge/25", "arc", 25)]


@pytest.fixture(scope="module")
def smollm():
    from whitebox_eval.models import load_model

    return load_model("smollm2-135m", dtype="float32")


@pytest.mark.parametrize("key, name, shots", SETTINGS)
def test_first_items_of_each_whole_file_setting(smollm, shared_datasets, tmp_path, key, name, shots):
    block = FIXTURE["runs"][key]
    assert all("items" in t for t in block["tasks"].values()), f"{key}: the fixture has no scored lm-eval run"
    # MMLU: the first N of the first subject (lm-eval's mmlu_<subject> tasks are evaluated one by one)
    theirs = next(iter(block["tasks"].values()))["items"][:N]
    cfg = MCQAConfig(model="smollm2-135m", task=task_spec(name, shots, shared_datasets, tmp_path), prompt="lm-eval",
                     shots=shots, limit=N, uncertainty=False, batch_size=4,
                     methods=("baseline",) if name == "mmlu" else ("cloze",))
    folder = run_mcqa(cfg, tmp_path / "runs", run_id="r", loaded=smollm, show_progress=False)
    samples = [json.loads(x) for x in (folder.path / "samples.jsonl").read_text().splitlines()]
    prompts = next(iter(block["tasks"].values()))["prompts"][:N]
    assert [s["prompt_hash"] for s in samples] == [p["prompt_hash"] for p in prompts]
    differing = 0
    for s, t in zip(samples, theirs):
        ref = np.array(t["loglik"], float)
        slack = loglik_slack(ref)
        if name == "mmlu":  # logits vs log-softmax: equal up to one constant per item
            ours = np.array(s["letter_logits"], float)
            np.testing.assert_array_less(np.abs((ours - ours[0]) - (ref - ref[0])), slack + slack[0], err_msg=s["id"])
            preds = {"acc": int(np.argmax(ours))}
        else:
            np.testing.assert_array_less(np.abs(np.array(s["cloze_loglik"], float) - ref), slack, err_msg=s["id"])
            preds = {"acc": s["pred_cloze"], "acc_norm": s["pred_cloze_norm"]}
        differing += sum(float(int(p) == int(s["gold"])) != t[m] for m, p in preds.items() if m in t)
    assert differing <= 1, f"{key}: {differing} acc/acc_norm values differ from lm-eval's (a near-tie may, once)"
