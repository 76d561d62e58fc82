"""lm-eval's generate_until tasks on the bundled SmolLM2 through our route equal lm-eval 0.4.13's own run.

gsm8k (5-shot, strict-match and flexible-extract), bbh_fewshot_boolean_expressions (3-shot from
its YAML) and hendrycks_math_algebra (its own process_results) on the synthetic hub-schema rows
of ``tests/fixtures/lm_eval_generation/data``; lm-eval generated greedily with its HF backend and
scored every document (``benchmarks/lm_eval_generation_fixture.py``). Ours generates greedily with
the engine's one decoder, exactly as ``mui`` does (one prompt per pass, no padding). Where our
text equals lm-eval's, the filtered answers and every metric must be equal; the share of equal
texts is printed and must stay high (two implementations of greedy decoding over the same
weights differ only where float rounding flips a near-tied argmax).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("lm_eval", reason="the lm-eval extra is not installed (make installs it)")

from whitebox_eval.mui.responses import prepare_task, respond  # noqa: E402
from whitebox_eval.mui.study import MUIConfig  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_generation"
FROZEN = json.loads((HERE / "lm_eval_generation.json").read_text(encoding="utf-8"))
MIN_AGREEMENT = 0.8


@pytest.fixture(scope="module")
def smollm():
    from whitebox_eval.models import load_model

    return load_model("smollm2-135m", dtype="float32")


@pytest.mark.parametrize("task", sorted(FROZEN["tasks"]))
def test_generated_texts_filters_and_metrics_equal_lm_evals(smollm, task):
    cfg = MUIConfig(model="smollm2-135m", task=f"lm-eval:{task}", lm_eval_data=str(HERE / "data"), limit=None)
    prepared = prepare_task(cfg, smollm.tokenizer)
    docs = FROZEN["tasks"][task]["docs"]
    assert len(prepared.items) == len(docs)
    same, lines = 0, []
    for it, d in zip(prepared.items, docs):
        assert it.prompt == d["prompt"], it.id
        _, (response,) = respond(smollm, prepared, [it])
        scored = prepared.score(it, response, smollm.tokenizer)
        if scored["text"] != d["resp"]:
            lines.append(f"{it.id}: ours {scored['text'][:60]!r} lm-eval {d['resp'][:60]!r}")
            continue
        same += 1
        for name, want in d["filters"].items():
            got = scored["filters"][name]
            assert got["filtered"] == want["filtered"], (it.id, name)
            for metric, value in want.items():
                if metric != "filtered":
                    assert float(got[metric]) == float(value), (it.id, name, metric)
    rate = same / len(docs)
    print(f"\n{task}: {same} of {len(docs)} generated texts equal lm-eval's ({rate:.0%})" + "".join(
        f"\n  {line}" for line in lines))
    assert rate >= MIN_AGREEMENT, lines
