"""tasks.token_spans: character spans -> token indices from a fast tokenizer's offsets."""

from __future__ import annotations

import random

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.token_spans import char_offsets, span_tokens

# BOS, "Hi", " é" split over two byte tokens (both hold character 3), "!", EOS
OFFSETS = [(0, 0), (0, 2), (2, 3), (3, 4), (3, 4), (4, 5), (0, 0)]


def test_span_tokens_lists_the_overlapping_tokens_never_a_special_one():
    assert span_tokens(OFFSETS, 0, 1) == [1]
    assert span_tokens(OFFSETS, 1, 4) == [1, 2, 3, 4]
    assert span_tokens(OFFSETS, 3, 4) == [3, 4]  # a split character: every piece
    assert span_tokens(OFFSETS, 5, 9) == []


def _old_token_at(offsets, char):
    """mcqa/tokens.py's lookup before token_spans (frozen)."""
    for i, (start, end) in enumerate(offsets):
        if start <= char < end:
            return i
    return None


def test_the_first_token_of_one_character_is_the_token_that_holds_it():
    rng = random.Random(0)
    for _ in range(200):
        offsets, pos = [(0, 0)], 0
        for _ in range(rng.randint(1, 12)):
            step = rng.randint(0, 3)  # 0: a token that repeats the last one's characters (split bytes)
            offsets.append((pos, pos + max(step, 1)) if step else offsets[-1])
            pos += step
        for c in range(pos + 2):
            got = span_tokens(offsets, c, c + 1)
            assert (got[0] if got else None) == _old_token_at(offsets, c)


class _Fast:
    is_fast = True

    def __call__(self, text, return_offsets_mapping, add_special_tokens):
        assert return_offsets_mapping
        ids = ([1] if add_special_tokens else []) + [ord(c) for c in text]
        offs = ([(0, 0)] if add_special_tokens else []) + [(i, i + 1) for i in range(len(text))]
        return {"input_ids": ids, "offset_mapping": offs}


def test_char_offsets_reads_ids_and_offsets_and_needs_a_fast_tokenizer():
    assert char_offsets(_Fast(), "ab") == ([1, 97, 98], [(0, 0), (0, 1), (1, 2)])
    assert char_offsets(_Fast(), "ab", add_special_tokens=False) == ([97, 98], [(0, 1), (1, 2)])
    slow = _Fast()
    slow.is_fast = False
    with pytest.raises(WhiteboxError, match="fast"):
        char_offsets(slow, "ab")
