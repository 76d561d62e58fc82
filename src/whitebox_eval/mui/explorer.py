"""What the report's per-token MUI view reads, kept in samples.jsonl when the run is made.

Per response token (the scored positions, :func:`~whitebox_eval.mui.keyneurons.token_scores`):
its text, how many of the response's key units peak there (a key unit is counted once, at
the token where its score is highest: under the pair rule of eq. 8/10 it is selected
there), and its ``TOP_UNITS`` highest-scoring units as ``"layer.index"`` with their scores.
Bounded by the response's length (at most ``max_new_tokens``) x ``TOP_UNITS``.
"""

from __future__ import annotations

import torch

TOP_UNITS = 5
"""Units listed per response token."""


def token_view(scores: torch.Tensor, key: torch.Tensor, ids: list[int], tokenizer) -> dict:
    """``scores [tokens, layers, width]`` and the key mask ``[layers, width]`` of one response as
    the sample fields ``response_tokens``, ``token_key_units`` and ``token_top_units``."""
    s = scores.float().cpu()
    n, layers, width = s.shape
    flat = s.reshape(n, layers * width)
    keyed = key.reshape(-1).nonzero().flatten()
    peaks = torch.bincount(flat[:, keyed].argmax(0), minlength=n) if keyed.numel() else torch.zeros(n, dtype=torch.long)
    k = min(TOP_UNITS, flat.shape[1])
    top = torch.topk(flat, k, dim=1)
    units = [[[f"{int(u) // width}.{int(u) % width}", round(float(v), 5)] for u, v in zip(idx, val)]
             for idx, val in zip(top.indices.tolist(), top.values.tolist())]
    texts = [tokenizer.decode([int(t)]) for t in ids] if len(ids) == n else None
    return {"response_tokens": texts, "token_key_units": peaks.tolist(), "token_top_units": units}
