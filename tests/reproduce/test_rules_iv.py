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


# ------------------------------------------------------------------ rule 6: the off-format class


def _generation(classes: list[tuple[str, str]]) -> list[dict]:
    return [{"task_id": "t", "index": i, "kr": False, "g2c": False, "error_class": c, "top_token": tok}
            for i, (c, tok) in enumerate(classes)]


def test_off_format_outputs_are_their_own_class_never_an_error_class():
    from types import SimpleNamespace

    from whitebox_eval.gar.evaluation import error_analysis
    from whitebox_eval.gar.generator import generate_task_examples
    from whitebox_eval.reproduce import vocabulary

    # 40 wrong candidates, 20 off the candidates (" pet"), 40 off-format ("\n", " the"), 10 right
    rows = _generation([("other_candidate", " b")] * 40 + [("off_candidates", " pet")] * 20
                       + [("off_format", "\n")] * 30 + [("off_format", " the")] * 10 + [("target", " a")] * 10)
    examples = generate_task_examples("GendersOfPersons/isA,KindsOfThings/kindOf×3", seed=0, n_examples=len(rows))
    rows = [{**r, "task_id": e.task_id, "index": e.index} for r, e in zip(rows, examples)]
    analysis = error_analysis(examples, {f"{r['task_id']}#{r['index']}": r for r in rows})
    assert (analysis["n_wrong"], analysis["n_off_format"], analysis["n_errors"]) == (100, 40, 60)
    assert analysis["share,class2_wrong_candidate"] == 40 / 60 and analysis["share,off_format"] == 40 / 100
    study = SimpleNamespace(samples=rows, results={"error_analysis": analysis}, config={}, folder=None)
    share = vocabulary.compute({"derived": "error_shares", "class": "other_candidate"}, study, "gar")
    # folded into the errors, 40/100 would read "class 2 is no majority"; apart, 40/60 of the answers are class 2
    assert share["value"] == 40 / 60 and share["n"] == 60 and len(share["arms"]["a"]["items"]) == 60
    assert share["off_format"]["n"] == 40 and share["off_format"]["of"] == 100
    assert "40 of 100 wrong outputs off-format" in share["source"] and "reclassified" not in share["source"]
    # a child written before the class (off-format folded into off_candidates, its top token kept): its own
    # share is checked as written, then each output reclassified from its top token, and the source says so
    old = [{**r, "error_class": "off_candidates" if r["error_class"] == "off_format" else r["error_class"]} for r in rows]
    written = {"n_errors": 100, "share,class2_wrong_candidate": 0.4, "share,class1or3_off_candidates": 0.6}
    share = vocabulary.compute({"derived": "error_shares", "class": "other_candidate"},
                               SimpleNamespace(samples=old, results={"error_analysis": written}, config={}, folder=None), "gar")
    assert share["value"] == 40 / 60 and share["off_format"]["n"] == 40 and "reclassified" in share["source"]
