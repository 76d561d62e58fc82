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
    with torch.no_grad():
        out = loaded.model.generate(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            max_new_tokens=max_new_tokens,
            do_sample=sample,
            temperature=temperature if sample else None,
            top_k=0 if sample else None,
            top_p=1.0 if sample else None,
            num_return_sequences=n_samples,
            pad_token_id=tok.pad_token_id,
        )
    texts = tok.batch_decode(out[:, batch.seq_len:], skip_special_tokens=True)
    if stop is not None:
        texts = [t.split(stop, 1)[0] for t in texts]
    return [texts[i * n_samples:(i + 1) * n_samples] for i in range(len(prompts))]
