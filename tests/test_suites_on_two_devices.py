"""The suites' scorers on a model whose last layer, final norm and head sit on a second device
(as ``--device-map`` places an 8B model over two GPUs): no tensor built on the input's device
meets one from the head, nothing is read to numpy before ``.cpu()``, and every number equals
the unsplit model's (:mod:`second_device` simulates the device on the CPU, values exact)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from second_device import SecondDevice, split_pair  # noqa: E402
from tiny_models import tiny_loaded  # noqa: E402
from whitebox_eval.internals import Engine  # noqa: E402


def test_mcqa_scorers_and_cloze_log_likelihoods():
    from whitebox_eval.mcqa.scoring import continuation_logprobs, score_prompts
    from whitebox_eval.tasks.prompt_tokens import TokenizedPrompt

    plain, split = split_pair(tiny_loaded("llama"))
    toks = [TokenizedPrompt([5, 9, 17, 33, 2, 41, 7, 12, 20], [2, 5, 7], [30, 31, 32], 0, [[2, 3], [5], [7]]),
            TokenizedPrompt([3, 8, 21, 30, 11, 6], [1, 3], [30, 31], 0)]
    groups = [[([5, 9, 17], [33, 2]), ([5, 9, 17], [41])], [([3, 8], [21, 30, 11])]]
    ref = score_prompts(Engine(plain), toks, 3).arrays()
    ref_lp = continuation_logprobs(Engine(plain), groups)
    with SecondDevice():
        got = score_prompts(Engine(split), toks, 3).arrays()
        got_lp = continuation_logprobs(Engine(split), groups)
    assert got.keys() == ref.keys() == {"letter_logits", "qk", "attention", "lens"}
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_lp, ref_lp, rtol=1e-5, atol=1e-6)


def test_sae_fidelity_and_feature_scores():
    from whitebox_eval.mui import keyneurons as kn
    from whitebox_eval.sae.encoding import SAE
    from whitebox_eval.sae.sets import SAESet
    from whitebox_eval.sae.fidelity import evaluate_fidelity

    plain, split = split_pair(tiny_loaded("llama"))
    torch.manual_seed(0)
    d, f = plain.arch.d_model, 48
    sae = SAE(torch.randn(d, f) / d ** 0.5, torch.zeros(f), torch.randn(f, d) / f ** 0.5, torch.zeros(d))
    seqs = [[5, 9, 17, 33, 2, 41, 7], [3, 8, 21, 30]]
    ref = evaluate_fidelity(plain, sae, 2, seqs)  # layer 2's output: on the second device
    scored = [kn.ScoredSequence([5, 9, 17, 33], [41, 7, 12]), kn.ScoredSequence([3, 8, 21], [30, 11])]
    ref_scores = kn.token_scores(Engine(plain), scored, kn.KeyNeuronConfig(score="sae"), SAESet([2], [sae]))
    with SecondDevice():
        got = evaluate_fidelity(split, sae, 2, seqs)
        got_scores = kn.token_scores(Engine(split), scored, kn.KeyNeuronConfig(score="sae"), SAESet([2], [sae]))
        for cfg in (kn.KeyNeuronConfig(score="contribution", final_norm="full"), kn.KeyNeuronConfig(score="ig", ig_steps=2)):
            kn.token_scores(Engine(split), scored, cfg)  # no device mix on the way
    for k, v in ref.items():
        if isinstance(v, float):
            assert got[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
    for a, b in zip(got_scores, ref_scores):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
