"""Free generation: greedy or sampled continuations of a batch of prompts (004 sec. 2.4).

Generation runs the Hugging Face ``generate`` of the model the engine wraps (the
engine's attention function passes straight through when nothing is captured), with
left padding, and cuts each continuation at the first line break: answers are
one line in every format of 004 App. A.2.
"""

from __future__ import annotations

from typing import Sequence

import torch

from whitebox_eval.internals import make_batch
from whitebox_eval.models import LoadedModel


def generate(
    loaded: LoadedModel,
    prompts: Sequence[str],
    *,
    n_samples: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 16,
    seed: int = 0,
    stop: str | None = "\n",
) -> list[list[str]]:
    """``n_samples`` continuations per prompt (greedy when ``temperature`` is 0).

    Sampling uses multinomial sampling at ``temperature`` with no top-k / top-p
    truncation (004 samples at T = 1), seeded so the same call gives the same text.
    """
    tok = loaded.tokenizer
    batch = make_batch(tok, list(prompts)).to(loaded.device)
    sample = temperature > 0
    gen = torch.Generator(device="cpu").manual_seed(seed)
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
    input_ids, mask, cache = batch.input_ids, batch.attention_mask, None
    if n_samples > 1 and batch.seq_len > 1:
        # Prefill every prompt once and copy its key/value cache to its samples, instead of
        # letting generate() re-encode each prompt n_samples times (the dominant cost).
        from transformers import DynamicCache

        cache = DynamicCache()
        with torch.no_grad():
            loaded.model(input_ids=input_ids[:, :-1], attention_mask=mask[:, :-1],
                         position_ids=batch.position_ids[:, :-1], past_key_values=cache, use_cache=True)
        for layer in cache.layers:
            layer.keys = layer.keys.repeat_interleave(n_samples, dim=0)
            layer.values = layer.values.repeat_interleave(n_samples, dim=0)
        input_ids = input_ids.repeat_interleave(n_samples, dim=0)
        mask = mask.repeat_interleave(n_samples, dim=0)
    with torch.no_grad():
        out = loaded.model.generate(
            input_ids=input_ids,
            attention_mask=mask,
            past_key_values=cache,
            max_new_tokens=max_new_tokens,
            do_sample=sample,
            temperature=temperature if sample else None,
            top_k=0 if sample else None,
            top_p=1.0 if sample else None,
            num_return_sequences=1 if cache is not None else n_samples,
            pad_token_id=tok.pad_token_id,
            # every sequence stops at its first line break; the batch stops when all have
            stop_strings=[stop] if stop else None,
            tokenizer=tok if stop else None,
        )
    texts = tok.batch_decode(out[:, batch.seq_len:], skip_special_tokens=True)
    if stop is not None:
        texts = [t.split(stop, 1)[0] for t in texts]
    return [texts[i * n_samples:(i + 1) * n_samples] for i in range(len(prompts))]
