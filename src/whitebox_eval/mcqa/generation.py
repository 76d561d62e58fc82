"""Free generation for paper 004 sec. 2.4: n continuations of one prompt at temperature T.

Reproducibility is by construction, not by batch: every prompt is its own pass (one
unpadded prefill, its key/value cache copied to its ``n_samples`` rows), and sample
``s`` draws its token at step ``t`` by inverting the CDF of ``softmax(logits / T)``
with the uniform ``U[s, t]`` of a table drawn from that prompt's own seed (see
:func:`stream_seed`: run seed, item id, format). So the text of a sample depends only
on the model, the prompt and its seed: not on which other prompts share a batch, the
batch size, the number of ranks, or whether the run was resumed; two formats of one
item never share a stream. Sampling is plain: no top-k / top-p / repetition penalty
(004 samples at T = 1); T = 0 is greedy. Each continuation is cut at its first line
break (answers are one line in every format of 004 App. A.2) or the end-of-text token.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models import LoadedModel


def stream_seed(seed: int, item_id: str | int, stream: str) -> int:
    """A 64-bit seed for one item's samples in one format: sha256 of (seed, item id, stream)."""
    digest = hashlib.sha256(f"{int(seed)}\x1f{item_id}\x1f{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _eos_ids(loaded: LoadedModel) -> set[int]:
    ids: set[int] = set()
    for src in (getattr(loaded.model, "generation_config", None), loaded.tokenizer):
        e = getattr(src, "eos_token_id", None)
        ids.update([e] if isinstance(e, int) else list(e or []))
    return ids


def _repeat_cache(cache, n: int) -> None:
    for layer in cache.layers:
        layer.keys = layer.keys.repeat_interleave(n, dim=0)
        layer.values = layer.values.repeat_interleave(n, dim=0)


def pick_tokens(logits: torch.Tensor, uniforms: np.ndarray, temperature: float) -> torch.Tensor:
    """Token per row: argmax when ``temperature`` is 0, else the inverse CDF of
    ``softmax(logits / T)`` (float64) at ``uniforms`` (one in [0, 1) per row)."""
    if temperature == 0:
        return logits.argmax(-1)
    p = torch.softmax(logits.double() / temperature, dim=-1)
    cdf = p.cumsum(-1)
    u = torch.as_tensor(uniforms, dtype=torch.float64, device=cdf.device).unsqueeze(-1) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_(max=p.shape[-1] - 1)


def sample_prompt(
    loaded: LoadedModel,
    prompt: str,
    *,
    n_samples: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    stop: str | None = "\n",
) -> list[str]:
    """``n_samples`` continuations of one prompt, reproducible from ``seed`` alone."""
    if n_samples < 1 or max_new_tokens < 1:
        raise WhiteboxError("n_samples and max_new_tokens must be >= 1")
    if temperature < 0:
        raise WhiteboxError(f"temperature must be >= 0; got {temperature}")
    from transformers import DynamicCache

    tok, model = loaded.tokenizer, loaded.model
    ids = tok(prompt, return_tensors="pt")["input_ids"].to(loaded.device)
    if ids.shape[1] == 0:
        raise WhiteboxError("cannot generate from an empty prompt")
    uniforms = np.random.default_rng(seed).random((max_new_tokens, n_samples))
    eos = _eos_ids(loaded)
    cache = DynamicCache()
    length = ids.shape[1]
    out = torch.zeros(n_samples, max_new_tokens, dtype=torch.long)
    done = np.zeros(n_samples, dtype=bool)
    texts = [""] * n_samples
    with torch.no_grad():
        logits = model(input_ids=ids, past_key_values=cache, use_cache=True).logits[:, -1]
        _repeat_cache(cache, n_samples)
        logits = logits.expand(n_samples, -1)
        steps = 0
        for t in range(max_new_tokens):
            nxt = pick_tokens(logits, uniforms[t], temperature)
            out[:, t] = nxt.cpu()
            steps = t + 1
            for s in np.flatnonzero(~done):
                if int(out[s, t]) in eos:
                    done[s] = True
                elif stop is not None:
                    texts[s] = tok.decode(out[s, :steps].tolist(), skip_special_tokens=True)
                    done[s] = stop in texts[s]
            if done.all() or t == max_new_tokens - 1:
                break
            pos = torch.full((n_samples, 1), length + t, dtype=torch.long, device=loaded.device)
            logits = model(input_ids=nxt.view(-1, 1), position_ids=pos, past_key_values=cache,
                           use_cache=True).logits[:, -1]
    result = []
    for s in range(n_samples):
        row = out[s, :steps].tolist()
        cut = next((i for i, x in enumerate(row) if x in eos), len(row))
        text = tok.decode(row[:cut], skip_special_tokens=True)
        result.append(text.split(stop, 1)[0] if stop is not None else text)
    return result


def generate(
    loaded: LoadedModel,
    prompts: list[str],
    *,
    n_samples: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 16,
    seeds: list[int] | None = None,
    seed: int = 0,
    stop: str | None = "\n",
) -> list[list[str]]:
    """``n_samples`` continuations per prompt; prompt ``i`` samples from ``seeds[i]``
    (default: :func:`stream_seed` of ``seed``, ``i`` and ``"generate"``)."""
    if seeds is not None and len(seeds) != len(prompts):
        raise WhiteboxError(f"need one seed per prompt: {len(seeds)} seeds for {len(prompts)} prompts")
    seeds = seeds if seeds is not None else [stream_seed(seed, i, "generate") for i in range(len(prompts))]
    return [sample_prompt(loaded, p, n_samples=n_samples, temperature=temperature, max_new_tokens=max_new_tokens,
                          seed=s, stop=stop) for p, s in zip(prompts, seeds)]
