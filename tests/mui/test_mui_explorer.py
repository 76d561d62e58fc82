"""The per-token fields a MUI sample keeps for the report (mui/explorer.py), on hand-made scores."""

from __future__ import annotations

import torch

from whitebox_eval.mui.explorer import token_view


class _Tok:
    def decode(self, ids):
        return "".join(chr(96 + i) for i in ids)


def test_each_key_unit_is_counted_once_where_it_peaks_and_top_units_are_ranked():
    scores = torch.zeros(3, 2, 4)  # [tokens, layers, width]
    scores[0, 0, 1], scores[2, 0, 1] = 0.5, 0.9  # unit 0.1 peaks at token 2
    scores[1, 1, 3] = 0.7  # unit 1.3 peaks at token 1
    scores[0, 1, 0] = 0.8  # a high score outside the key set
    key = torch.zeros(2, 4, dtype=torch.bool)
    key[0, 1] = key[1, 3] = True
    view = token_view(scores, key, [1, 2, 3], _Tok())
    assert view["response_tokens"] == ["a", "b", "c"]
    assert view["token_key_units"] == [0, 1, 1]
    assert view["token_top_units"][0][:2] == [["1.0", 0.8], ["0.1", 0.5]]
    assert view["token_top_units"][2][0] == ["0.1", 0.9] and len(view["token_top_units"][2]) == 5
    assert token_view(scores, key, [1, 2], _Tok())["response_tokens"] is None  # ids and positions differ
