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

A pass is planned, run and collected by the modules beside this one, each holding one part:
the site table (:mod:`.sites`), the plan of a pass and what it keeps (:mod:`.pass_plan`,
:mod:`.host_tensors`), the capture plan (:mod:`.capture_plan`), the edit kinds
(:mod:`.edit_registry`, one file each in :mod:`.edits`), the hooks (:mod:`.hooks`), the work inside
the attention function (:mod:`.pass_attention`) and the results after the pass
(:mod:`.pass_results`). :func:`registry` lists every capture point and edit the engine serves
(the op-count test iterates it, so a point or edit kind added later is held to the same budget).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import attention as attn_impl
from whitebox_eval.internals.batching import Batch, Positions, make_batch
from whitebox_eval.internals.capture_plan import plan_capture
from whitebox_eval.internals.edit_registry import kinds, plan_edit
from whitebox_eval.internals.hooks import Stop, installed
from whitebox_eval.internals.host_tensors import shape_with
from whitebox_eval.internals.pass_plan import KEEP_BYTES, Plan, keep_bytes_for
from whitebox_eval.internals.pass_results import full_precision
from whitebox_eval.internals.requests import (
    ATTENTION_MODES, CAPTURE_POINTS, PATCH_POINTS, Capture, Edit, EditAttention, Trace,
)
from whitebox_eval.internals.sites import ATTENTION_POINTS, SITES, SiteSpec
from whitebox_eval.models.loading import LoadedModel

__all__ = ["ATTENTION_POINTS", "Engine", "KEEP_BYTES", "Prefix", "SITES", "SiteSpec", "keep_bytes_for", "registry"]


def registry() -> dict[str, tuple]:
    """Everything the engine serves: capture points, patchable points, edit kinds (their request
    types, plug-ins' included) and attention-edit modes (``tests/internals/test_op_counts.py`` holds
    each of them to the op budget)."""
    return {"captures": tuple(CAPTURE_POINTS), "patch_points": tuple(PATCH_POINTS),
            "edits": tuple(k.request for k in kinds()), "attention_modes": tuple(ATTENTION_MODES)}


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


class Engine:
    """Reads and edits a loaded model's internals during ordinary forward passes."""

    keep_bytes: int | None = None
    """What a pass may keep by reference (:data:`KEEP_BYTES`); None: chosen by the pass's device
    (:func:`keep_bytes_for`)."""

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
        self._sae_cache: dict[tuple, dict] = {}  # SAE weights sliced for feature edits (_sae_slices)
        self.standing: tuple = ()  # edits every pass runs under (:meth:`under`)

    def under(self, edits: Iterable[Edit]) -> "Engine":
        """This engine with ``edits`` added to every pass (a study's ``--edit``): a shallow copy sharing
        the model; ``self`` when there are none. Its passes take no cached prefix (the prefix would
        stay unedited): a study under edits computes whole prompts."""
        edits = tuple(edits)
        if not edits:
            return self
        other = copy.copy(self)
        other.standing = (*self.standing, *edits)
        return other

    @property
    def output_device(self) -> torch.device:
        """Where the final hidden state (hence captures and logits) comes out: the final norm's
        execution device (under a device map, accelerate's hook says which). Suites upload the
        tensors they combine with captures here, before the forward."""
        if "_output_device" not in self.__dict__:
            norm = self.arch.final_norm
            dev = getattr(getattr(norm, "_hf_hook", None), "execution_device", None)
            if dev is None:
                p = next(norm.parameters(), None)
                dev = p.device if p is not None and p.device.type != "meta" else self.loaded.device
            elif isinstance(dev, int):
                dev = torch.device("cuda", dev)
            self._output_device = torch.device(dev)
        return self._output_device

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
        stop_after: int | None = None,
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
        ``stop_after``: run the blocks up to this one only (the ones above are never run:
        SAE training reads the residual leaving it); captures and edits must lie at or
        below it, and there are no logits (pass ``logits=False``).
        """
        captures, edits = list(captures), [*self.standing, *edits]
        if self.standing and prefix is not None:
            raise WhiteboxError("a study under --edit computes whole prompts: its passes take no cached prefix "
                                "(the prefix would stay unedited)")
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
        if stop_after is not None:
            stop_after = self.arch.check_layer(int(stop_after))
            if logits is not False and logits is not None:
                raise WhiteboxError("a pass that stops after a block has no logits: pass logits=False")
        plan = Plan(self, batch, past, prefix.length if prefix is not None else past)
        trace = Trace(logits=None, grads=plan.grads)
        for c in captures:
            plan_capture(plan, c, trace, stop_after)
        for e in edits:
            plan_edit(plan, e, stop_after)
        logit_pos = None
        last_only = isinstance(logits, str) and logits == "last"
        if logits is not False and logits is not None and not last_only and not (isinstance(logits, str) and logits == "all"):
            logit_pos = plan.pos(plan.computed(batch.host_padded(batch.positions(logits)), "logits"))
        device = batch.input_ids.device
        # a packed batch's explicit mask is causal: on the CPU its SDPA runs by query chunks, each against
        # the keys up to its last query (the fused kernel skips them only under is_causal)
        plan.chunked = (batch.visible is not None and device.type == "cpu" and self.base_attention == "sdpa"
                        and plan.computed_len > attn_impl.CHUNK)
        plan.decide(keep_bytes_for(device) if self.keep_bytes is None else self.keep_bytes, self.model.dtype.itemsize)
        plan.upload(device)
        mask, position_ids, input_ids = batch.attention_mask, batch.position_ids[:, past:], batch.input_ids[:, past:]
        if prefix is not None:
            mask = torch.cat([torch.ones(batch.size, prefix.length, dtype=mask.dtype, device=mask.device), mask], dim=1)
            position_ids = position_ids + prefix.length
            cache = prefix.cache_for(batch.size)
        if batch.visible is not None:
            mask = self._packed_mask(batch, position_ids, prefix.length if prefix is not None else 0)
        with installed(plan, stop_after), torch.set_grad_enabled(grad):
            try:
                out = self.model.base_model(
                    input_ids=None if inputs_embeds is not None else input_ids,
                    inputs_embeds=inputs_embeds,
                    attention_mask=mask,
                    position_ids=position_ids,
                    past_key_values=cache,
                    use_cache=cache is not None,
                )
                hidden = out.last_hidden_state
            except Stop as stop:
                hidden = stop.hidden
            if isinstance(logits, str) and logits == "all":
                trace.logits = self.unembed(hidden)
            elif last_only and stop_after is None:
                # left padding: every example ends in the last column. The same slice and the
                # same product as the model's own forward with logits_to_keep=1 (bit-identical)
                trace.logits = self.unembed(hidden[:, -1:, :])[:, 0]
            elif logit_pos is not None:
                trace.logits = self.unembed(hidden.gather(1, logit_pos.index(shape_with(hidden.shape, 1, logit_pos.n), 1, hidden.device)))
            if trace.logits is not None:
                trace.logits = full_precision(trace.logits)
            for entry in plan.captures:
                missing = [l for l in entry[1] if not plan.produced(entry, l)]
                if missing:
                    raise RuntimeError(f"capture {entry[0].key} produced nothing for layers {missing}: the family description does not match the model")
            # layers split over devices (device_map) hand their pieces over on the output's device
            plan.collect(trace, hidden.device)
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
