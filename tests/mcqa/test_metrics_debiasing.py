"""PriDe (000 eq. 5; Zheng et al. 2024) on hand-worked examples."""

from __future__ import annotations

import numpy as np
import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mcqa import debiasing as db
from whitebox_eval.mcqa.head_scores import Split

# One 3-option item seen under the three cyclic permutations (rows), probabilities
# by letter position A, B, C (columns). Permutation p shows content (j + p) mod 3 at letter j.
HAND = np.array(
    [
        [0.05, 0.15, 0.80],  # p = 0: contents (0, 1, 2)
        [0.15, 0.05, 0.80],  # p = 1: contents (1, 2, 0)
        [0.45, 0.45, 0.10],  # p = 2: contents (2, 0, 1)
    ]
)


def test_cyclic_orders_match_paper_definition():
    # I = {(i, i+1, ..., n, 1, ..., i-1)}: rotation p shows content (j + p) mod n at letter j
    assert db.cyclic_orders(3).tolist() == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]


def test_prior_three_options_by_hand():
    # geometric mean over permutations per letter:
    #   A: (0.05 * 0.15 * 0.45)^(1/3) = 0.003375^(1/3) = 0.15
    #   B: (0.15 * 0.05 * 0.45)^(1/3) = 0.003375^(1/3) = 0.15
    #   C: (0.80 * 0.80 * 0.10)^(1/3) = 0.064^(1/3)    = 0.40
    # softmax of the mean logs = normalised geometric means = (0.15, 0.15, 0.40) / 0.7
    expected = np.array([3 / 14, 3 / 14, 8 / 14])
    np.testing.assert_allclose(db.estimate_prior(HAND[None]), expected, rtol=1e-8)


def test_prior_ignores_per_permutation_scale():
    # raw letter probabilities (not summing to 1) give the same prior: each permutation's
    # row is renormalised, and a per-row factor cancels in the softmax anyway
    raw = HAND * np.array([[0.5], [0.2], [0.9]])
    np.testing.assert_allclose(db.estimate_prior(raw[None]), [3 / 14, 3 / 14, 8 / 14], rtol=1e-8)


def test_dataset_prior_is_mean_of_item_priors():
    # item 2 is uniform under every permutation -> its prior is (1/3, 1/3, 1/3)
    # dataset prior = ((3/14, 3/14, 8/14) + (1/3, 1/3, 1/3)) / 2
    uniform = np.full((3, 3), 1 / 3)
    got = db.estimate_prior(np.stack([HAND, uniform]))
    expected = (np.array([3 / 14, 3 / 14, 8 / 14]) + 1 / 3) / 2
    np.testing.assert_allclose(got, expected, rtol=1e-8)


def test_prior_recovered_from_generative_model():
    # Zheng et al.'s model: P_obs(d_j) ∝ prior_j * content_{order[j]}; the estimator returns prior exactly
    prior = np.array([0.5, 0.3, 0.2])
    content = np.array([0.1, 0.3, 0.6])
    orders = db.cyclic_orders(3)
    obs = prior[None, :] * content[orders]
    obs /= obs.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(db.estimate_prior(obs[None]), prior, rtol=1e-8)
    # and eq. 5 averaged over permutations recovers the content preference
    np.testing.assert_allclose(db.permutation_average(obs[None])[0], content, rtol=1e-8)


def test_permutation_average_eq5_by_hand():
    # probability at the letter showing each content:
    #   content 0: p0 letter A 0.05, p1 letter C 0.80, p2 letter B 0.45 -> product 0.018
    #   content 1: p0 letter B 0.15, p1 letter A 0.15, p2 letter C 0.10 -> product 0.00225
    #   content 2: p0 letter C 0.80, p1 letter B 0.05, p2 letter A 0.45 -> product 0.018
    # cube roots are in ratio 1 : (1/8)^(1/3) : 1 = 1 : 0.5 : 1 -> (0.4, 0.2, 0.4)
    np.testing.assert_allclose(db.permutation_average(HAND[None])[0], [0.4, 0.2, 0.4], rtol=1e-8)
    # arithmetic variant: (1.30, 0.40, 1.30) / 3, renormalised -> (1.3, 0.4, 1.3) / 3.0
    np.testing.assert_allclose(
        db.permutation_average(HAND[None], aggregate="mean")[0], [1.3 / 3, 0.4 / 3, 1.3 / 3], rtol=1e-8
    )


