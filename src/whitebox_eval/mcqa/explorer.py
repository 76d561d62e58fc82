"""What the report's per-item views of an MCQA run read, kept in the run when it is made.

Bounded: the answer position's attention rows of ``EXPLORER_HEADS`` heads only (the chosen
heads first, then the most accurate others), over each item's own tokens (after the
demonstrations; with no demonstrations, from the first token), float32 (float16 would tie
near-equal weights that the scores told apart). ``arrays/attention_rows.npy`` holds them
token-major for all items one after the other, ``[sum of own tokens, heads]``, item ``i``'s
rows at ``attention_rows_offsets.npy[i:i + 2]``: ``EXPLORER_HEADS x 4`` bytes per own token.
``attention_rows_before.npy`` ``[items, heads]`` holds what those heads put on the tokens
before. The rows come from one more resumable pass (``rows``) after the heads are chosen,
capturing only those heads' layers.

samples.jsonl gains, per item, ``prompt_tokens`` (the own tokens' text, special tokens by
name), ``prompt_tokens_from`` (the first own token's index in the prompt) and
``option_token_positions`` (each option's representative token, prompt indices).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from whitebox_eval.internals import Capture, batch_from_ids
from whitebox_eval.mcqa import head_scores as hs
from whitebox_eval.tasks.token_spans import char_offsets

EXPLORER_HEADS = 8
"""Heads whose attention rows over the prompt the run keeps for every item."""

ROWS_RULE = ("attention from the answer (last) position of the heads in explorer.heads over each item's own tokens "
             "(after the demonstrations), float32, in arrays/attention_rows.npy [own tokens of all items, heads] (item i: "
             "rows attention_rows_offsets[i] to attention_rows_offsets[i + 1]); attention_rows_before.npy [items, heads]: "
             "what those heads put on the tokens before them")


def explorer_heads(selected: dict, tables: dict[str, np.ndarray], extra: Sequence[tuple[int, int]] = (),
                   k: int = EXPLORER_HEADS) -> list[tuple[int, int]]:
    """The chosen heads (best attention head, best QK head, ``extra`` such as HeadScore's),
    then the other heads by their accuracy over all items (attention, else QK table),
    degenerate heads left out: ``k`` heads at most."""
    heads: list[tuple[int, int]] = []
    for method in ("attention", "qk"):
        if method in selected:
            heads.append((int(selected[method].layer), int(selected[method].head)))
    heads += [(int(l), int(h)) for l, h in extra]
    method = "attention" if "attention" in tables else "qk"
    exclude = selected[method].degenerate if method in selected else None
    heads += [(int(l), int(h)) for l, h in hs.rank_heads(tables[method], exclude=exclude)]
    return list(dict.fromkeys(heads))[:k]


def own_tokens(tokenizer, text: str, prefix_len: int, add_special_tokens: bool) -> tuple[int, list[str]]:
    """(index of the first own token, the own tokens' text): the tokens after the
    demonstrations (``prefix_len`` characters), or every token when there are none."""
    ids, offsets = char_offsets(tokenizer, text, add_special_tokens=add_special_tokens)
    start = 0 if prefix_len == 0 else next((i for i, (_, e) in enumerate(offsets) if e > prefix_len), len(ids))
    names = tokenizer.convert_ids_to_tokens(ids[start:])
    return start, [text[a:b] if b > a else str(name) for (a, b), name in zip(offsets[start:], names)]


def rows_pass(study, heads: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
    """The attention rows ``[sum of own tokens, heads]`` (float32, items one after the other),
    their offsets ``[items + 1]``, the mass before the own tokens ``[items, heads]``, and each
    item's sample fields (see the module docstring)."""
    from whitebox_eval.runs.passes import iter_parts, run_pass

    toks = [study.prompts.tokenize(r) for r in study.rendered]
    owned = [own_tokens(study.loaded.tokenizer, r.text, r.prefix_len, study.prompts.special_tokens(r.text)) for r in study.rendered]
    layers = sorted({l for l, _ in heads})
    at = [(layers.index(l), h) for l, h in heads]

    def score(batch: list[int]):
        chunk = [toks[i] for i in batch]
        prefix = None if study.user_edits else study.prefix_for([t.input_ids for t in chunk],
                                                                 min(t.prefix_tokens for t in chunk))
        skip = prefix.length if prefix is not None else 0
        b = batch_from_ids([t.input_ids[skip:] for t in chunk], pad_id=study.loaded.pad_id).to(study.loaded.device)
        attn = study.engine.run(b, [Capture("attn", "last", layers=layers)], study.user_edits,
                                prefix=prefix)["attn"][:, :, :, 0]
        width = max(len(owned[i][1]) for i in batch)
        rows = np.full((len(batch), len(heads), width), np.nan, dtype=np.float32)
        before = np.zeros((len(batch), len(heads)), dtype=np.float32)
        for j, (i, t) in enumerate(zip(batch, chunk)):
            start, n = owned[i][0], len(t.input_ids)
            row = attn[j, :, :, :n].float().cpu().numpy()  # [layers, H, n]: example coordinates
            for k, (li, h) in enumerate(at):
                rows[j, k, :n - start] = row[li, h, start:]
                before[j, k] = row[li, h, :start].sum()
        return None, {"rows": rows, "before": before}

    run_pass(study.folder, "rows", list(range(len(toks))), study.cfg.batch_size, score, world=study.world,
             desc="mcqa rows", show_progress=study.show_progress, collect=False)
    per_item: dict[int, np.ndarray] = {}
    before = np.zeros((len(toks), len(heads)), dtype=np.float32)
    for part in iter_parts(study.folder, "rows"):  # a part's width is its widest item
        for j, i in enumerate(part["index"].tolist()):
            per_item[i] = part["rows"][j, :, :len(owned[i][1])].T
            before[i] = part["before"][j]
    offsets = np.concatenate([[0], np.cumsum([len(names) for _, names in owned])]).astype(np.int64)
    rows = np.concatenate([per_item[i] for i in range(len(toks))]).astype(np.float32)
    fields = [{"prompt_tokens": names, "prompt_tokens_from": start, "option_token_positions": list(t.option_positions)}
              for (start, names), t in zip(owned, toks)]
    return rows, offsets, before, fields
