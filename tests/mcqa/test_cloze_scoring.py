"""The grouped continuation scorer: each group's shared tokens computed once, every request's
log-likelihood equal to the model's own forward of that request alone, whatever the batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parent))
from test_mcqa_study import tiny_mcqa_model  # noqa: E402,F401  (the module fixture)
from tiny_models import FAMILY_NAMES, tiny_loaded  # noqa: E402

from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Engine  # noqa: E402
from whitebox_eval.mcqa.scoring import continuation_logprobs  # noqa: E402

DEMOS = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
# (context, continuation) requests of one item each: choices after one context; one context per
# choice and a shared continuation (winogrande); one choice; continuations sharing a first token
GROUPS = [
    [([11, 12, 13, 14], [20, 21]), ([11, 12, 13, 14], [22]), ([11, 12, 13, 14], [23, 24, 25])],
    [([30, 31, 32, 33, 34], [40, 41, 42]), ([30, 31, 32, 35], [40, 41, 42])],
    [([50, 51], [52, 53, 54, 55])],
    [([56, 57, 58], [59, 44]), ([56, 57, 58], [59, 45, 46])],
]


def alone(lm, context, continuation) -> float:
    """The model's own forward of context + continuation, summed log-softmax of the continuation."""
    ids = torch.tensor([context + continuation])
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(input_ids=ids).logits[0].double(), -1)
    return float(sum(logp[len(context) - 1 + j, t] for j, t in enumerate(continuation)))


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_every_request_equals_its_own_forward(family):
    lm = tiny_loaded(family)
    engine = Engine(lm)
    ref = [alone(lm, c, x) for g in GROUPS for c, x in g]
    # float32 sums of a few log-probabilities of size ~5 from passes of other shapes: ~1e-6 apart
    np.testing.assert_allclose(continuation_logprobs(engine, GROUPS), ref, rtol=1e-5, atol=1e-5)
    # after cached demonstrations every context starts with (sliding windows counted on positions)
    with_demos = [[(DEMOS + c, x) for c, x in g] for g in GROUPS]
    ref = [alone(lm, c, x) for g in with_demos for c, x in g]
    got = continuation_logprobs(engine, with_demos, prefix=engine.prefix(DEMOS))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_results_do_not_depend_on_batch_or_order():
    engine = Engine(tiny_loaded("qwen2"))
    together = continuation_logprobs(engine, GROUPS)
    one_by_one = np.concatenate([continuation_logprobs(engine, [g]) for g in GROUPS])
    np.testing.assert_allclose(one_by_one, together, rtol=1e-6, atol=1e-6)
    backwards = continuation_logprobs(engine, GROUPS[::-1])
    per_group = np.split(backwards, np.cumsum([len(g) for g in GROUPS[::-1]])[:-1])
    np.testing.assert_allclose(np.concatenate(per_group[::-1]), together, rtol=1e-6, atol=1e-6)


def test_requests_that_cannot_be_scored_are_refused():
    engine = Engine(tiny_loaded("llama"))
    with pytest.raises(WhiteboxError, match="no continuation"):
        continuation_logprobs(engine, [[([1, 2], [])]])
    with pytest.raises(WhiteboxError, match="cached prefix"):
        continuation_logprobs(engine, [[([1, 2, 3], [4])]], prefix=engine.prefix([1, 2, 3]))


def test_a_cloze_only_study_batches_longest_first_and_resumes_to_the_same_files(tiny_mcqa_model, tmp_path):  # noqa: F811
    """The cloze pass batches items by length, streams samples meanwhile and leaves them in item
    order; a run cut after its first batch resumes to the same samples.jsonl and results."""
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    cfg = MCQAConfig(model="tiny", limit=12, batch_size=4, shots=2, methods=("cloze",))
    whole = run_mcqa(cfg, tmp_path, run_id="whole", loaded=tiny_mcqa_model, show_progress=False)
    ids = [s["id"] for s in whole.read_samples()]
    assert [s["doc_id"] for s in whole.read_samples()] == list(range(12))  # item order
    parts = sorted((whole.path / "arrays" / "parts" / "cloze").glob("*.npz"))
    firsts = [int(p.stem) for p in parts]
    assert len(parts) == 3 and firsts != [0, 4, 8]  # batches formed longest first, not in item order
    cut = run_mcqa(cfg, tmp_path, run_id="cut", loaded=tiny_mcqa_model, show_progress=False)
    kept = np.load(sorted((cut.path / "arrays" / "parts" / "cloze").glob("*.npz"))[0])["index"].tolist()
    for part in sorted((cut.path / "arrays" / "parts" / "cloze").glob("*.npz"))[1:]:
        part.unlink()
    by_id = {s["id"]: s for s in cut.read_samples()}
    (cut.path / "samples.jsonl").write_text("".join(json.dumps(by_id[ids[i]]) + "\n" for i in kept))
    (cut.path / "results.json").unlink()
    resumed = run_mcqa(cfg, tmp_path, run_id="cut", resume=True, loaded=tiny_mcqa_model, show_progress=False)
    assert resumed.samples_path.read_bytes() == whole.samples_path.read_bytes()
    assert resumed.load_results()["headline"] == whole.load_results()["headline"]
