"""The rules' last pieces on synthetic child runs: strata for every pooled statistic kind
(correlations, rates, length bins), the off-format class of a classification of outputs, and
benchmarks/recompute_claims.py recomputing each (and the cluster-bootstrap interval of the
within-position statistic) with its own code."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from whitebox_eval.reproduce import derived

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import recompute_claims as rc  # noqa: E402


def _tokens(seed: int = 0, sequences: int = 30, length: int = 12):
    """Token scores whose correct-minus-wrong gap is +0.05 at every position, positions of unequal shares."""
    rng = np.random.default_rng(seed)
    v, g, seq, pos = [], [], [], []
    for s in range(sequences):
        for i in range(length):
            c = bool(rng.random() < 0.2 + 0.6 * i / length)
            v.append(0.5 - 0.02 * i + 0.05 * c + rng.normal(0, 0.05))
            g.append(c)
            seq.append(f"s{s}")
            pos.append(i)
    return np.array(v), np.array(g), seq, np.array(pos)


def test_recompute_claims_recomputes_the_within_position_cluster_bootstrap_interval():
    v, g, seq, pos = _tokens()
    twin = derived.within_positions(v, g, pos, seq, permutations=1000)
    tokens = {"value": v.tolist(), "correct": g.tolist(), "sequence": seq, "position": pos.tolist()}
    ck = rc.Check()
    rc.check_within_position("w", twin, tokens, ck, np.random.default_rng(7))
    assert not ck.bad and ck.done["within-position cluster-bootstrap SE (Monte Carlo)"] == 1
    assert ck.done["within-position interval lo (Monte Carlo)"] == ck.done["within-position interval hi (Monte Carlo)"] == 1
    # an SE 30% off (far beyond two bootstraps' disagreement) is caught, at both ends of the interval
    off = {**twin, "se": 1.3 * twin["se"], "lo": twin["value"] - 1.96 * 1.3 * twin["se"],
           "hi": twin["value"] + 1.96 * 1.3 * twin["se"]}
    ck = rc.Check()
    rc.check_within_position("w", off, tokens, ck, np.random.default_rng(7))
    assert sum("within-position" in b and ("SE" in b or "interval" in b) for b in ck.bad) == 3
