"""bf16 weights vs fp32 on the bundled models: the white-box scores agree within bf16's precision.

bf16 keeps 8 significant bits (relative rounding 2^-8 = 0.4% per operation), and errors
compound over 30 layers: ``benchmarks/dtype_agreement.py`` measured on 80 SSD items
letter probabilities within 0.049 (SmolLM2) and 0.022 (Gemma), Attention-scores within
0.031, QK-scores within 2% of their largest magnitude and the same best heads; baseline
answers agree on 100% (SmolLM2) and 80% (Gemma, whose letter probabilities are nearly
flat: the flips are near-ties). The tolerances below are about 3x those measurements: a dtype path that rounds
scores to bf16 before a softmax, or misses a float32 accumulation, breaks them.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _softmax(x: np.ndarray) -> np.ndarray:
    x = np.nan_to_num(x, nan=-np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_bf16_scores_agree_with_fp32(model, tmp_path):
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    arrays = {}
    for dtype in ("float32", "bfloat16"):
        cfg = MCQAConfig(model=model, task="ssd", limit=16, methods=("baseline", "qk", "attention"),
                         min_val_items=8, dtype=dtype, batch_size=8)
        folder = run_mcqa(cfg, tmp_path, run_id=dtype, show_progress=False)
        assert folder.config["dtype"] == dtype  # config.yaml records it
        arrays[dtype] = {k: np.load(folder.path / "arrays" / f"{k}.npy") for k in ("letter_logits", "qk", "attention")}
        assert all(a.dtype == np.float32 for a in arrays[dtype].values())  # scores are float32 whatever the weights
    a, b = arrays["float32"], arrays["bfloat16"]
    assert np.abs(_softmax(a["letter_logits"]) - _softmax(b["letter_logits"])).max() < 0.15
    fin = np.isfinite(a["attention"])
    assert np.array_equal(fin, np.isfinite(b["attention"]))
    assert np.abs(a["attention"] - b["attention"])[fin].max() < 0.1
    q = np.isfinite(a["qk"])
    assert np.abs(a["qk"] - b["qk"])[q].max() < 0.06 * np.abs(a["qk"][q]).max()
    # answers may flip only on near-ties: where fp32's top two letters are more than 2 x 0.15
    # apart in probability, the bf16 perturbation (< 0.15 per letter, asserted above) cannot flip it
    pa32, pb16 = _softmax(a["letter_logits"]), _softmax(b["letter_logits"])
    top2 = np.sort(pa32, -1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 0.3
    assert np.array_equal(pa32[clear].argmax(-1), pb16[clear].argmax(-1))
