"""``whitebox-eval compare A B``'s paired section: per-item metrics of two runs over the same
items, the paired difference, its interval and test, and the flips.

References are computed here from the items: McNemar's b and c counted by hand and its
p-value from scipy's binomial test; the bootstrap's difference as the mean of B - A.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import binomtest

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.report.command import compare
from whitebox_eval.report.paired_runs import item_metrics, paired_comparison
from whitebox_eval.runs import RunFolder

RNG = np.random.default_rng(3)
N = 60
A_RIGHT = RNG.random(N) < 0.55
B_RIGHT = np.where(RNG.random(N) < 0.7, A_RIGHT, ~A_RIGHT)  # B flips ~30% of A's items
P_A = RNG.random(N)
P_B = np.clip(P_A + RNG.normal(0.05, 0.1, N), 0, 1)


def _samples(right: np.ndarray, p: np.ndarray, order=None) -> list[dict]:
    ids = range(N) if order is None else order
    return [{"id": f"item-{i}", "gold": 1, "pred_baseline": 1 if right[i] else 0, "letter_logits": [0.1, 0.2],
             "acc,baseline": float(right[i]), "p_correct": {"mcq": float(p[i])}, "n_tokens": 40 + i,
             "doc_id": i} for i in ids]


def _run(root, run_id, samples) -> RunFolder:
    folder = RunFolder.create(root, {"suite": "mcqa", "model": "m", "task": "ssd"}, run_id=run_id)
    folder.append_samples(samples)
    head: dict = {}
    stats.add_proportion(head, "acc,baseline", [s["acc,baseline"] for s in samples])
    folder.save_results({"headline": head})
    return folder


def test_metrics_of_a_line_skip_identifiers_and_counts():
    m = item_metrics(_samples(A_RIGHT, P_A)[0])
    assert set(m) == {"acc,baseline", "p_correct.mcq"}
    # no explicit per-item metric: each scorer's correctness, the head's name folded
    line = {"id": "x", "gold": 2, "pred_baseline": 2, "qk_head": {"head": [14, 0], "pred": 1, "scores": [1, 2, 3]}}
    assert item_metrics(line) == {"correct[baseline]": 1.0, "correct[qk head]": 0.0}
    assert item_metrics({"id": "y", "correct": True, "n_key_units": 5, "response": "4"}) == {"correct": 1.0}
    assert item_metrics({"id": "z", "acc,qk_head": 1.0, "split": "test"}) == {"acc,qk_head [test]": 1.0}


def test_mcnemar_and_flips_match_a_hand_count():
    cmp = paired_comparison(_samples(A_RIGHT, P_A), _samples(B_RIGHT, P_B)[::-1])  # order does not matter
    acc = next(m for m in cmp.metrics if m.metric == "acc,baseline")
    gained = [f"item-{i}" for i in range(N) if B_RIGHT[i] and not A_RIGHT[i]]
    lost = [f"item-{i}" for i in range(N) if A_RIGHT[i] and not B_RIGHT[i]]
    assert sorted(acc.gained) == sorted(gained) and sorted(acc.lost) == sorted(lost)
    b, c = len(gained), len(lost)
    assert acc.test.test == "mcnemar_exact" and acc.test.n == N
    assert acc.test.diff == pytest.approx((b - c) / N, abs=1e-15)
    assert acc.test.p_value == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-12)
    assert acc.test.lo <= acc.test.diff <= acc.test.hi
    assert acc.mean_a == pytest.approx(A_RIGHT.mean()) and acc.mean_b == pytest.approx(B_RIGHT.mean())
    p = next(m for m in cmp.metrics if m.metric == "p_correct.mcq")
    assert p.test.test == "paired_bootstrap" and p.test.diff == pytest.approx(float(np.mean(P_B - P_A)), abs=1e-12)
    assert p.test.lo < p.test.diff < p.test.hi


def test_a_method_that_chose_another_head_is_named():
    a = [{"id": str(i), "acc,qk_head": 1.0, "qk_head": {"head": [14, 0], "pred": 1}} for i in range(3)]
    b = [{"id": str(i), "acc,qk_head": 0.0, "qk_head": {"head": [20, 3], "pred": 0}} for i in range(3)]
    cmp = paired_comparison(a, b)
    assert "qk_head: A chose head L14H0, B chose L20H3" in " ".join(cmp.notes)
    assert not any("chose" in n for n in paired_comparison(a, a).notes)


def test_only_shared_ids_pair_and_repeated_ids_are_refused():
    cmp = paired_comparison(_samples(A_RIGHT, P_A, range(0, 50)), _samples(B_RIGHT, P_B, range(10, 60)))
    assert (cmp.n_shared, cmp.only_a, cmp.only_b) == (40, 10, 10)
    assert all(m.test.n == 40 for m in cmp.metrics)
    twice = _samples(A_RIGHT, P_A)
    with pytest.raises(WhiteboxError, match="item id 'item-0' twice"):
        paired_comparison(twice + twice[:1], _samples(B_RIGHT, P_B), "A", "B")


def test_compare_command_prints_the_paired_section(tmp_path):
    a = _run(tmp_path, "base", _samples(A_RIGHT, P_A))
    b = _run(tmp_path, "edited", _samples(B_RIGHT, P_B))
    out = CliRunner().invoke(compare, [str(a.path), str(b.path)])
    assert out.exit_code == 0, out.output
    text = out.output
    assert f"paired, B - A on the {N} items both hold" in text
    b_, c_ = int(np.sum(B_RIGHT & ~A_RIGHT)), int(np.sum(A_RIGHT & ~B_RIGHT))
    row = next(line for line in text.splitlines() if line.strip().startswith("acc,baseline") and "McNemar" in line)
    assert f"{b_}/{c_}" in row and f"{(b_ - c_) / N:+.4f}" in row
    assert "acc,baseline: right only in B: item-" in text
