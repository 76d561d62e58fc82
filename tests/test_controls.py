"""controls: each named rule draws exactly what its suite drew before (frozen copies of the
old draw code below), the Head type, the one failure behaviour and the record."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import numpy as np
import pytest

from whitebox_eval.controls import (
    RULES,
    Head,
    band,
    control_record,
    draw_seed,
    random_heads,
)
from whitebox_eval.errors import WhiteboxError

# ------------------------------------------------------------------ frozen copies of the old draw code


def _old_mcqa(key, n_layers, n_heads, draws, seed):
    """mcqa/ablation.py before controls: random_band_heads in ablation_study's loop."""
    rng = random.Random(f"ablation-{seed}")
    out = []
    for _ in range(draws):
        taken = set(key)
        drawn = []
        for layer, _ in sorted(key):
            for near in sorted(range(n_layers), key=lambda x: (abs(x - layer), x)):
                free = [h for h in range(n_heads) if (near, h) not in taken]
                if free:
                    head = (near, rng.choice(free))
                    taken.add(head)
                    drawn.append(head)
                    break
            else:
                raise WhiteboxError("cannot draw")
        out.append(drawn)
    return out


def _old_gar(selected, n_layers_heads, draws, seed):
    """gar/study.py random_head_draws before controls."""
    if not selected:
        return (0, -1), []
    lo, hi = min(l for l, _ in selected), max(l for l, _ in selected)
    pool = [(l, h) for l in range(lo, hi + 1) for h in range(n_layers_heads[1]) if (l, h) not in set(selected)]
    if len(pool) < len(selected):
        return (lo, hi), []
    rng = np.random.default_rng(seed)
    sets = []
    for _ in range(draws):
        idx = rng.choice(len(pool), size=len(selected), replace=False)
        sets.append([pool[int(i)] for i in idx])
    return (lo, hi), sets


def _old_span_random_heads(n_layers, n_heads, n, seed, exclude=(), layers=None):
    lo, hi = layers if layers is not None else (0, n_layers - 1)
    banned = set(map(tuple, exclude))
    pool = [(l, h) for l in range(lo, hi + 1) for h in range(n_heads) if (l, h) not in banned]
    if not 0 < n <= len(pool):
        raise WhiteboxError("cannot draw")
    return sorted(random.Random(f"attentionspan/random-heads/{seed}").sample(pool, n))


def _old_span_band(key, n_layers, n_heads):
    lo, hi = min(l for l, _ in key), max(l for l, _ in key)
    banned = set(map(tuple, key))
    while True:
        free = sum((l, h) not in banned for l in range(lo, hi + 1) for h in range(n_heads))
        if free >= len(key):
            return lo, hi
        if lo == 0 and hi == n_layers - 1:
            raise WhiteboxError("fewer heads")
        lo, hi = max(0, lo - 1), min(n_layers - 1, hi + 1)


def _old_span(key, n_layers, n_heads, draws, seed):
    """attentionspan evaluation_settings / sweep_settings before controls."""
    b = _old_span_band(key, n_layers, n_heads)
    return [_old_span_random_heads(n_layers, n_heads, len(key), seed * 1000 + d, exclude=key, layers=b)
            for d in range(draws)]


# ------------------------------------------------------------------ cases

ARCHS = [(2, 4), (3, 3), (4, 8), (12, 3), (30, 9), (1, 12)]


