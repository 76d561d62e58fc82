"""Free generation for paper 004 sec. 2.4: n continuations of one prompt at temperature T.

A thin caller of the one decoder, :func:`whitebox_eval.internals.generation.generate`.
Reproducibility is by construction, not by batch: every prompt is its own pass (one
unpadded prefill whose key/value cache serves its ``n_samples`` rows), and sample ``s``
draws its token at step ``t`` by inverting the CDF of ``softmax(logits / T)`` at the
uniform ``U[s, t]`` of a table drawn from that prompt's own seed (see
:func:`stream_seed`: run seed, item id, format). So the text of a sample depends only
on the model, the prompt and its seed: not on which other prompts share a batch, the
batch size, the number of ranks, or whether the run was resumed; two formats of one
item never share a stream. Sampling is plain: no top-k / top-p / repetition penalty
(004 samples at T = 1); T = 0 is greedy. Each continuation is cut at its first line
break (answers are one line in every format of 004 App. A.2) or a stop id (the
model's :attr:`~whitebox_eval.models.loading.LoadedModel.stop_ids`).
"""

from __future__ import annotations

import hashlib

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.engine import Engine
from whitebox_eval.internals.generation import generate as decode
from whitebox_eval.models import LoadedModel


def stream_seed(seed: int, item_id: str | int, stream: str) -> int:
    """A 64-bit seed for one item's samples in one format: sha256 of (seed, item id, stream)."""
    digest = hashlib.sha256(f"{int(seed)}\x1f{item_id}\x1f{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def sample_prompt(
    loaded: LoadedModel,
    prompt: str,
    *,
    n_samples: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    stop: str | None = "\n",
    top_p: float | None = None,
    top_k: int | None = None,
    captures=(),
    keep=None,
    edits=(),
    engine: Engine | None = None,
) -> list[str]:
    """``n_samples`` continuations of one prompt, reproducible from ``seed`` alone (after
    optional top-k / top-p filtering, as HF's and lm-eval's ``top_k`` / ``top_p``), under
    ``edits`` (``--edit``; the key/value cache kept) on ``engine`` (one made for ``loaded``).
    ``captures`` are read at each generated token (the decoder's ``captures``) and the
    continuations (with them) handed to ``keep(gens)``: ``--save-activations ...:generated``."""
    if n_samples < 1 or max_new_tokens < 1:
        raise WhiteboxError("n_samples and max_new_tokens must be >= 1")
    if temperature < 0:
        raise WhiteboxError(f"temperature must be >= 0; got {temperature}")
    tok = loaded.tokenizer
    ids = tok(prompt)["input_ids"]
    if len(ids) == 0:
        raise WhiteboxError("cannot generate from an empty prompt")
    sampled = temperature > 0
    gens = decode(engine or Engine(loaded), [ids], max_new_tokens=max_new_tokens, n_samples=n_samples, edits=edits,
                  do_sample=sampled, temperature=temperature if sampled else 1.0, seeds=[seed] if sampled else None,
                  top_k=top_k if sampled else None, top_p=top_p if sampled else None,
                  stop_strings=[stop] if stop else (), captures=captures)
    if keep is not None:
        keep(gens)
    texts = [tok.decode(g.content_ids, skip_special_tokens=True) for g in gens]
    return [t.split(stop, 1)[0] for t in texts] if stop else texts


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
