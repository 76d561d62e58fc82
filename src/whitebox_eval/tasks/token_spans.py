"""Character spans -> token positions, through a fast tokenizer's offsets.

Prompts are rendered as text with character spans (:mod:`.prompts`, 000 App. A.3;
GAR's role spans, 002 sec. 3); the model sees tokens. :func:`char_offsets` encodes a
text with the tokenizer's offset mapping and :func:`span_tokens` lists the tokens a
character span overlaps. Each suite takes what its paper addresses from that list: MCQA
the (first) token holding one character, GAR a contiguous token range, the truth probe
every token of the statement.
"""

from __future__ import annotations

from collections.abc import Sequence

from whitebox_eval.errors import WhiteboxError


def char_offsets(tokenizer, text: str, *, add_special_tokens: bool = True) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids of ``text`` and each token's ``(start, end)`` characters (special tokens: ``(0, 0)``)."""
    if not getattr(tokenizer, "is_fast", False):
        raise WhiteboxError("a fast (Rust) tokenizer is needed for character offsets; load the model's tokenizer.json")
    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=add_special_tokens)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def span_tokens(offsets: Sequence[tuple[int, int]], start: int, end: int) -> list[int]:
    """Indices of the tokens whose characters overlap ``[start, end)``, in order.

    Tokens without characters (special tokens) never overlap. For one character
    (``end = start + 1``) the first index is the token that holds it; a character split
    over several byte tokens is held by all of them."""
    return [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]
