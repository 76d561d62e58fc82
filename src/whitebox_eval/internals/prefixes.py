"""The token prefix a batch of prompts shares, cached once (k-shot demonstrations).

A shared prefix is found on the prompts' tokens, never by tokenizing the shared text
alone: a BPE tokenizer merges across the end of that text differently once the rest
of the prompt follows (lm-eval's ``"\\n\\n"`` after the last demonstration is one
token at the end of a string, but two ``"\\n"`` tokens before the next question), so
the tokens of the text alone need not begin the prompt's tokens, and a cache built
from them would never be used.

:func:`shared_prefix_length` is the one rule: the longest common token prefix of a
batch, cut at a caller's ``limit`` (e.g. the end of the demonstrations as tokenized
inside each prompt, so every batch of a subject finds the same prefix) and short of
each prompt's last token (a pass computes at least one token per prompt). A prefix
shorter than :data:`MIN_PREFIX_TOKENS` is not used, nor, where no limit marks what the
prompts share by construction, one shorter than :data:`MIN_UNMARKED_TOKENS`.
:class:`PrefixCache` keeps the
key/values of the last few prefixes (:meth:`~whitebox_eval.internals.engine.Engine.prefix`)
and hands out ``None`` where the engine could not use one (a sliding window shorter
than prefix + suffix): the caller then runs the full prompts. Scores with and without
a prefix are equal up to float rounding (different kernel shapes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

from whitebox_eval.errors import WhiteboxError

#: below this many shared tokens a prefix is not cached: it saves less than its own forward
#: call costs (lm-eval's 0-shot MMLU header, 15-20 tokens, is worth it: ~25% of a 0-shot pass)
MIN_PREFIX_TOKENS = 8
#: the least a caller without a limit (nothing marks the instruction and demonstrations in its
#: prompts: the cloze contexts) caches: a shorter common run is chance (questions that begin
#: alike, e.g. SSD's 10-token cue) and changes from batch to batch; demonstrations are longer
MIN_UNMARKED_TOKENS = 32
#: prefixes kept at once (MMLU's dev demonstrations change with the subject: items come in
#: subject order, so the last few suffice)
KEEP_PREFIXES = 4


def shared_prefix_length(seqs: Sequence[Sequence[int]], *, limit: int | None = None,
                         min_tokens: int = MIN_PREFIX_TOKENS) -> int:
    """Length of the longest common token prefix of ``seqs``, at most ``limit`` and leaving
    every sequence at least one token after it; 0 if that is shorter than ``min_tokens``."""
    if not seqs:
        return 0
    n = min(len(s) for s in seqs) - 1
    if limit is not None:
        n = min(n, limit)
    n = common_prefix_length(seqs, at_most=n)
    return n if n >= max(1, min_tokens) else 0


def common_prefix_length(seqs: Sequence[Sequence[int]], at_most: int | None = None) -> int:
    """Length of the longest token prefix every sequence of ``seqs`` starts with (at most ``at_most``)."""
    first = seqs[0]
    n = min(len(s) for s in seqs)
    if at_most is not None:
        n = min(n, max(0, at_most))
    for s in seqs[1:]:
        k = 0
        while k < n and s[k] == first[k]:
            k += 1
        n = k
    return n


def batch_order(items: Iterable[tuple[Sequence[int], int]], *, min_tokens: int = MIN_UNMARKED_TOKENS) -> list[int]:
    """The order in which to batch items, given each item's first tokens and its length in
    tokens: longest first, as lm-eval's ``Collator`` orders requests, so a batch holds items
    of about one length and little padding; ties keep item order. A run of consecutive
    items that start with the same ``min_tokens`` tokens or more (the same demonstrations)
    stays in its place and is sorted within itself, so its prefix is still cached once for
    the run; the items outside such runs are sorted together, where the first of them stood.
    """
    groups: list[list[tuple[int, int]]] = []
    head: Sequence[int] = ()
    for i, (ids, n) in enumerate(items):
        if groups and common_prefix_length([head, ids]) >= min_tokens:
            groups[-1].append((i, n))
        else:
            groups.append([(i, n)])
            head = ids
    runs: list[list[tuple[int, int]]] = []
    loose: list[tuple[int, int]] | None = None
    for g in groups:
        if len(g) > 1:
            runs.append(g)
        elif loose is None:
            loose = list(g)
            runs.append(loose)
        else:
            loose += g
    return [i for run in runs for i, _ in sorted(run, key=lambda t: (-t[1], t[0]))]


class PrefixCache:
    """Cached prefixes of one engine, keyed by their tokens (the :data:`KEEP_PREFIXES` most
    recently used are kept)."""

    def __init__(self, engine, *, min_tokens: int = MIN_PREFIX_TOKENS, keep: int = KEEP_PREFIXES):
        self.engine, self.min_tokens, self.keep = engine, min_tokens, keep
        self._cached: OrderedDict[tuple[int, ...], object] = OrderedDict()
        self.computed = 0  # prefixes computed so far (a benchmark reads it)

    def for_batch(self, seqs: Sequence[Sequence[int]], *, limit: int | None = None, min_tokens: int | None = None):
        """The cached :class:`~whitebox_eval.internals.engine.Prefix` every sequence of
        ``seqs`` starts with (:func:`shared_prefix_length`; ``min_tokens`` overrides the
        cache's), or None: nothing long enough is shared, or prefix + longest suffix would
        not fit the model's sliding window."""
        n = shared_prefix_length(seqs, limit=limit, min_tokens=self.min_tokens if min_tokens is None else min_tokens)
        if not n or not self.engine.prefix_fits(n, max(len(s) for s in seqs) - n):
            return None
        key = tuple(seqs[0][:n])
        if key in self._cached:
            self._cached.move_to_end(key)
            return self._cached[key]
        try:
            prefix = self.engine.prefix(key)
        except WhiteboxError:  # the model's cache keeps fewer tokens (sliding window): run in full
            return None
        self.computed += 1
        self._cached[key] = prefix
        while len(self._cached) > self.keep:
            self._cached.popitem(last=False)
        return prefix
