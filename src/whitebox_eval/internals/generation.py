"""The one decoder: generation under edits, with the key/value cache (greedy or sampled,
batched, left-padded). Every suite generates through :func:`generate`.

    gens = generate(engine, prompt_ids, max_new_tokens=64, edits=[MaskNeurons(3, [7, 9])])
    gens[0].ids, gens[0].stop      # new token ids (ending with the stop token), why it stopped

Each step is one :meth:`Engine.run` that computes only the new token's row and appends
its keys/values to the cache (the first step computes the prompts). An edit acts on the
rows a pass computes, so the cache is exact when every row's edit is settled once the
row is computed, which holds for

* ``ScaleHeads``, ``MaskNeurons`` and ``Patch`` at every position (``positions=None``)
  or at absolute positions;
* ``EditAttention`` whose cells (and pattern) on a query row never change once the row
  exists: edits of the current query row, e.g. AttentionSpan reinforcement (003 sec. 5.1)
  built per step by a callable ``edits(lengths)``.

Edits that would act differently on rows already in the cache are refused with a
:class:`WhiteboxError` at the step where it happens, never applied silently:
positions counted from the end (``"last"``, negative), and attention cells or patterns
of an earlier row that change, or that reach a key generated later. ``use_cache=False``
runs the same loop re-computing the whole sequence for every token (re-applying every
edit to every row): the reference the cache is tested against, and the way to run
edits the cache refuses. Finished rows are fed the pad token (as Hugging Face
``generate`` does) so the batch stays rectangular.

Sampling draws from one shared torch stream (Hugging Face ``generate``'s draws) or from
one seeded stream per prompt (texts that do not depend on the batch), and several
samples of a prompt share its one prefill (paper 004's n continuations per question).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.batching import Batch, batch_from_ids
from whitebox_eval.internals.requests import Capture, CellRule, Edit, EditAttention, MaskNeurons, Patch, ScaleHeads

EditsArg = Sequence[Edit] | Callable[[list[int]], Sequence[Edit]]
"""A fixed list of edits, or a callable that builds them from every example's current
length in tokens (prompt + generated so far), called once per step."""


@dataclass
class Generated:
    """One example's continuation.

    ``ids``: the new tokens, ending with the token that stopped generation (a stop id, or
    the token that completed a stop string) when one did. ``stop``: that stop id or stop
    string, or None when ``max_new_tokens`` ran out (a truncated answer).
    """

    ids: list[int]
    stop: int | str | None
    captures: dict[str, torch.Tensor] = field(default_factory=dict)
    """Per capture asked of :func:`generate`, ``[layers, len(ids), ...]`` on the host: at step ``t``
    the row that produced ``ids[t]`` (the last prompt token's for the first, then each
    generated token's row for the next)."""

    @property
    def truncated(self) -> bool:
        return self.stop is None

    @property
    def content_ids(self) -> list[int]:
        """``ids`` without the stop id that ended them (a token completing a stop string stays)."""
        return self.ids[:-1] if isinstance(self.stop, int) else self.ids


def generate(
    engine,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    edits: EditsArg = (),
    stop_ids: Sequence[int] | None = None,
    stop_strings: Sequence[str] = (),
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    seeds: Sequence[int] | None = None,
    n_samples: int = 1,
    use_cache: bool = True,
    captures: Sequence[Capture] = (),
) -> list[Generated]:
    """Continue each prompt (token ids) under ``edits``, one token per step.

    Greedy by default. ``do_sample`` draws from softmax(logits / ``temperature``) after
    optional ``top_k`` / ``top_p`` (nucleus) filtering, either

    * from one shared stream, ``generator`` (None: torch's global one): one
      ``torch.multinomial`` over the batch per step, HF ``generate``'s draws; or
    * from one stream per prompt, ``seeds`` (one int per prompt): sample ``s`` of prompt
      ``i`` takes at step ``t`` the token where the float64 CDF of its distribution first
      exceeds ``U[t, s]`` (:func:`inverse_cdf`), ``U = numpy.random.default_rng(seeds[i])
      .random((max_new_tokens, n_samples))``. A text then depends on the model, its
      prompt and its seed only: never on the other rows, which row finishes first, or
      the batch (004 sec. 2.4's free generation, :mod:`whitebox_eval.formats.generation`).

    ``n_samples`` continuations per prompt come from one prefill: the prompts' pass runs
    once and its key/value cache is repeated to ``n_samples`` rows per prompt (under edits
    each sample is a row of its own from the first pass: the same draws). The result is flat, prompt-major: prompt ``i``'s sample ``s`` is row
    ``i * n_samples + s``. A row stops at a token in ``stop_ids`` (default: the model's
    :attr:`~whitebox_eval.models.loading.LoadedModel.stop_ids`) or once its decoded
    continuation contains one of ``stop_strings``.

    ``captures`` are read at each step's new row, the one whose logits chose the step's token,
    in the same passes (the cache kept): each :attr:`Generated.captures` holds one vector per
    generated token. A capture at positions ``"all"`` holds every prompt token's row (the
    prefill's) before them: every row the decoder computed. Other positions are ignored.
    """
    if max_new_tokens < 1:
        raise WhiteboxError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise WhiteboxError("generation needs at least one prompt and no empty prompt")
    if n_samples < 1:
        raise WhiteboxError(f"n_samples must be >= 1, got {n_samples}")
    # under edits every sample is its own row from the start (the same draws, row i * n_samples + s):
    # one shared prefill would leave the repeated rows' cache as the prefill computed it
    shared_prefill = use_cache and not (callable(edits) or list(edits))
    tok, loaded = engine.tokenizer, engine.loaded
    stop_set = set(loaded.stop_ids) if stop_ids is None else {int(t) for t in stop_ids}
    stop_strings = [s for s in stop_strings if s]
    if stop_strings and not hasattr(tok, "decode"):
        raise WhiteboxError("stop strings need a tokenizer that can decode")
    sampler = _Sampler(do_sample, temperature, top_k, top_p, generator, seeds, len(prompts), n_samples, max_new_tokens)
    pad = loaded.pad_id
    rows = [list(p) for p in prompts for _ in range(n_samples)]
    # with the cache the prompts are computed once, then repeated; without it every row is re-run
    batch = batch_from_ids([list(p) for p in prompts] if shared_prefill else rows, pad_id=pad).to(loaded.device)
    cache = engine.new_cache() if use_cache else None
    guard = _CacheGuard() if use_cache else None
    out = [Generated([], None) for _ in rows]
    done = torch.zeros(len(rows), dtype=torch.bool)
    window = 4 * max((len(s) for s in stop_strings), default=0) + 8  # tokens that can hold a new stop string
    asked = [replace(c, positions="last") for c in captures]
    whole = {c.key for c in captures if isinstance(c.positions, str) and c.positions == "all"}
    first = [replace(c, positions="all") if c.key in whole else c for c in asked]  # the prefill: every prompt row
    kept: list[dict[str, list[torch.Tensor]]] = [{c.key: [] for c in asked} for _ in rows]
    for step in range(max_new_tokens):
        if step:
            batch = batch.append(torch.where(done, pad, nxt))
        step_edits = list(edits(batch.host_lengths.tolist()) if callable(edits) else edits)
        if guard is not None:
            guard.check(step_edits, batch)
        with torch.no_grad():
            trace = engine.run(batch, first if step == 0 else asked, step_edits, logits="last", cache=cache)
        logits = trace.logits
        got = {c.key: trace[c.key].detach().cpu() for c in asked}  # [B, L, 1, ...]
        if step == 0 and whole:  # left-padded prompts: example i's rows are the last n_i
            n, s = batch.host_lengths.tolist(), batch.seq_len
            got.update({k: [got[k][i, :, s - n[i]:] for i in range(batch.size)] for k in whole})
        if batch.size != len(rows):  # the one prefill: its cache and logits serve every sample
            cache.batch_repeat_interleave(n_samples)
            batch = _repeat_rows(batch, n_samples)
            logits = logits.repeat_interleave(n_samples, dim=0)
            got = {k: v.repeat_interleave(n_samples, dim=0) if torch.is_tensor(v) else [x for x in v for _ in range(n_samples)]
                   for k, v in got.items()}
        nxt = sampler(logits, step)
        for i, t in enumerate(nxt.tolist()):
            if done[i]:
                continue
            g = out[i]
            g.ids.append(t)
            for k, v in got.items():
                kept[i][k].append(v[i])
            if t in stop_set:
                g.stop = t
            elif stop_strings:
                text = tok.decode(g.ids[-window:])
                g.stop = next((s for s in stop_strings if s in text), None)
            done[i] = g.stop is not None
        if bool(done.all()):
            break
    for g, k in zip(out, kept):
        g.captures = {key: torch.cat(v, dim=1) for key, v in k.items()}
    return out


def _repeat_rows(batch: Batch, n: int) -> Batch:
    """Every example of ``batch`` repeated ``n`` times in place (rows i*n .. i*n+n-1)."""
    return Batch(*(t.repeat_interleave(n, dim=0) for t in (batch.input_ids, batch.attention_mask, batch.position_ids,
                                                         batch.lengths)), batch.prefix_len,
                 host_lengths=batch.host_lengths.repeat_interleave(n, dim=0))


def sampling_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """softmax(logits / ``temperature``) in ``dtype`` after optional top-k / top-p (nucleus) filtering."""
    x = logits.to(dtype) / temperature
    if top_k is not None and top_k < x.shape[-1]:
        kth = x.topk(top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        p, idx = torch.softmax(x, -1).sort(-1, descending=True)
        drop = (p.cumsum(-1) - p) >= top_p  # mass before the token already reaches top_p; the top token stays
        x = x.masked_fill(drop.scatter(-1, idx, drop), float("-inf"))
    return torch.softmax(x, -1)


def inverse_cdf(probs: torch.Tensor, uniforms) -> torch.Tensor:
    """Token per row of ``probs`` [B, V]: the first whose cumulative probability exceeds
    ``u * total`` for that row's uniform ``u`` in [0, 1) (the CDF in ``probs``' dtype)."""
    cdf = probs.cumsum(-1)
    u = torch.as_tensor(uniforms, dtype=cdf.dtype, device=cdf.device).unsqueeze(-1) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_(max=probs.shape[-1] - 1)


class _Sampler:
    """Next tokens from last-position logits [B, V]: argmax, or a draw after temperature / top-k / top-p."""

    def __init__(self, do_sample, temperature, top_k, top_p, generator, seeds, n_prompts, n_samples, max_new_tokens):
        if do_sample and not temperature > 0:
            raise WhiteboxError(f"temperature must be > 0 when sampling (greedy is do_sample=False); got {temperature}")
        if top_k is not None and top_k < 1:
            raise WhiteboxError(f"top_k must be >= 1, got {top_k}")
        if top_p is not None and not 0 < top_p <= 1:
            raise WhiteboxError(f"top_p must be in (0, 1], got {top_p}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise WhiteboxError("generator is one torch.Generator shared by the batch; for one stream per prompt give seeds")
        if seeds is not None and generator is not None:
            raise WhiteboxError("give a shared generator or per-prompt seeds, not both")
        if seeds is not None and len(seeds) != n_prompts:
            raise WhiteboxError(f"give one seed per prompt ({n_prompts}); got {len(seeds)}")
        if seeds is not None and not do_sample:
            raise WhiteboxError("seeds choose sampling streams: they need do_sample=True")
        self.do_sample, self.temperature, self.top_k, self.top_p, self.generator = do_sample, temperature, top_k, top_p, generator
        self.uniforms = None if seeds is None else np.concatenate(  # [max_new_tokens, rows], row i * n_samples + s
            [np.random.default_rng(int(s)).random((max_new_tokens, n_samples)) for s in seeds], axis=1)

    def __call__(self, logits: torch.Tensor, step: int) -> torch.Tensor:
        if not self.do_sample:
            return logits.argmax(-1).cpu()
        if self.uniforms is not None:
            probs = sampling_probs(logits, self.temperature, self.top_k, self.top_p, torch.float64)
            return inverse_cdf(probs, self.uniforms[step]).cpu()
        probs = sampling_probs(logits, self.temperature, self.top_k, self.top_p)
        g = self.generator
        return torch.multinomial(probs.to(probs.device if g is None else g.device), 1, generator=g).view(-1).cpu()


class _CacheGuard:
    """Refuses edits whose effect on a row would change after the row went into the cache.

    Called before every step with that step's edits and batch: rows ``< length - 1`` of
    each example are cached from earlier steps (the first step caches the prompts).
    """

    def __init__(self):
        self.prev: list[Edit] | None = None
        self.prev_cells: list[tuple[torch.Tensor, torch.Tensor | None] | None] = []

    def check(self, edits: list[Edit], batch: Batch) -> None:
        for e in edits:
            if not isinstance(e, EditAttention):
                _check_absolute(e)
        n = batch.host_example_lengths
        cells = [_attention_cells(e, n) if isinstance(e, EditAttention) else None for e in edits]
        if self.prev is not None:
            if len(edits) != len(self.prev) or not all(_same_edit(a, b) for a, b in zip(edits, self.prev)):
                raise WhiteboxError(
                    "the edits changed between generation steps; the cache keeps earlier tokens as they were "
                    "computed, so give the same edits at every step (attention cells may only add rows) or use_cache=False"
                )
            old_rows = torch.arange(int(n.max()))[None, :] < (n - 1)[:, None]  # [B, S] rows already cached
            for e, now, before in zip(edits, cells, self.prev_cells):
                if now is not None and not _same_on_rows(now, before, old_rows):
                    raise WhiteboxError(
                        f"an attention edit of layer {e.layer} changes query rows already generated (or reaches keys "
                        "generated after its row); the cache cannot re-run them: edit only each step's new row, "
                        "or use_cache=False"
                    )
        self.prev, self.prev_cells = edits, cells


def _check_absolute(e: Edit) -> None:
    pos = e.positions
    if pos is None or (isinstance(pos, str) and pos == "all"):
        return
    if isinstance(pos, str) or bool((torch.as_tensor(pos) < 0).any()):
        raise WhiteboxError(
            f"{type(e).__name__} at positions counted from the end ({pos!r}) moves to a new token at every step, "
            "which the cache cannot re-apply to earlier ones: give absolute positions (or None = every token), or use_cache=False"
        )


def _same_edit(a: Edit, b: Edit) -> bool:
    """Everything but the attention cells/pattern (compared row by row) must stay the same."""
    if a is b:
        return True
    if _signature(a) != _signature(b):
        return False
    return not isinstance(a, Patch) or torch.equal(a.values.detach().cpu(), b.values.detach().cpu())


def _signature(e: Edit) -> tuple:
    if isinstance(e, EditAttention):
        return ("attn", e.layer, tuple(e.heads), e.mode, e.value, e.threshold, e.source_head, e.renormalize, e.pattern is None)
    pos = e.positions
    pos = pos if pos is None or isinstance(pos, str) else tuple(torch.as_tensor(pos).reshape(-1).tolist())
    if isinstance(e, ScaleHeads):
        return ("scale", e.layer, tuple(e.heads), e.scale, pos)
    if isinstance(e, MaskNeurons):
        return ("mask", e.layer, tuple(int(x) for x in e.neurons), e.value, pos)
    if isinstance(e, Patch):
        return ("patch", e.point, e.layer, pos, None if e.heads is None else tuple(e.heads), tuple(e.values.shape))
    return (type(e).__name__, id(e))


def _attention_cells(e: EditAttention, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The cells (and pattern on them) that act in a sequence of ``lengths`` tokens: [B, S, S], S = max length."""
    s = int(lengths.max())
    c = e.cells.cells(lengths.tolist()) if isinstance(e.cells, CellRule) else e.cells.detach().to("cpu", torch.bool)
    if c.dim() != 3 or c.shape[0] != len(lengths):
        raise WhiteboxError(f"attention edit cells must be [batch={len(lengths)}, S, S]; got {tuple(c.shape)}")
    inside = torch.arange(s)[None, :] < lengths[:, None]  # [B, S]
    keep = inside[:, :, None] & inside[:, None, :]
    cells = torch.zeros(len(lengths), s, s, dtype=torch.bool)
    q, k = min(s, c.shape[1]), min(s, c.shape[2])
    cells[:, :q, :k] = c[:, :q, :k]
    cells &= keep
    if e.pattern is None:
        return cells, None
    pattern = torch.zeros(cells.shape, dtype=torch.float64)
    p = e.pattern.detach().cpu().double()
    pattern[:, :min(s, p.shape[1]), :min(s, p.shape[2])] = p[:, :s, :s]
    return cells, pattern * cells


def _same_on_rows(now, before, old_rows: torch.Tensor) -> bool:
    """Cells (and pattern) of the cached rows now equal what they were when those rows were computed."""
    cells, pattern = now
    b, s, _ = cells.shape
    rows = old_rows[:, :, None]
    prev_cells = torch.zeros_like(cells)
    prev_cells[:, : before[0].shape[1], : before[0].shape[2]] = before[0]
    if not torch.equal(cells & rows, prev_cells & rows):
        return False
    if pattern is None:
        return True
    prev_pattern = torch.zeros_like(pattern)
    prev_pattern[:, : before[1].shape[1], : before[1].shape[2]] = before[1]
    return torch.equal(pattern * rows, prev_pattern * rows)