def test_debias_flips_biased_prediction():
    # observed (0.40, 0.35, 0.25) / prior (0.5, 0.3, 0.2) = (0.8, 7/6, 1.25); sum = 3.21666...
    # baseline picks A, debiased picks C
    out = db.debias(np.array([[0.40, 0.35, 0.25]]), np.array([0.5, 0.3, 0.2]))
    expected = np.array([0.8, 7 / 6, 1.25]) / (0.8 + 7 / 6 + 1.25)
    np.testing.assert_allclose(out[0], expected, rtol=1e-8)
    assert int(np.argmax(out[0])) == 2


def test_pride_precomputed_arrays():
    # items 0 (estimation, HAND) and 1 (test); the prior is (3/14, 3/14, 8/14)
    # item 1 observed (0.2, 0.3, 0.5) / prior = (0.2*14/3, 0.3*14/3, 0.5*14/8)
    #   = (0.9333, 1.4, 0.875) -> prediction B (baseline would say C)
    probs = np.array([HAND[0], [0.2, 0.3, 0.5]])
    split = Split(val=np.array([0]), test=np.array([1]))
    res = db.pride(probs, HAND[None], split)
    np.testing.assert_allclose(res.prior, [3 / 14, 3 / 14, 8 / 14], rtol=1e-8)
    assert res.predictions.tolist() == [0, 1]  # item 0 from eq. 5: (0.4, 0.2, 0.4) -> first max A
    np.testing.assert_allclose(res.debiased_probs[0], [0.4, 0.2, 0.4], rtol=1e-8)
    assert res.test_predictions().tolist() == [1]


def test_pride_from_callable_removes_letter_bias_and_saves_calls():
    # every item follows P_obs(d_j) ∝ prior_j * content_{order[j]} with a strong bias to A;
    # the correct content has the largest preference, but the bias makes the baseline say A
    rng = np.random.default_rng(0)
    n_items, n_opt = 40, 4
    prior = np.array([0.85, 0.05, 0.05, 0.05])
    gold = rng.integers(0, n_opt, n_items)
    content = np.full((n_items, n_opt), 0.2)
    content[np.arange(n_items), gold] = 0.4
    calls = []

    def observe(item: int, order: np.ndarray) -> np.ndarray:
        calls.append(item)
        p = prior * content[item][order]
        return p / p.sum()

    res = db.pride_from_callable(observe, n_items, n_opt, seed=1)
    # 5% of 40 = 2 estimation items x 4 rotations + 38 single calls = 46 calls
    assert len(res.split.val) == 2
    assert len(calls) == 2 * 4 + 38
    np.testing.assert_allclose(res.prior, prior, rtol=1e-8)
    test = res.split.test
    baseline = np.argmax(prior * content[test], axis=1)
    assert np.mean(baseline == gold[test]) < 0.5
    assert np.array_equal(res.test_predictions(), gold[test])


def test_pride_rejects_bad_inputs():
    with pytest.raises(WhiteboxError, match="permutation of"):
        db.permutation_average(HAND[None], orders=np.array([[0, 1, 1], [1, 2, 0], [2, 0, 1]]))
    with pytest.raises(WhiteboxError, match="one row per estimation item"):
        db.pride(np.ones((3, 3)), HAND[None], Split(val=np.array([0, 1]), test=np.array([2])))
    with pytest.raises(WhiteboxError, match="non-negative"):
        db.estimate_prior(-HAND[None])
    with pytest.raises(WhiteboxError, match="letter probabilities"):
        db.pride_from_callable(lambda i, o: np.ones(2), 30, 3)
