"""A pass's work inside the registered attention function (:mod:`.attention`): post-RoPE q/k,
attention rows and matrices, attention edits.

Captured rows are one fused product per layer (``baddbmm``: scale and mask inside the product, the
mask built once per pass and mask kind) into float32 buffers made once per pass; after a pass that
kept references, one product serves every layer (:mod:`.pass_results`).
"""

from __future__ import annotations

import torch

from whitebox_eval.internals import attention as attn_impl
from whitebox_eval.internals.host_tensors import Pos, device_key, shape_with


class AttnNeeds:
    """What one layer's attention function has to do besides computing attention."""

    def __init__(self):
        self.rot: list[tuple[str, str, Pos]] = []  # (capture key, "q"|"k", positions in the query|key axis)
        self.rows: dict[int, Pos] = {}  # attention rows at these query positions
        self.full: list[tuple[str, bool]] = []  # (capture key, head mean)
        self.edits: list = []  # attention edits: apply(probs) -> probs (edits/attention_edits.py)


class AttentionWork:
    """The attention side of :class:`~whitebox_eval.internals.pass_plan.Plan` (a mixin: the plan's
    ``attn``, ``keep``, ``kept_qk``, ``gathered``, ``slot``, ``batch``, ``arch`` and ``_memo``)."""

    def touches_attention(self, layer: int) -> bool:
        return layer in self.attn

    def attention(self, layer, module, query, key, value, mask, scaling, softcap, base, dropout, kwargs):
        need = self.attn[layer]
        full = bool(need.full or need.edits)
        if self.keep and (need.rot or (need.rows and not full)):
            self.kept_qk[layer] = (query, key, mask, scaling, softcap)
        elif need.rot:
            for name, which, pos in need.rot:
                x = query if which == "q" else key
                shape = shape_with(x.shape, 2, pos.n)
                index, into = pos.index(shape, 2, x.device), self.slot(("rot", name), layer, shape, x.dtype, x.device)
                self.gathered[("rot", name)][layer] = x.gather(2, index) if into is None else torch.gather(x, 2, index, out=into)
        if full:
            b, h, sq, _ = query.shape
            k_len = key.shape[2]
            probs = self._probs(query, key, self._mask3(mask, None, sq, k_len, key.shape[1], query.device),
                                scaling, softcap, None).view(b, h, sq, k_len)
            for edit in need.edits:
                probs = edit.apply(probs)
            if need.edits:  # edited layers run the attention from the edited probabilities
                if dropout and module.training:
                    probs = torch.nn.functional.dropout(probs, p=dropout)
                out, weights = self._weighted_values(probs, value), probs
            else:
                out, weights = self._original(base, module, query, key, value, mask, scaling, dropout, kwargs)
            for name, mean in need.full:  # the head mean is taken padded: one [B, S, K] kept per layer
                self.gathered[("full", name)][layer] = probs.mean(1) if mean else probs
            for i, pos in need.rows.items():
                rows = probs.gather(2, pos.index((b, h, pos.n, k_len), 2, probs.device))
                self.gathered[("rows", i)][layer] = rows.view(b * key.shape[1], -1, k_len)
            return out, weights
        out, weights = self._original(base, module, query, key, value, mask, scaling, dropout, kwargs)
        if need.rows and not self.keep:  # only the requested query rows: [B*Hkv, g*P, K], never the full matrix
            for i, pos in need.rows.items():
                m3 = self._mask3(mask, pos, query.shape[2], key.shape[2], key.shape[1], query.device)
                into = self.slot(("rows", i), layer, m3.shape, torch.float32, query.device)
                self.gathered[("rows", i)][layer] = self._probs(query, key, m3, scaling, softcap, pos, into)
                if into is not None:  # the scores: one softmax over every layer's slot after the pass
                    self.unnormalised[("rows", i)].append(layer)
        return out, weights

    def _original(self, base, module, query, key, value, mask, scaling, dropout, kwargs):
        if base == "sdpa":
            if self.chunked and mask is not None:
                return attn_impl.by_query_chunks(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)
            return attn_impl.sdpa_attention_forward(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)
        return attn_impl._family_eager(module)(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)

    def _buffer(self, name: str, shape: tuple, dtype, device) -> torch.Tensor:
        key = ("buffer", name, shape, dtype, device_key(device))
        buf = self._memo.get(key)
        if buf is None:
            buf = self._memo[key] = torch.empty(shape, dtype=dtype, device=device)
        return buf

    def _view(self, buf: torch.Tensor, name: str, make) -> torch.Tensor:
        """A view of a per-pass buffer, made once."""
        key = (name, id(buf))
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def _probs(self, query, key, m3, scaling, softcap, pos: Pos | None, scores_into: torch.Tensor | None = None) -> torch.Tensor:
        """Post-softmax probabilities [B*Hkv, g*P, K] in float32 of the query rows at ``pos`` (None: all)
        against every key: one fused product (scale and mask inside it; softcap: tanh between the
        scaled product and the mask), GQA without repeating keys (a kv group's query heads are rows).
        With ``scores_into`` (a slot, :meth:`~whitebox_eval.internals.pass_plan.Plan.slot`): the masked
        scores written there, before the softmax (which the caller takes once for every layer)."""
        b, h, sq, d = query.shape
        hkv, k_len = key.shape[1], key.shape[2]
        p = sq if pos is None else pos.n
        dev = query.device
        if torch.is_grad_enabled():  # autograd: no buffer reused across layers
            q = query if pos is None else query.gather(2, pos.index((b, h, p, d), 2, dev))
            q3 = q.float().reshape(b * hkv, (h // hkv) * p, d)
            k3t = key.float().reshape(b * hkv, k_len, d).mT
        else:  # float32 copies into buffers made once per pass (their 3D views too)
            qb = self._buffer("q", (b, h, p, d), torch.float32, dev)
            q3 = self._view(qb, "q3", lambda: qb.view(b * hkv, (h // hkv) * p, d))
            if key.dtype == torch.float32 and key.is_contiguous():  # the layer's own keys, no copy
                k3t = key.view(b * hkv, k_len, d).mT
            else:
                kb = self._buffer("k", (b, hkv, k_len, d), torch.float32, dev)
                k3t = self._view(kb, "k3t", lambda: kb.view(b * hkv, k_len, d).mT)
                kb.copy_(key)
            if pos is None:
                qb.copy_(query)
            elif query.dtype == torch.float32:
                torch.gather(query, 2, pos.index((b, h, p, d), 2, dev), out=qb)
            else:
                qb.copy_(query.gather(2, pos.index((b, h, p, d), 2, dev)))
        if scores_into is not None:
            return scores(q3, k3t, m3, scaling, softcap, scores_into)
        return torch.softmax(scores(q3, k3t, m3, scaling, softcap), dim=-1)

    def _row_mask(self, mask, pos: Pos | None, q_len: int, k_len: int, device) -> torch.Tensor:
        """The float32 additive mask [B|1, 1, P|q, K] of ``mask``'s rows at ``pos`` (None: all rows), built
        once per pass, mask kind (layers of one kind receive the same object) and device."""
        key = ("rowmask", id(mask), None if pos is None else id(pos), q_len, k_len, device_key(device))
        if key not in self._memo:  # the entry keeps the mask alive, so its id is not reused
            rows = None if pos is None else pos.on(device)
            self._memo[key] = (mask, attn_impl.additive_mask(mask, q_len, k_len, device, rows=rows))
        return self._memo[key][1]

    def _mask3(self, mask, pos: Pos | None, q_len: int, k_len: int, hkv: int, device) -> torch.Tensor:
        """:meth:`_row_mask` laid out as the fused product's rows: [B*Hkv, g*P, K] (once per pass and kind)."""
        key = ("mask3", id(mask), None if pos is None else id(pos), q_len, k_len, hkv, device_key(device))
        if key not in self._memo:
            m = self._row_mask(mask, pos, q_len, k_len, device)
            b, h = self.batch.size, self.arch.n_heads
            p = m.shape[2]
            m3 = m.expand(b, 1, p, k_len).unsqueeze(2).expand(b, hkv, h // hkv, p, k_len).reshape(b * hkv, -1, k_len)
            self._memo[key] = (mask, m3)
        return self._memo[key][1]

    def _weighted_values(self, probs: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """probs [B, H, Q, K] @ value [B, Hkv, K, D] -> output [B, Q, H, D] (the interface's layout);
        probabilities in the model's dtype, as eager attention multiplies them."""
        b, h, q_len, k_len = probs.shape
        hkv, d = value.shape[1], value.shape[-1]
        if torch.is_grad_enabled():
            p3 = probs.to(value.dtype).reshape(b * hkv, (h // hkv) * q_len, k_len)
            v3 = value.reshape(b * hkv, k_len, d)
        else:
            pb = self._buffer("p", (b, h, q_len, k_len), value.dtype, probs.device)
            vb = self._buffer("v", (b, hkv, k_len, d), value.dtype, value.device)
            pb.copy_(probs)
            vb.copy_(value)
            p3 = self._view(pb, "p3", lambda: pb.view(b * hkv, -1, k_len))
            v3 = self._view(vb, "v3", lambda: vb.view(b * hkv, k_len, d))
        return torch.bmm(p3, v3).view(b, h, q_len, d).transpose(1, 2).contiguous()


def scores(q3, k3t, m3, scaling, softcap, out: torch.Tensor | None = None):
    """scaling * q.k + mask in one product; with softcap, tanh(scaling / softcap * q.k) * softcap + mask
    (into ``out`` where given)."""
    if softcap is None:
        return torch.baddbmm(m3, q3, k3t, alpha=scaling, out=out)
    s = torch.baddbmm(m3, q3, k3t, beta=0.0, alpha=scaling / softcap).tanh_()
    return torch.add(m3, s, alpha=softcap, out=out)