def _cases():
    """(n_layers, n_heads, key) with random keys, crowded layers (fallback / widening) and edge layers."""
    out = []
    for n_layers, n_heads in ARCHS:
        total = n_layers * n_heads
        pick = random.Random(f"{n_layers}x{n_heads}")
        for k in sorted({1, 2, 3, min(5, total // 2), total // 2}):
            if 1 <= k <= total // 2:
                out.append((n_layers, n_heads, pick.sample([(l, h) for l in range(n_layers) for h in range(n_heads)], k)))
        crowd = min(n_heads, total // 2)
        out.append((n_layers, n_heads, [(n_layers - 1, h) for h in range(crowd)]))  # a full last layer
        out.append((n_layers, n_heads, [(0, h) for h in range(crowd)][::-1]))  # a full first layer, unsorted
    return out


CASES = _cases()
SEEDS = [0, 1, 7, 12345]


@pytest.mark.parametrize("n_layers,n_heads,key", CASES)
def test_same_layers_reproduces_the_old_mcqa_draws(n_layers, n_heads, key):
    for seed in SEEDS:
        new = random_heads(key, (n_layers, n_heads), 4, seed, "same-layers")
        assert new == _old_mcqa(key, n_layers, n_heads, 4, seed)
        assert all(type(h) is Head for d in new for h in d)


@pytest.mark.parametrize("n_layers,n_heads,key", CASES)
def test_layer_band_reproduces_the_old_gar_draws_in_order(n_layers, n_heads, key):
    for seed in SEEDS:
        old_band, old = _old_gar(key, (n_layers, n_heads), 4, seed)
        if not old:  # the band is too small: gar drew nothing, the rule now says what to change
            with pytest.raises(WhiteboxError, match="layer-band"):
                random_heads(key, (n_layers, n_heads), 4, seed, "layer-band")
            continue
        assert random_heads(key, (n_layers, n_heads), 4, seed, "layer-band") == old  # order kept: gar splits T/F
        assert band(key, (n_layers, n_heads), "layer-band") == old_band


@pytest.mark.parametrize("n_layers,n_heads,key", CASES)
def test_widened_band_reproduces_the_old_span_draws(n_layers, n_heads, key):
    for seed in SEEDS:
        assert random_heads(key, (n_layers, n_heads), 4, seed, "widened-band") == _old_span(
            key, n_layers, n_heads, 4, seed)
    assert band(key, (n_layers, n_heads), "widened-band") == _old_span_band(key, n_layers, n_heads)


def test_the_cases_exercise_fallback_widening_and_a_too_small_band():
    fallback = widened = too_small = 0
    for n_layers, n_heads, key in CASES:
        layers = {l for l, _ in key}
        drawn = random_heads(key, (n_layers, n_heads), 1, 0, "same-layers")[0]
        fallback += any(l not in layers for l, _ in drawn)
        widened += band(key, (n_layers, n_heads), "widened-band") != band(key, (n_layers, n_heads), "layer-band")
        too_small += not _old_gar(key, (n_layers, n_heads), 1, 0)[1]
    assert fallback and widened and too_small


@pytest.mark.parametrize("rule", list(RULES))
def test_every_rule_never_draws_a_key_head_nor_a_head_twice(rule):
    key = [(4, 1), (4, 2), (6, 0)]
    for seed in range(20):
        for drawn in random_heads(key, (12, 3), 3, seed, rule):
            assert len(drawn) == 3 and len(set(drawn)) == 3 and not set(drawn) & set(key)
            assert all(0 <= l < 12 and 0 <= h < 3 for l, h in drawn)


def test_seeds_matter_and_repeat():
    key = [(2, 0), (5, 3)]
    for rule in RULES:
        a = random_heads(key, (8, 8), 3, 1, rule)
        assert a == random_heads(key, (8, 8), 3, 1, rule)
        assert a != random_heads(key, (8, 8), 3, 2, rule)
        assert a[0] != a[1]  # draws differ from each other


@pytest.mark.parametrize("rule", list(RULES))
def test_too_few_heads_is_one_line_naming_the_fix(rule):
    key = [(0, 0), (0, 1)]
    with pytest.raises(WhiteboxError, match="use a smaller --ablation-k$") as e:
        random_heads(key, (1, 3), 1, 0, rule, fix="use a smaller --ablation-k")
    assert "\n" not in str(e.value) and "2 random heads" in str(e.value) and rule in str(e.value)
    with pytest.raises(WhiteboxError, match="fewer key heads"):
        random_heads(key, (1, 3), 1, 0, rule)
    assert random_heads(key, (1, 3), 0, 0, rule) == []  # no draws asked: nothing to check


def test_layer_band_fails_where_widened_band_widens():
    key = [(0, 0), (0, 1), (0, 2)]
    with pytest.raises(WhiteboxError, match="layers 0-0 have only 0 heads besides the 3 key heads"):
        random_heads(key, (3, 3), 1, 0, "layer-band")
    assert all(l == 1 for l, _ in random_heads(key, (3, 3), 1, 0, "widened-band")[0])


def test_bad_rule_bad_head_and_bad_draws_are_refused():
    with pytest.raises(WhiteboxError, match="same-layers, layer-band, widened-band"):
        random_heads([(0, 0)], (2, 2), 1, 0, "nearby")
    with pytest.raises(WhiteboxError, match="key head 2.0 is not in the model"):
        random_heads([(2, 0)], (2, 2), 1, 0, "same-layers")
    with pytest.raises(WhiteboxError, match=">= 0"):
        random_heads([(0, 0)], (2, 2), -1, 0, "same-layers")


def test_no_key_heads_draw_empty_sets():
    assert random_heads([], (2, 2), 2, 0, "widened-band") == [[], []]
    assert band([], (2, 2), "layer-band") is None


def test_an_architecture_gives_the_sizes():
    arch = SimpleNamespace(n_layers=12, n_heads=3)
    key = [(4, 1), (6, 0)]
    assert random_heads(key, arch, 2, 5, "widened-band") == random_heads(key, (12, 3), 2, 5, "widened-band")


def test_head_sorts_prints_and_parses():
    heads = [Head(3, 1), Head(1, 7), Head(1, 2)]
    assert sorted(heads) == [(1, 2), (1, 7), (3, 1)]
    assert str(Head(14, 18)) == "14.18" and Head.parse(" 14.18 ") == Head(14, 18) == (14, 18)
    assert json.loads(json.dumps(Head(2, 5))) == [2, 5]
    assert Head.parse("L14H18") == Head.parse("l14h18") == Head(14, 18)  # the reports' notation too
    assert Head.parse_list("14.0, L17H1 3.2") == [(14, 0), (17, 1), (3, 2)]
    for bad in ("14", "a.b", "1.2.3", "-1.2", "", "L14", "L1.2", "14H2"):
        with pytest.raises(WhiteboxError, match="LAYER.HEAD"):
            Head.parse(bad)


def test_control_record_names_the_rule_and_every_drawn_head():
    key = [(4, 1), (4, 2), (6, 0)]
    drawn = random_heads(key, (12, 3), 2, 3, "widened-band")
    rec = control_record("widened-band", key, (12, 3), 3, drawn)
    assert rec == {"rule": "widened-band", "description": RULES["widened-band"], "seed": 3, "band": [4, 6],
                   "draws": [[list(h) for h in d] for d in drawn]}
    assert json.loads(json.dumps(rec)) == rec
    assert "band" not in control_record("same-layers", key, (12, 3), 3, [])
    assert draw_seed(3, 1) == 3001
