"""After the pass: every capture stacked over its layers and handed out (float32, contiguous).

After a pass that kept references, one stack and one gather serve every layer of a point, and
attention rows are one product for every kept layer; otherwise the rows the hooks gathered are
stacked. Rows stay padded during the pass and are un-padded once, on the stack.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from whitebox_eval.internals.host_tensors import Pos, device_key, shape_with
from whitebox_eval.internals.pass_attention import scores
from whitebox_eval.internals.requests import Capture, Trace


def full_precision(x: torch.Tensor) -> torch.Tensor:
    """bf16/fp16 results handed out as float32, so every score computed from them (softmax,
    log-likelihoods, q.k products, lens) accumulates in float32 whatever the weights are."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def handed_out(x: torch.Tensor) -> torch.Tensor:
    """A capture as the trace holds it: float32 (from bf16/fp16) and contiguous, in one copy at most."""
    if x.dtype in (torch.bfloat16, torch.float16):
        return x.to(torch.float32, memory_format=torch.contiguous_format)
    return x.contiguous()


class Collection:
    """The after-the-pass side of :class:`~whitebox_eval.internals.pass_plan.Plan` (a mixin)."""

    def collect(self, trace: Trace, device) -> None:
        """Every capture, stacked over its layers on ``device`` (the final hidden state's)."""
        for c, layers, source, pos in self.captures:
            if source == "site":
                x = self._site_capture(c.point, layers, pos, device)
            elif source == "rot":
                x = self._rot_capture(c, layers, pos, device)
            elif source == "rows":
                x = self._unpad_keys(self._rows_capture(layers, pos, device))
            else:  # attn_full / attn_mean: both axes un-padded once, on the stack
                x = torch.stack([self.gathered[("full", c.key)][l].to(device) for l in layers], dim=1)
                x = self._unpad_keys(self._unpad_keys(x.transpose(-1, -2)).transpose(-1, -2))
            trace.captures[c.key] = handed_out(x)

    def _site_capture(self, point: str, layers: list[int], pos: Pos | None, device) -> torch.Tensor:
        view = self.sites[(point, layers[0])].view
        if self.keep or pos is None:  # references: one stack of what the hooks saw, one gather
            key = ("stacked", point, tuple(layers), device_key(device))
            if key not in self._memo:
                self._memo[key] = view(torch.stack([self.kept[point][l].to(device) for l in layers], dim=1))
            x = self._memo[key]
            return x if pos is None else x.gather(2, pos.index(shape_with(x.shape, 2, pos.n), 2, device))
        rows = self.gathered[("site", point, id(pos))]
        return view(torch.stack([rows[l].to(device) for l in layers], dim=1))

    def _rot_capture(self, c: Capture, layers: list[int], pos: Pos, device) -> torch.Tensor:
        if self.keep:
            which = 0 if c.point == "q_rot" else 1
            x = torch.stack([self.kept_qk[l][which].to(device) for l in layers], dim=1)  # [B, L, H, S, D]
            x = x.gather(3, pos.index(shape_with(x.shape, 3, pos.n), 3, device))
        else:
            x = torch.stack([self.gathered[("rot", c.key)][l].to(device) for l in layers], dim=1)
        return x.transpose(2, 3)  # [B, L, P, H, D]

    def _rows_capture(self, layers: list[int], pos: Pos, device) -> torch.Tensor:
        """Attention rows [B, L, H, P, K], padded keys: from the layers' own products or, after a small
        pass, one product for every kept layer."""
        b, h = self.batch.size, self.arch.n_heads
        self._normalise(("rows", id(pos)))
        done = self.gathered.get(("rows", id(pos)), {})
        later = [l for l in layers if l not in done]
        rows: dict[int, torch.Tensor] = {}
        batched = None
        if later:
            batched = self._rows_after(later, pos, device)  # [B, L', H, P, K]
            if len(later) == len(layers):
                return batched
            rows.update(zip(later, batched.unbind(1)))
        if not later:
            x = torch.stack([done[l].to(device) for l in layers], dim=0)  # [L, B*Hkv, g*P, K]
            return x.view(len(layers), b, h, pos.n, -1).transpose(0, 1)
        for l in layers:
            if l in done:
                rows[l] = done[l].to(device).view(b, h, pos.n, -1)
        return torch.stack([rows[l] for l in layers], dim=1)

    def _normalise(self, key: tuple) -> None:
        """The softmax of the scores the layers wrote into their slots of ``key``: one op for all of them."""
        layers = self.unnormalised.pop(key, None)
        if layers:
            at, _, buffer = self._slots[key]
            probs = torch.softmax(buffer, dim=-1).unbind(0)
            rows = self.gathered[key]
            for l in layers:
                rows[l] = probs[at[l]]

    def _rows_after(self, layers: list[int], pos: Pos, device) -> torch.Tensor:
        """The rows of every kept layer at once: [B, L, H, P, K] (layers grouped by scaling and softcap)."""
        groups: dict[tuple, list[int]] = defaultdict(list)
        for l in layers:
            q, k, mask, scaling, softcap = self.kept_qk[l]
            groups[(scaling, softcap)].append(l)
        parts: dict[int, torch.Tensor] = {}
        out = None
        for (scaling, softcap), ls in groups.items():
            qs = torch.stack([self.kept_qk[l][0].to(device) for l in ls], dim=1)  # [B, L, H, Sq, D]
            ks = torch.stack([self.kept_qk[l][1].to(device) for l in ls], dim=1)  # [B, L, Hkv, K, D]
            b, n, h, sq, d = qs.shape
            hkv, k_len = ks.shape[2], ks.shape[3]
            q3 = qs.gather(3, pos.index((b, n, h, pos.n, d), 3, device)).float().view(b * n * hkv, -1, d)
            k3t = ks.float().view(b * n * hkv, k_len, d).mT
            masks = [self._row_mask(self.kept_qk[l][2], pos, sq, k_len, device) for l in ls]  # [B|1, 1, P, K]
            if all(m is masks[0] for m in masks):
                m = masks[0].expand(b, 1, pos.n, k_len).unsqueeze(1).expand(b, n, 1, pos.n, k_len)
            else:  # kinds of layers (sliding, full) alternate: each kind's mask expanded once
                wide = {id(x): x for x in masks}
                wide = {i: x.expand(b, 1, pos.n, k_len) for i, x in wide.items()}
                m = torch.stack([wide[id(x)] for x in masks], dim=1)
            m3 = m.unsqueeze(2).expand(b, n, hkv, h // hkv, pos.n, k_len).reshape(b * n * hkv, -1, k_len)
            probs = torch.softmax(scores(q3, k3t, m3, scaling, softcap), dim=-1).view(b, n, h, pos.n, k_len)
            if len(groups) == 1:
                out = probs
            else:
                parts.update(zip(ls, probs.unbind(1)))
        return out if out is not None else torch.stack([parts[l] for l in layers], dim=1)

    def _unpad_keys(self, x: torch.Tensor) -> torch.Tensor:
        """Re-index the last (key) axis of x [B, ..., K] to example coordinates, zero-filling the tail
        (identity when no example is padded)."""
        if not self.batch.padded_anywhere:
            return x
        b, k_len = x.shape[0], x.shape[-1]
        idx, valid = self._memo[("unpad", k_len)]
        shape = [b] + [1] * (x.dim() - 2) + [k_len]
        return x.gather(-1, idx.on(x.device).view(shape).expand_as(x)) * valid.on(x.device).view(shape)

    def plan_unpad(self, k_len: int) -> None:
        """Stage the key un-padding index of length ``k_len`` (host, uploaded with the rest)."""
        if ("unpad", k_len) not in self._memo and self.batch.padded_anywhere:
            idx, valid = self.batch.key_unpad_index(k_len)
            self._memo[("unpad", k_len)] = (self.host(idx), self.host(valid.float()))

    def produced(self, entry: tuple, layer: int) -> bool:
        """Whether a capture entry (capture, layers, source, positions) got ``layer`` in this pass."""
        c, _, source, pos = entry
        if source == "site":
            return layer in self.kept.get(c.point, {}) or layer in self.gathered.get(("site", c.point, id(pos)), {})
        if source == "rot":
            return layer in self.kept_qk or layer in self.gathered.get(("rot", c.key), {})
        if source == "rows":
            return layer in self.kept_qk or layer in self.gathered.get(("rows", id(pos)), {})
        return layer in self.gathered.get(("full", c.key), {})
