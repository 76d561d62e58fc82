"""Span's teacher-forced pass (rollout, head rows) on a model whose head and final norm sit on a
second device: see tests/test_suites_on_two_devices.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))
from second_device import SecondDevice, split_pair  # noqa: E402
from whitebox_eval.internals import Engine  # noqa: E402


def test_span_rollout_and_head_rows(make_span_lm):
    from whitebox_eval.span.evaluation import teacher_forced_pass
    from whitebox_eval.span.tasks import generate
    from whitebox_eval.span.tokenization import tokenize_example

    plain, split = split_pair(make_span_lm())
    toks = [tokenize_example(e, plain.tokenizer, instruction="R:") for e in generate("string_reversal", 3, "id", seed=2, length=(2, 5))]
    ref = teacher_forced_pass(Engine(plain), toks, rollout=True, head_rows=True, keep_rollout=True)
    with SecondDevice():
        got = teacher_forced_pass(Engine(split), toks, rollout=True, head_rows=True, keep_rollout=True)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a.predicted, b.predicted)
        np.testing.assert_allclose(a.rollout, b.rollout, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(a.head_scores, b.head_scores, rtol=1e-5, atol=1e-7)
