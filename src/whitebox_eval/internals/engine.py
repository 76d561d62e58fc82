"""The engine: one forward pass of the Hugging Face model with captures and edits.

It works on the model's own modules: forward (pre-)hooks on projections, norms,
o_proj, the down projection and the decoder blocks, plus the registered attention
function of :mod:`whitebox_eval.internals.attention`. Hooks are installed for one
pass and removed after it, only on the modules the request needs.

    engine = Engine(load_model("smollm2-135m"))
    batch = engine.batch(["Question ... Answer:"])
    trace = engine.run(batch, captures=[Capture("q", "last"), Capture("attn", "last")])
    trace.logits            # [B, vocab] at the last position
    trace["q"]              # [B, n_layers, 1, n_heads, head_dim]
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import attention as attn_impl
from whitebox_eval.internals.batching import Batch, Positions, make_batch
from whitebox_eval.internals.hook_points import capture_alias, patch_alias
from whitebox_eval.internals.requests import (
    CAPTURE_POINTS,
    PATCH_POINTS,
    Capture,
    Edit,
    EditAttention,
    MaskNeurons,
    Patch,
    ScaleHeads,
    Trace,
)
from whitebox_eval.models.loading import LoadedModel

PER_HEAD_POINTS = {"q_proj": "q", "k_proj": "kv", "q": "q", "k": "kv", "v": "kv", "head_out": "q"}


@dataclass
class Prefix:
    """Key/value cache of a token prefix shared by every example (e.g. few-shot demonstrations).

    Made by :meth:`Engine.prefix`; pass it to :meth:`Engine.run` with a batch of the
    suffixes (``batch.with_prefix(prefix.length)`` is done for you). The suffix pass
    then costs what the suffix costs, whatever the prefix length.
    """

    ids: list[int]
    keys: list[torch.Tensor]  # per layer [1, Hkv, P, D]
    values: list[torch.Tensor]

    @property
    def length(self) -> int:
        return len(self.ids)

    def cache_for(self, batch_size: int):
        from transformers import DynamicCache

        cache = DynamicCache()
        for layer, (k, v) in enumerate(zip(self.keys, self.values)):
            cache.update(k.expand(batch_size, -1, -1, -1), v.expand(batch_size, -1, -1, -1), layer)
        return cache


class _Site:
    """One (module, hook kind) of one layer, serving every capture and patch that reads it."""

    def __init__(self, module, kind: str, view: Callable[[torch.Tensor], torch.Tensor]):
        self.module, self.kind, self.view = module, kind, view
        self.reads: list[tuple[str, torch.Tensor]] = []  # (capture key, padded positions [B, P])
        self.grad_reads: list[tuple[str, torch.Tensor]] = []  # gradients to record at backward
        self.writes: list[Callable[[torch.Tensor], None]] = []  # in-place edits on the canonical view


def _full_precision(x: torch.Tensor) -> torch.Tensor:
    """bf16/fp16 results handed out as float32, so every score computed from them (softmax,
    log-likelihoods, q.k products, lens) accumulates in float32 whatever the weights are."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def _gather(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """x [B, S, ...] at padded positions [B, P] -> [B, P, ...] (on x's device: layers may sit on several)."""
    pos = pos.to(x.device)
    idx = pos.view(*pos.shape, *([1] * (x.dim() - 2))).expand(-1, -1, *x.shape[2:])
    return x.gather(1, idx)


class _Plan:
    """Everything one pass has to do, indexed by layer; holds the results as they arrive."""

    def __init__(self, engine: "Engine", batch: Batch, past: int = 0):
        self.engine, self.arch, self.batch = engine, engine.arch, batch
        self.past = past  # leading padded columns already in a key/value cache: this pass computes the rest
        self.results: dict[str, dict[int, torch.Tensor]] = defaultdict(dict)
        self.sites: dict[tuple, _Site] = {}
        self.rot: dict[int, list[tuple[str, str, torch.Tensor]]] = defaultdict(list)
        self.attn_rows: dict[int, list[tuple[str, torch.Tensor]]] = defaultdict(list)
        self.attn_full: dict[int, list[tuple[str, bool]]] = defaultdict(list)  # (key, head mean)
        self.attn_edits: dict[int, list[EditAttention]] = defaultdict(list)
        self.grads: dict[str, dict[int, torch.Tensor]] = {}
        self._masks: dict[tuple, tuple] = {}  # the additive mask of each mask a layer received, built once per pass

    def computed(self, ppos: torch.Tensor, what: str) -> torch.Tensor:
        """Padded positions [B, P] -> indices into the columns this pass computes (after a cache)."""
        if self.past and bool((ppos < self.past).any()):
            raise WhiteboxError(
                f"{what} asks for a position already in the key/value cache (the first {self.past} padded "
                "columns): only the tokens this pass computes can be read"
            )
        return ppos - self.past

    # ---- attention -----------------------------------------------------------
    def touches_attention(self, layer: int) -> bool:
        return layer in self.rot or layer in self.attn_rows or layer in self.attn_full or layer in self.attn_edits

    def attention(self, layer, module, query, key, value, mask, scaling, softcap, base, dropout, kwargs):
        for name, which, pos in self.rot.get(layer, ()):
            x = query if which == "q" else key
            shift = x.shape[2] - query.shape[2]  # keys also hold a cached prefix
            self.results[name][layer] = _gather(x.transpose(1, 2), pos + shift)
        full = layer in self.attn_edits or layer in self.attn_full
        amask = self._additive(mask, query.shape[2], key.shape[2], query.device) if full else None
        if layer in self.attn_edits:  # edited layers run eager math: softmax, edit, then weights @ values
            probs = attn_impl.attention_probs(query, key, amask, scaling, softcap)
            for edit in self.attn_edits[layer]:
                self._apply_attention_edit(probs, edit)
            if dropout and module.training:
                probs = torch.nn.functional.dropout(probs, p=dropout)
            out, weights = attn_impl.weighted_values(probs, value), probs
        else:  # the original implementation computes the output; captured probabilities come on the side
            if base == "sdpa":
                out, weights = attn_impl.sdpa_attention_forward(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)
            else:
                out, weights = attn_impl._family_eager(module)(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)
            probs = attn_impl.attention_probs(query, key, amask, scaling, softcap) if full else None
        for name, mean in self.attn_full.get(layer, ()):
            # the head mean is taken before unpadding: one [B, S, S] kept per layer, never [B, H, S, S]
            self.results[name][layer] = self._unpad_full(probs.mean(1, keepdim=True))[:, 0] if mean else self._unpad_full(probs)
        for name, pos in self.attn_rows.get(layer, ()):
            if probs is not None:
                rows = _gather(probs.transpose(1, 2), pos).transpose(1, 2)
            else:  # only the requested query rows: [B, H, P, K], never the full matrix (nor its mask)
                q_rows = _gather(query.transpose(1, 2), pos).transpose(1, 2)
                m_rows = attn_impl.additive_mask(mask, query.shape[2], key.shape[2], query.device, rows=pos)
                rows = attn_impl.attention_probs(q_rows, key, m_rows, scaling, softcap)
            self.results[name][layer] = self.batch.unpad_keys(rows)
        return out, weights

    def _additive(self, mask, q_len: int, k_len: int, device) -> torch.Tensor:
        """The float32 additive form of ``mask``, built once per pass and device (layers of one kind
        receive the same mask object; the entry keeps it alive so its id is not reused)."""
        key = (id(mask), q_len, k_len, str(device))
        if key not in self._masks:
            self._masks[key] = (mask, attn_impl.additive_mask(mask, q_len, k_len, device))
        return self._masks[key][1]

    def _unpad_full(self, probs: torch.Tensor) -> torch.Tensor:
        """[B, H, S, S] padded -> unpadded on both axes (query rows re-indexed like keys)."""
        rows = self.batch.unpad_keys(probs.transpose(-1, -2)).transpose(-1, -2)
        return self.batch.unpad_keys(rows)

    def _padded_cells(self, cells: torch.Tensor) -> torch.Tensor:
        b, s = self.batch.size, self.batch.seq_len
        if cells.dim() != 3 or cells.shape[0] != b or cells.shape[1] > s or cells.shape[2] > s:
            raise WhiteboxError(f"attention edit cells must be a bool tensor [batch={b}, <= {s}, <= {s}] in unpadded coordinates; got {tuple(cells.shape)}")
        return self._padded_rows(cells.to(torch.bool))

    def _padded_rows(self, x: torch.Tensor) -> torch.Tensor:
        """Unpadded [B, Sq, Sk] cells or weights -> the rows this pass computes, padded: [B, S - past, S].

        ``x`` may be smaller than the sequence (missing rows and columns are zero).
        """
        b, s, past = self.batch.size, self.batch.seq_len, self.past
        out = torch.zeros(b, s - past, s, dtype=x.dtype, device=self.batch.input_ids.device)
        for i in range(b):
            o = int(self.batch.offsets[i])
            u0, u1, k1 = max(past - o, 0), min(s - o, x.shape[1]), min(s - o, x.shape[2])
            if u1 > u0 and k1 > 0:
                out[i, u0 + o - past:u1 + o - past, o:o + k1] = x[i, u0:u1, :k1].to(out.device)
        return out

    def _apply_attention_edit(self, probs: torch.Tensor, e: EditAttention) -> None:
        cells = self._padded_cells(e.cells).to(probs.device)  # [B, S, S]
        heads = list(e.heads)
        rows = cells.any(-1)  # [B, S]
        for h in heads:
            w = probs[:, h]
            if e.mode == "add":
                w += cells.to(w.dtype) * e.value
            elif e.mode == "add_above":
                w += (cells & (w > e.threshold)).to(w.dtype) * e.value
            elif e.mode == "force":
                target = cells.to(w.dtype) if e.pattern is None else self._padded_pattern(e.pattern).to(w.device, w.dtype) * cells
                target = target / target.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
                w.copy_(torch.where(rows.unsqueeze(-1), target, w))
            elif e.mode == "copy_head":
                src = probs[:, e.source_head].clone()
                w.copy_(torch.where(rows.unsqueeze(-1), src, w))
            if e.renormalize:
                w.copy_(torch.where(rows.unsqueeze(-1), w / w.sum(-1, keepdim=True), w))

    def _padded_pattern(self, pattern: torch.Tensor) -> torch.Tensor:
        return self._padded_rows(pattern)


class Engine:
    """Reads and edits a loaded model's internals during ordinary forward passes."""

    def __init__(self, loaded: LoadedModel):
        self.loaded = loaded
        self.model, self.tokenizer, self.arch = loaded.model, loaded.tokenizer, loaded.arch
        attn_impl.register()
        base = self.model.config._attn_implementation
        if base not in attn_impl.IMPLEMENTATIONS and base not in attn_impl.IMPLEMENTATIONS.values():
            raise WhiteboxError(f"the engine needs the model loaded with attn_implementation 'sdpa' or 'eager', not {base!r}")
        self.base_attention = base if base in attn_impl.IMPLEMENTATIONS else base.removeprefix("whitebox_")
        self._set_attn_implementation(attn_impl.IMPLEMENTATIONS[self.base_attention])
        for layer in range(self.arch.n_layers):
            module = self.arch.attention(layer)
            if getattr(module, "layer_idx", None) != layer:
                module.layer_idx = layer
            module._whitebox_plan = None

    def _set_attn_implementation(self, name: str) -> None:
        for cfg in {id(c): c for c in [self.model.config, *(m.config for m in self.model.modules() if hasattr(m, "config"))]}.values():
            cfg._attn_implementation = name

    # ---- inputs --------------------------------------------------------------
    def batch(self, texts: Sequence[str] | Sequence[Sequence[int]], *, add_special_tokens: bool = True) -> Batch:
        """Tokenize and left-pad on the model's device."""
        return make_batch(self.tokenizer, texts, add_special_tokens=add_special_tokens).to(self.loaded.device)

    def prefix_fits(self, prefix_len: int, suffix_len: int) -> bool:
        """Whether a cached prefix is exact here: prefix + suffix must fit any sliding window."""
        window = getattr(self.model.config, "sliding_window", None)
        return not window or prefix_len + suffix_len <= window

    def prefix(self, ids: Sequence[int]) -> Prefix:
        """Compute and keep the key/value cache of ``ids`` (plain forward, no captures)."""
        if len(ids) == 0:
            raise WhiteboxError("an empty prefix cannot be cached")
        from transformers import DynamicCache

        x = torch.tensor([list(ids)], device=self.loaded.device)
        cache = DynamicCache()  # plain layers keep every token; sliding windows are enforced by the mask
        with torch.no_grad():
            self.model.base_model(input_ids=x, past_key_values=cache, use_cache=True)
        keys = [cache.layers[l].keys for l in range(self.arch.n_layers)]
        values = [cache.layers[l].values for l in range(self.arch.n_layers)]
        if any(k.shape[2] != len(ids) for k in keys):
            raise WhiteboxError("this model's cache keeps fewer tokens than the prefix (sliding window); run without prefix caching")
        return Prefix(list(ids), keys, values)

    # ---- the pass -------------------------------------------------------------
    def run(
        self,
        batch: Batch,
        captures: Iterable[Capture] = (),
        edits: Iterable[Edit] = (),
        *,
        logits: Positions | bool = "last",
        grad: bool = False,
        inputs_embeds: torch.Tensor | None = None,
        prefix: Prefix | None = None,
        cache=None,
    ) -> Trace:
        """One forward pass with ``captures`` and ``edits``.

        ``logits``: ``"last"`` (default: [B, vocab]), positions ([B, P, vocab]),
        ``"all"`` ([B, S, vocab] in padded coordinates) or ``False`` (none).
        ``inputs_embeds`` [B, S, d_model] replaces the token embeddings (the output of
        the embedding module, scaling included) for this pass.
        ``prefix``: a cached shared prefix; ``batch`` then holds the suffixes and
        positions still count from the prefix's first token. Edits act on the tokens
        this pass computes: the prefix stays as it was cached.
        ``cache``: a key/value cache (:meth:`new_cache`) holding the first columns of this
        same left-padded ``batch`` from earlier passes (generation: :mod:`.generation`).
        The pass computes only the remaining columns and appends their keys/values to
        the cache. Positions still address the whole batch; captures and logits must lie
        in the computed columns (``"all"`` means all of those; ``inputs_embeds`` covers
        them only); edits act on the computed rows, the cached ones stay as they were.
        """
        captures, edits = list(captures), list(edits)
        past = 0
        if cache is not None:
            if prefix is not None:
                raise WhiteboxError("a shared prefix and a generation cache cannot be combined in one pass")
            past = int(cache.get_seq_length())
            if past >= batch.seq_len:
                raise WhiteboxError(f"the cache already holds {past} columns of a {batch.seq_len}-column batch: append the new tokens to the batch")
            if past and cache.layers[0].keys.shape[0] != batch.size:
                raise WhiteboxError(f"the cache holds {cache.layers[0].keys.shape[0]} examples but the batch has {batch.size}")
            if past and any(c.point in ("attn_full", "attn_mean") for c in captures):
                raise WhiteboxError("attn_full/attn_mean captures need every query row; they are not available after a cached pass")
        if batch.visible is not None and past:
            raise WhiteboxError("a packed batch (several sequences per row) cannot continue a generation cache")
        if prefix is not None:
            batch = batch.with_prefix(prefix.length)
            # a packed batch's mask counts sliding windows on position ids: a prefix is exact at any length
            if batch.visible is None and not self.prefix_fits(prefix.length, batch.seq_len):
                window = self.model.config.sliding_window
                raise WhiteboxError(
                    f"prefix ({prefix.length}) + suffix ({batch.seq_len}) tokens exceed the sliding window ({window}); "
                    "the cached prefix would be read through the wrong mask: run without prefix caching"
                )
            if any(c.point in ("attn_full", "attn_mean") for c in captures) or any(isinstance(e, EditAttention) for e in edits):
                raise WhiteboxError("attn_full/attn_mean captures and attention edits are not available with a cached prefix; run without it")
        plan = _Plan(self, batch, past)
        trace = Trace(logits=None, grads=plan.grads)
        for c in captures:
            self._plan_capture(plan, c, trace)
        for e in edits:
            self._plan_edit(plan, e)
        logit_pos = None
        last_only = isinstance(logits, str) and logits == "last"
        if logits is not False and logits is not None and not last_only and not (isinstance(logits, str) and logits == "all"):
            logit_pos = plan.computed(batch.padded(batch.positions(logits)), "logits")
        mask, position_ids, input_ids = batch.attention_mask, batch.position_ids[:, past:], batch.input_ids[:, past:]
        if prefix is not None:
            mask = torch.cat([torch.ones(batch.size, prefix.length, dtype=mask.dtype, device=mask.device), mask], dim=1)
            position_ids = position_ids + prefix.length
            cache = prefix.cache_for(batch.size)
        if batch.visible is not None:
            mask = self._packed_mask(batch, position_ids, prefix.length if prefix is not None else 0)
        with self._installed(plan), torch.set_grad_enabled(grad):
            out = self.model.base_model(
                input_ids=None if inputs_embeds is not None else input_ids,
                inputs_embeds=inputs_embeds,
                attention_mask=mask,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=cache is not None,
            )
            hidden = out.last_hidden_state
            if isinstance(logits, str) and logits == "all":
                trace.logits = self.unembed(hidden)
            elif last_only:
                # left padding: every example ends in the last column. The same slice and the
                # same product as the model's own forward with logits_to_keep=1 (bit-identical)
                trace.logits = self.unembed(hidden[:, -1:, :])[:, 0]
            elif logit_pos is not None:
                trace.logits = self.unembed(_gather(hidden, logit_pos))
            if trace.logits is not None:
                trace.logits = _full_precision(trace.logits)
        for c in captures:
            layers = trace.layers[c.key]
            per_layer = plan.results[c.key]
            missing = [l for l in layers if l not in per_layer]
            if missing:
                raise RuntimeError(f"capture {c.key} produced nothing for layers {missing}: the family description does not match the model")
            # layers split over devices (device_map) hand their pieces over on the output's device
            trace.captures[c.key] = _full_precision(torch.stack([per_layer[l].to(hidden.device) for l in layers], dim=1))
        return trace

    def _packed_mask(self, batch: Batch, position_ids: torch.Tensor, prefix_len: int):
        """The explicit mask of a packed batch: every real token sees a cached prefix, then the
        batch's own pattern (:mod:`.packing`); sliding windows on position ids."""
        real = batch.attention_mask.bool()
        b, s = real.shape
        allowed = torch.cat([real[:, :, None].expand(b, s, prefix_len), batch.visible.to(real.device)], dim=2)
        key_pos = torch.cat([torch.arange(prefix_len, device=real.device).expand(b, -1), position_ids], dim=1)
        return attn_impl.explicit_mask(self.model.config, self.base_attention, allowed, position_ids, key_pos,
                                       self.model.dtype)

    def unembed(self, hidden: torch.Tensor) -> torch.Tensor:
        """Unembedding (+ final logit soft-capping where the family has it) of final-normed states."""
        logits = self.arch.unembed(hidden)
        cap = self.arch.final_logit_softcap
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def new_cache(self):
        """An empty key/value cache for :meth:`run` (``cache=``) that keeps every token.

        Sliding windows are enforced by the attention mask, as in an uncached pass, so a
        cached pass gives the same result as the uncached one at any length.
        """
        from transformers import DynamicCache

        return DynamicCache()

    # ---- planning ---------------------------------------------------------------
    def _layers(self, layers: Sequence[int] | None) -> list[int]:
        if layers is None:
            return list(range(self.arch.n_layers))
        return [self.arch.check_layer(int(l)) for l in layers]

    def _plan_capture(self, plan: _Plan, c: Capture, trace: Trace) -> None:
        c = capture_alias(c, self.arch)  # SAELens / TransformerLens hook names (internals/hook_points.py)
        if c.point not in CAPTURE_POINTS:
            raise WhiteboxError(f"unknown capture point {c.point!r}; choose one of {', '.join(CAPTURE_POINTS)}")
        if c.key in trace.layers:
            raise WhiteboxError(f"two captures are named {c.key!r}; give one a distinct name=")
        layers = self._layers(c.layers)
        trace.layers[c.key] = layers
        if c.point in ("attn_full", "attn_mean"):
            for l in layers:
                plan.attn_full[l].append((c.key, c.point == "attn_mean"))
            return
        if isinstance(c.positions, str) and c.positions == "all":  # every computed column
            ppos = torch.arange(plan.past, plan.batch.seq_len, device=plan.batch.input_ids.device).expand(plan.batch.size, -1)
        else:
            ppos = plan.batch.padded_positions(c.positions)
        trace.positions[c.key] = ppos - plan.batch.offsets.to(ppos.device).unsqueeze(1)
        ppos = plan.computed(ppos, f"capture {c.key!r}")
        if c.keep_grad and c.point in ("attn", "q_rot", "k_rot"):
            raise WhiteboxError(f"keep_grad is not available for {c.point!r}; use q/k/v, head_out, mlp_act or resid points")
        for l in layers:
            if c.point == "attn":
                plan.attn_rows[l].append((c.key, ppos))
            elif c.point in ("q_rot", "k_rot"):
                if self.arch.family.positional != "rope":
                    site = self._site(plan, c.point[0], l)  # no rotary: post-RoPE == pre-RoPE
                    site.reads.append((c.key, ppos))
                else:
                    plan.rot[l].append((c.key, c.point[0], ppos))
            else:
                site = self._site(plan, c.point, l)
                site.reads.append((c.key, ppos))
                if c.keep_grad:
                    site.grad_reads.append((c.key, ppos))

    def _plan_edit(self, plan: _Plan, e: Edit) -> None:
        arch = self.arch
        layer = arch.check_layer(e.layer)
        if isinstance(e, ScaleHeads):
            heads = [arch.check_head(h) for h in e.heads]
            rows = self._row_mask(plan, e.positions)
            scale = e.scale

            def scale_heads(v, heads=heads, rows=rows, scale=scale):  # v [B, S, H, D]
                sub = v[:, :, heads]
                v[:, :, heads] = torch.where(rows.to(v.device)[..., None, None], sub * scale, sub)

            self._site(plan, "head_out", layer).writes.append(scale_heads)
        elif isinstance(e, MaskNeurons):
            neurons = torch.as_tensor(list(e.neurons), dtype=torch.long)
            if len(neurons) and (neurons.min() < 0 or neurons.max() >= arch.d_ff):
                raise WhiteboxError(f"neuron index out of range: layer {layer} has {arch.d_ff} MLP neurons (0..{arch.d_ff - 1})")
            rows = self._row_mask(plan, e.positions)

            def mask_neurons(v, neurons=neurons, rows=rows, value=e.value):  # v [B, S, d_ff]
                neurons = neurons.to(v.device)
                sel = v[:, :, neurons]
                v[:, :, neurons] = torch.where(rows.to(v.device).unsqueeze(-1), torch.full_like(sel, value), sel)

            self._site(plan, "mlp_act", layer).writes.append(mask_neurons)
        elif isinstance(e, EditAttention):
            for h in e.heads:
                arch.check_head(h)
            if e.mode not in ("add", "add_above", "force", "copy_head"):
                raise WhiteboxError(f"unknown attention edit mode {e.mode!r}: use add, add_above, force or copy_head")
            if e.mode == "copy_head":
                if e.source_head is None:
                    raise WhiteboxError("copy_head needs source_head=")
                arch.check_head(e.source_head)
            plan.attn_edits[layer].append(e)
        elif isinstance(e, Patch):
            e = patch_alias(e, self.arch)
            if e.point not in PATCH_POINTS:
                raise WhiteboxError(f"cannot patch {e.point!r}; patchable points: {', '.join(PATCH_POINTS)}")
            ppos = plan.batch.padded_positions(e.positions) - plan.past  # rows in the cache are not patched again
            heads = None if e.heads is None else [arch.check_head(h) for h in e.heads]

            def patch(v, ppos=ppos, values=e.values, heads=heads):
                ppos = ppos.to(v.device)
                shape = (*ppos.shape, *v.shape[2:])
                if tuple(values.shape) != shape:
                    raise WhiteboxError(f"patch values for {e.point} must have shape {shape}, got {tuple(values.shape)}")
                b, p = (ppos >= 0).nonzero(as_tuple=True)
                rows = ppos[b, p]
                new = values.to(v.device, v.dtype)[b, p]
                if heads is not None:
                    cur = v[b, rows].clone()
                    cur[:, heads] = new[:, heads]
                    new = cur
                v[b, rows] = new

            self._site(plan, e.point, layer).writes.append(patch)
        else:
            raise WhiteboxError(f"unknown edit {e!r}")

    def _row_mask(self, plan: _Plan, positions: Positions) -> torch.Tensor:
        """[B, S - past] bool: which computed rows an edit applies to (None = all)."""
        batch = plan.batch
        b, s = batch.size, batch.seq_len
        device = batch.input_ids.device
        if positions is None:
            return torch.ones(b, s - plan.past, dtype=torch.bool, device=device)
        mask = torch.zeros(b, s, dtype=torch.bool, device=device)
        mask.scatter_(1, batch.padded_positions(positions), True)
        return mask[:, plan.past:]

    def _site(self, plan: _Plan, point: str, layer: int) -> _Site:
        """The hook site that exposes ``point`` of ``layer`` as a canonical view."""
        arch, fam = self.arch, self.arch.family
        key = (point, layer)
        if key in plan.sites:
            return plan.sites[key]
        heads = {"q": arch.n_heads, "kv": arch.n_kv_heads}
        D = arch.head_dim
        if point in ("q_proj", "k_proj", "v") or (point in ("q", "k") and fam.q_norm is None):
            which = point[0]
            n = heads["q" if which == "q" else "kv"]
            if fam.qkv_proj is None:
                module = arch.attn_part(layer, f"{which}_proj")
                view = lambda t, n=n: t.unflatten(-1, (n, D))
            elif fam.qkv_interleaved:  # gpt_neox: [.., H, (q k v) * D] per head
                module = arch.attn_part(layer, "qkv_proj")
                s0 = "qkv".index(which) * D
                view = lambda t, s0=s0, n=n: t.unflatten(-1, (n, 3 * D))[..., s0:s0 + D]
            else:
                module = arch.attn_part(layer, "qkv_proj")
                q, k, v = arch.qkv_sizes()
                start = {"q": 0, "k": q, "v": q + k}[which]
                width = {"q": q, "k": k, "v": v}[which]
                view = lambda t, s=start, w=width, n=n: t[..., s:s + w].unflatten(-1, (n, D))
            kind = "out"
        elif point in ("q", "k"):
            module = arch.attn_part(layer, f"{point}_norm")
            n = heads["q" if point == "q" else "kv"]
            layout = fam.qk_norm_layout
            if layout == "bshd":
                view = lambda t: t
            elif layout == "bhsd":
                view = lambda t: t.transpose(1, 2)
            else:
                view = lambda t, n=n: t.unflatten(-1, (n, D))
            kind = "out"
        elif point == "head_out":
            module, kind = arch.attn_part(layer, "o_proj"), "pre"
            view = lambda t: t.unflatten(-1, (arch.n_heads, D))
        elif point == "mlp_act":
            module, kind, view = arch.mlp_down(layer), "pre", (lambda t: t)
        elif point == "mlp_gate_act":
            module, kind, view = arch.mlp_act_fn(layer), "out", (lambda t: t)
        elif point == "resid_pre":
            module, kind, view = arch.blocks[layer], "pre_block", (lambda t: t)
        elif point == "resid":
            module, kind, view = arch.blocks[layer], "out", (lambda t: t)
        elif point in ("mlp_out", "attn_out"):  # what the branch adds to the residual (after a post-norm)
            module, kind, view = arch.block_part(layer, point), "out", (lambda t: t)
        elif point == "resid_mid":  # the input of the module that reads the residual between attention and MLP
            module, kind, view = arch.block_part(layer, "resid_mid"), "pre", (lambda t: t)
        else:  # pragma: no cover - guarded by CAPTURE_POINTS
            raise WhiteboxError(f"no hook site for {point}")
        site = plan.sites[key] = _Site(module, kind, view)
        site.point, site.layer = point, layer
        return site

    @contextmanager
    def _installed(self, plan: _Plan):
        handles = []
        results = plan.results
        trace_grads = plan.grads

        def process(site: _Site, t: torch.Tensor) -> torch.Tensor | None:
            if site.writes:
                t = t.clone()
                v = site.view(t)
                for w in site.writes:
                    w(v)
            else:
                v = site.view(t)
            for name, pos in site.reads:
                results[name][site.layer] = _gather(v, pos)
            if site.grad_reads and t.requires_grad:
                def keep(g, site=site):
                    gv = site.view(g)
                    for name, pos in site.grad_reads:
                        trace_grads.setdefault(name, {})[site.layer] = _gather(gv, pos).detach()
                t.register_hook(keep)
            return t if site.writes else None

        for site in plan.sites.values():
            if site.kind == "out":
                def hook(mod, args, out, site=site):
                    t = out[0] if isinstance(out, tuple) else out
                    new = process(site, t)
                    if new is None:
                        return None
                    return (new, *out[1:]) if isinstance(out, tuple) else new
                handles.append(site.module.register_forward_hook(hook))
            elif site.kind == "pre":
                def pre(mod, args, site=site):
                    new = process(site, args[0])
                    return None if new is None else (new, *args[1:])
                handles.append(site.module.register_forward_pre_hook(pre))
            else:  # decoder block: hidden_states may come positionally or by keyword
                def pre_block(mod, args, kwargs, site=site):
                    if args:
                        new = process(site, args[0])
                        return None if new is None else ((new, *args[1:]), kwargs)
                    new = process(site, kwargs["hidden_states"])
                    return None if new is None else (args, {**kwargs, "hidden_states": new})
                handles.append(site.module.register_forward_pre_hook(pre_block, with_kwargs=True))
        attn_modules = [self.arch.attention(l) for l in range(self.arch.n_layers)]
        for m in attn_modules:
            m._whitebox_plan = plan
        try:
            yield
        finally:
            for h in handles:
                h.remove()
            for m in attn_modules:
                m._whitebox_plan = None
