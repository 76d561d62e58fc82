"""Random-head controls: the one ``Head`` type and the rules that draw control heads.

A control repeats an intervention on as many random heads as there are selected ("key")
heads, so that an effect of the key heads can be told from an effect of touching any
heads at all. The papers do not define the draw; each suite keeps its own rule, by name:

- ``"same-layers"`` (000 sec. 6, fig. 4; MCQA ablation): per key head (in sorted
  order), one random non-key head of the same layer not yet drawn; only when that layer
  has none left, the nearest layer that has one (lower layer first on equal distance).
  A draw has the key heads' layer profile. One ``random.Random(f"ablation-{seed}")``
  stream for all draws, in draw order.
- ``"layer-band"`` (002 sec. 5 and App. E; GAR truth-heads and probe controls): the key
  heads' layers min..max, never widened; each draw takes ``len(key)`` distinct non-key
  heads of that band in ``numpy.random.default_rng(seed).choice`` order (one stream for
  all draws; the order matters: GAR splits a draw into True and False heads).
- ``"widened-band"`` (003 sec. 5.1; AttentionSpan reinforcement): the key heads' layers
  min..max, widened by one layer on each side (within the model) until the band holds
  ``len(key)`` non-key heads; draw ``d`` is ``len(key)`` heads sampled uniformly from
  it with ``random.Random(f"attentionspan/random-heads/{draw_seed(seed, d)}")``, sorted.

Every rule: never a key head, no head twice within a draw, ``len(key)`` heads per draw.
When that is impossible a rule raises one ``WhiteboxError`` saying what to change
(``fix`` lets the suite name its own option); with ``draws=0`` nothing is drawn and
nothing is checked. :func:`control_record` is what results.json carries for a control.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numpy as np

from whitebox_eval.errors import WhiteboxError


class Head(NamedTuple):
    """One attention head: ``(layer, head)``, both from 0. Sorts by layer, then head;
    equal to the plain tuple; written ``"L.H"`` (the papers' notation)."""

    layer: int
    head: int

    def __str__(self) -> str:
        return f"{self.layer}.{self.head}"

    @classmethod
    def parse(cls, text: str) -> Head:
        """``"14.18"`` or ``"L14H18"`` (the papers' and the reports' notations, any case) ->
        ``Head(14, 18)``."""
        raw = str(text).strip()
        match = _HEAD.fullmatch(raw)
        if match is None:
            raise WhiteboxError(f"cannot read head {text!r}: write LAYER.HEAD or LxHy, e.g. 14.18 or L14H18")
        layer, head = (match[1], match[2]) if match[1] is not None else (match[3], match[4])
        return cls(int(layer), int(head))

    @classmethod
    def parse_list(cls, text: str) -> list[Head]:
        """``"14.18,L14H46"`` -> [Head(14, 18), Head(14, 46)] (comma or space separated)."""
        heads = [cls.parse(part) for part in re.split(r"[,\s]+", str(text)) if part.strip()]
        if not heads:
            raise WhiteboxError("no heads given: write them as LAYER.HEAD or LxHy, comma separated (14.18,L14H46)")
        return heads


_HEAD = re.compile(r"[Ll](\d+)[Hh](\d+)|(\d+)\.(\d+)")


class _Sizes(Protocol):
    n_layers: int
    n_heads: int


RULES: dict[str, str] = {
    "same-layers": ("per key head, one random non-key head of the same layer (nearest layer, lower first, "
                    "only when that layer has none left); never a key head; as many heads as key heads"),
    "layer-band": ("as many distinct non-key heads as key heads, drawn uniformly from the key heads' layers "
                   "(lowest to highest key layer, never widened)"),
    "widened-band": ("as many distinct non-key heads as key heads, drawn uniformly from the key heads' layers "
                     "(min..max), widened by one layer on each side until that band holds enough non-key heads"),
}
"""Rule name -> the sentence results.json records for it."""

DEFAULT_FIX = "use fewer key heads"


def sizes(architecture_or_sizes: _Sizes | tuple[int, int]) -> tuple[int, int]:
    """``(n_layers, n_heads)`` of an :class:`~whitebox_eval.models.Architecture` (or of a pair)."""
    if hasattr(architecture_or_sizes, "n_layers"):
        n_layers, n_heads = architecture_or_sizes.n_layers, architecture_or_sizes.n_heads
    else:
        n_layers, n_heads = architecture_or_sizes
    return int(n_layers), int(n_heads)


def _check(rule: str, key: Sequence[Head], n_layers: int, n_heads: int) -> None:
    if rule not in RULES:
        raise WhiteboxError(f"unknown random-head rule {rule!r}; choose one of {', '.join(RULES)}")
    for layer, head in key:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise WhiteboxError(f"key head {layer}.{head} is not in the model ({n_layers} layers x {n_heads} heads)")


def band(key_heads: Sequence[tuple[int, int]], architecture_or_sizes: _Sizes | tuple[int, int],
         rule: str) -> tuple[int, int] | None:
    """The layers (inclusive) a band rule draws from; ``None`` for ``"same-layers"`` or no key heads.

    ``"widened-band"`` stops at the whole model even if it still lacks heads
    (:func:`random_heads` then raises)."""
    n_layers, n_heads = sizes(architecture_or_sizes)
    key = [Head(int(l), int(h)) for l, h in key_heads]
    _check(rule, key, n_layers, n_heads)
    if rule == "same-layers" or not key:
        return None
    lo, hi = min(l for l, _ in key), max(l for l, _ in key)
    if rule == "widened-band":
        banned = set(key)
        while (sum((l, h) not in banned for l in range(lo, hi + 1) for h in range(n_heads)) < len(key)
               and (lo > 0 or hi < n_layers - 1)):
            lo, hi = max(0, lo - 1), min(n_layers - 1, hi + 1)
    return lo, hi


def draw_seed(seed: int, d: int) -> int:
    """The seed of draw ``d`` under ``"widened-band"`` (each draw its own stream; span records it)."""
    return seed * 1000 + d


def random_heads(key_heads: Sequence[tuple[int, int]], architecture_or_sizes: _Sizes | tuple[int, int],
                 draws: int, seed: int, rule: str, *, fix: str = DEFAULT_FIX) -> list[list[Head]]:
    """``draws`` random-head sets for ``key_heads`` under the named ``rule`` (module doc).

    Each set has ``len(key_heads)`` heads, never a key head, none twice. ``fix`` ends the
    error raised when the rule cannot draw that many (e.g. ``"use a smaller --ablation-k"``).
    """
    n_layers, n_heads = sizes(architecture_or_sizes)
    key = [Head(int(l), int(h)) for l, h in key_heads]
    _check(rule, key, n_layers, n_heads)
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 0:
        raise WhiteboxError(f"the number of random-head draws must be an integer >= 0; got {draws!r}")
    if draws == 0:
        return []
    if not key:
        return [[] for _ in range(draws)]
    span = band(key, (n_layers, n_heads), rule)
    lo, hi = span if span is not None else (0, n_layers - 1)
    banned = set(key)
    pool = [Head(l, h) for l in range(lo, hi + 1) for h in range(n_heads) if (l, h) not in banned]
    if len(pool) < len(key):
        where = "the model has" if (lo, hi) == (0, n_layers - 1) else f"layers {lo}-{hi} have"
        raise WhiteboxError(f"cannot draw {len(key)} random heads ({rule} rule): {where} only {len(pool)} heads "
                            f"besides the {len(key)} key heads; {fix}")
    return _DRAW[rule](key, pool, n_layers, n_heads, int(draws), seed)


def _same_layers(key, pool, n_layers, n_heads, draws, seed) -> list[list[Head]]:
    rng = random.Random(f"ablation-{seed}")
    out = []
    for _ in range(draws):
        taken = set(key)
        drawn: list[Head] = []
        for layer, _ in sorted(key):
            for near in sorted(range(n_layers), key=lambda x: (abs(x - layer), x)):
                free = [h for h in range(n_heads) if (near, h) not in taken]
                if free:  # the pool check above guarantees some layer has one
                    head = Head(near, rng.choice(free))
                    taken.add(head)
                    drawn.append(head)
                    break
        out.append(drawn)
    return out


def _layer_band(key, pool, n_layers, n_heads, draws, seed) -> list[list[Head]]:
    rng = np.random.default_rng(seed)
    return [[pool[int(i)] for i in rng.choice(len(pool), size=len(key), replace=False)] for _ in range(draws)]


def _widened_band(key, pool, n_layers, n_heads, draws, seed) -> list[list[Head]]:
    return [sorted(random.Random(f"attentionspan/random-heads/{draw_seed(seed, d)}").sample(pool, len(key)))
            for d in range(draws)]


_DRAW: dict[str, Callable[..., list[list[Head]]]] = {
    "same-layers": _same_layers, "layer-band": _layer_band, "widened-band": _widened_band}


def control_record(rule: str, key_heads: Sequence[tuple[int, int]], architecture_or_sizes: _Sizes | tuple[int, int],
                   seed: int, draws: Sequence[Sequence[tuple[int, int]]]) -> dict:
    """What results.json carries for a random-head control (the same shape in every suite):
    the rule's name and sentence, the seed, the band (band rules) and every drawn head,
    one ``[layer, head]`` list per head, one list per draw."""
    out: dict = {"rule": rule, "description": RULES.get(rule, ""), "seed": seed}
    lohi = band(key_heads, architecture_or_sizes, rule)
    if lohi is not None:
        out["band"] = list(lohi)
    out["draws"] = [[[int(l), int(h)] for l, h in heads] for heads in draws]
    return out
