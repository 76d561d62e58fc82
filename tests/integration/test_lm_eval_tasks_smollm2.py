"""``mcqa --task lm-eval:TASK`` on the bundled SmolLM2 equals lm-eval 0.4.13's own run.

Five multiple-choice tasks we have no loader for (openbookqa, sciq, piqa, commonsense_qa,
winogrande: bare question, support passage, two choices with k + 1 draws, lettered
options, partial evaluation), 0- and 3-shot, on the synthetic hub-schema rows of
``tests/fixtures/lm_eval_tasks/data``. lm-eval itself wrote the log-likelihoods and
per-item acc / acc_norm (``benchmarks/lm_eval_fixtures.py --part tasks``); ours must
agree within ``tests/float_tolerance.py``'s (1e-4 + 1e-4 of the size), with
the same acc / acc_norm on every item but a near-tie within that tolerance.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lm_eval", reason="the lm-eval extra is not installed (make installs it)")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from float_tolerance import loglik_slack  # noqa: E402

from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_tasks"
FIXTURE = json.loads((HERE / "lm_eval_tasks.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def smollm():
    from whitebox_eval.models import load_model

    return load_model("smollm2-135m", dtype="float32")


@pytest.mark.parametrize("task", ["openbookqa", "sciq", "piqa", "commonsense_qa", "winogrande"])
@pytest.mark.parametrize("shots", [0, 3])
def test_loglikelihoods_and_metrics_equal_lm_evals(smollm, tmp_path, task, shots):
    ref = FIXTURE["runs"][f"{task}/{shots}"]
    cfg = MCQAConfig(model="smollm2-135m", task=f"lm-eval:{task}", prompt="lm-eval", shots=shots, view="cloze",
                     methods=("cloze",), lm_eval_data=str(HERE / "data" / task), uncertainty=False, batch_size=8)
    folder = run_mcqa(cfg, tmp_path, run_id="r", loaded=smollm, show_progress=False)
    samples = [json.loads(line) for line in (folder.path / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == ref["n"] == 16
    near_ties = 0
    for s, r in zip(samples, ref["items"]):
        assert s["id"] == f"{task}/{r['doc_id']}"
        assert s["prompt"] == r["requests"][0][0] and s["continuations"] == [c for _, c in r["requests"]]
        ours, theirs = np.array(s["cloze_loglik"]), np.array(r["loglik"])
        slack = loglik_slack(theirs)
        np.testing.assert_array_less(np.abs(ours - theirs), slack, err_msg=s["id"])
        for metric, pred in (("acc", s["pred_cloze"]), ("acc_norm", s.get("pred_cloze_norm"))):
            if metric in r and float(int(pred) == int(s["gold"])) != r[metric]:
                near_ties += 1
    assert near_ties <= 1, f"{near_ties} items' acc/acc_norm differ from lm-eval's beyond a near-tie"
    res = folder.load_results()["headline"]
    for metric in ref["metrics"]:
        assert abs(res[f"{metric},cloze"] - ref["aggregate"][metric]) <= 1 / 16 + 1e-12

