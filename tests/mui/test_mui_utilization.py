"""Key sets and MUI union arithmetic (paper 001 sec. 2.2)."""

import numpy as np
import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.utilization import (
    KeySets,
    matched_random_mask,
    mui_by_group,
    mui_from_masks,
    random_subset_mui,
)


def mask(l0=(), l1=()):
    m = np.zeros((2, 4), dtype=bool)
    m[0, list(l0)] = True
    m[1, list(l1)] = True
    return m


# 2 layers x 4 neurons = 8 units
S0 = mask({0, 1}, {2})
S1 = mask({1, 2}, {2})
S2 = mask((), {3})


@pytest.fixture
def keysets():
    return KeySets.from_masks([S0, S1, S2], sample_ids=["a", "b", "c"])


def test_mui_union_arithmetic(keysets):
    # union: L0 {0,1,2} + L1 {2,3} = 5 of 8 units
    assert keysets.n_activated() == 5
    assert keysets.mui() == pytest.approx(5 / 8)
    # samples a, b: L0 {0,1,2} + L1 {2} = 4 -> 0.5 (the shared L1 n2 counts once)
    assert keysets.mui([0, 1]) == pytest.approx(0.5)
    assert keysets.mui(np.array([False, False, True])) == pytest.approx(1 / 8)
    assert keysets.counts().tolist() == [3, 3, 1]
    assert keysets.layer_mui().tolist() == [3 / 4, 2 / 4]
    assert mui_from_masks([S0, S1, S2]) == pytest.approx(5 / 8)
    assert mui_by_group(keysets, {"ab": [0, 1], "c": [2]}) == {"ab": 0.5, "c": 0.125}


def test_add_indices_dedupes_and_matches_mask():
    ks = KeySets(n_layers=2, width=4)
    ks.add_indices([0, 0, 1, 0], [1, 0, 2, 1])  # (0,1) given twice
    assert np.array_equal(ks.mask(0), S0)
    assert ks.flat_indices(0).tolist() == [0, 1, 6]  # l * 4 + i


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_save_load_round_trip(tmp_path, keysets, suffix):
    path = keysets.save(tmp_path / f"keys{suffix}")
    back = KeySets.load(path)
    assert (back.n_layers, back.width, back.kind) == (2, 4, "neuron")
    assert back.sample_ids == ["a", "b", "c"]
    for i, m in enumerate([S0, S1, S2]):
        assert np.array_equal(back.mask(i), m)
    assert back.mui([0, 1]) == pytest.approx(0.5)


def test_feature_kind_and_subset(tmp_path):
    ks = KeySets.from_masks([S0, S2], kind="feature")
    sub = ks.subset([1])
    assert sub.kind == "feature" and len(sub) == 1 and sub.mui() == pytest.approx(1 / 8)
    assert KeySets.load(ks.save(tmp_path / "f.npz")).kind == "feature"


def test_random_subset_mui(keysets):
    # only one subset of size 3 exists -> every draw gives 5/8
    assert np.allclose(random_subset_mui(keysets, 3, draws=4, seed=1), 5 / 8)
    one = random_subset_mui(keysets, 1, draws=20, seed=7)
    assert set(np.round(one * 8).astype(int)) <= {3, 1}
    assert np.array_equal(one, random_subset_mui(keysets, 1, draws=20, seed=7))


def test_matched_random_mask():
    key = mask({0, 1}, {2})
    rnd = matched_random_mask(key, seed=3)
    assert rnd.sum(axis=1).tolist() == [2, 1]
    assert not (rnd & key).any()
    assert np.array_equal(rnd, matched_random_mask(key, seed=3))
    glob = matched_random_mask(key, seed=3, per_layer=False)
    assert glob.sum() == 3 and not (glob & key).any()


def test_errors(tmp_path, keysets):
    with pytest.raises(WhiteboxError, match="shape"):
        keysets.add(np.zeros((3, 4), dtype=bool))
    with pytest.raises(WhiteboxError, match="empty"):
        keysets.mui([])
    with pytest.raises(WhiteboxError, match="out of range"):
        keysets.mui([5])
    with pytest.raises(WhiteboxError, match="suffix|end in"):
        keysets.save(tmp_path / "keys.json")
    with pytest.raises(WhiteboxError, match="not found"):
        KeySets.load(tmp_path / "missing.npz")
