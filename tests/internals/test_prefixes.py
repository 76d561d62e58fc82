"""The shared token prefix of a batch, and the cache that computes each prefix once."""

from __future__ import annotations

import torch

from tiny_models import tiny_loaded
from whitebox_eval.internals import Engine, batch_from_ids
from whitebox_eval.internals.prefixes import PrefixCache, batch_order, shared_prefix_length


def test_the_longest_common_token_prefix():
    a, b, c = [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 9], [1, 2, 3, 4, 5, 7, 8]
    assert shared_prefix_length([a, b, c], min_tokens=1) == 4
    assert shared_prefix_length([a, c], min_tokens=1) == 5
    assert shared_prefix_length([c, a], min_tokens=1) == 5  # order does not matter
    assert shared_prefix_length([[5, 1, 2], [1, 2, 3]], min_tokens=1) == 0  # nothing shared
    assert shared_prefix_length([], min_tokens=1) == 0


def test_a_limit_and_a_minimum_cut_the_prefix():
    a, b = list(range(10)) + [50], list(range(10)) + [60, 61]
    assert shared_prefix_length([a, b], min_tokens=1) == 10
    assert shared_prefix_length([a, b], limit=7, min_tokens=1) == 7
    assert shared_prefix_length([a, b], limit=0, min_tokens=0) == 0
    assert shared_prefix_length([a, b], min_tokens=10) == 10
    assert shared_prefix_length([a, b], min_tokens=11) == 0  # too short to be worth caching
    assert shared_prefix_length([a, b], limit=7, min_tokens=8) == 0


def test_every_prompt_keeps_at_least_one_token():
    a = list(range(8))
    assert shared_prefix_length([a, a + [9]], min_tokens=1) == 7  # a is all prefix but its last token
    assert shared_prefix_length([a], min_tokens=1) == 7  # one prompt: all but its last token
    assert shared_prefix_length([a, a], limit=100, min_tokens=1) == 7
    assert shared_prefix_length([[3], [3, 4]], min_tokens=0) == 0  # a one-token prompt leaves nothing to cache


PREFIX = [5, 9, 17, 33, 2, 41, 7, 7]


def test_the_cache_computes_each_prefix_once_and_matches_the_full_pass():
    engine = Engine(tiny_loaded("llama"))
    cache = PrefixCache(engine, min_tokens=4, keep=2)
    rows = [PREFIX + [12, 3], PREFIX + [21, 30, 11, 6]]
    p = cache.for_batch(rows)
    assert p is not None and p.ids == PREFIX and cache.computed == 1
    assert cache.for_batch([PREFIX + [40], PREFIX + [41, 42]]) is p and cache.computed == 1  # a hit
    assert cache.for_batch(rows, limit=6).ids == PREFIX[:6] and cache.computed == 2
    assert cache.for_batch(rows, limit=3) is None  # shorter than min_tokens
    assert cache.for_batch(rows, min_tokens=9) is None  # a caller's own minimum
    full = engine.run(batch_from_ids(rows)).logits
    cached = engine.run(batch_from_ids([r[p.length:] for r in rows]), prefix=p).logits
    torch.testing.assert_close(cached, full, atol=1e-5, rtol=1e-5)  # float32, other kernel shapes
    cache.for_batch([[1] * 6 + [2], [1] * 6 + [3]])  # a third prefix: the least recently used (p) goes
    assert cache.computed == 3 and cache.for_batch(rows, limit=6) is not None and cache.computed == 3
    assert cache.for_batch(rows) is not p and cache.computed == 4  # evicted (keep=2), computed again


def test_no_prefix_where_a_sliding_window_binds():
    engine = Engine(tiny_loaded("gemma3"))  # sliding window 4: prefix + suffix do not fit
    cache = PrefixCache(engine, min_tokens=2)
    assert cache.for_batch([PREFIX + [12, 3], PREFIX + [21]]) is None and cache.computed == 0


def test_batch_order_is_longest_first_but_keeps_runs_of_shared_demonstrations_together():
    demos = list(range(100, 140))  # 40 tokens every item of a run starts with
    items = [([1, 2, 3], 5), (demos + [1], 50), (demos + [2], 70), (demos + [3], 60), ([4, 5], 9), ([6], 9),
             ([7, 8], 30)]
    # the run (items 1-3) stays in place, longest first; the loose items are sorted together
    # where the first of them stood (ties keep item order)
    assert batch_order(items) == [6, 4, 5, 0, 2, 3, 1]
    assert batch_order(items, min_tokens=41) == [2, 3, 1, 6, 4, 5, 0]  # no run: all longest first
    assert batch_order([]) == []


def test_common_prefix_length_by_hand():
    from whitebox_eval.internals.prefixes import common_prefix_length

    assert common_prefix_length([[1, 2, 3, 4], [1, 2, 9], [1, 2, 3]]) == 2
    assert common_prefix_length([[5, 6], [5, 6]]) == 2  # a whole sequence is shared
    assert common_prefix_length([[5, 6], [5, 6]], at_most=9) == 2  # a bound past the end stops at the end
    assert common_prefix_length([[5, 6, 7], [5, 6, 7]], at_most=1) == 1
    assert common_prefix_length([[1, 2], [3, 2]]) == 0
