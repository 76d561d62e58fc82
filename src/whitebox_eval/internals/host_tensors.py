"""Tensors a pass builds on the host while planning and uploads once (indices, masks, edit tensors).

A :class:`Host` is on the pass's device after :meth:`~whitebox_eval.internals.pass_plan.Plan.upload`
(one copy per dtype for all of them); a :class:`Pos` is one set of positions with the gather index
each tensor shape needs, built once per pass and device.
"""

from __future__ import annotations

from typing import Sequence

import torch


def device_key(device) -> str:
    return str(device)


class Host:
    """A tensor built on the host while planning; on the pass's device after the plan's upload
    (one copy per dtype for all of them), and on any other device a layer sits on (device map) on
    first use."""

    def __init__(self, host: torch.Tensor):
        self.host = host
        self.on_device: dict[str, torch.Tensor] = {}

    def on(self, device) -> torch.Tensor:
        key = device_key(device)
        t = self.on_device.get(key)
        if t is None:
            t = self.on_device[key] = self.host if torch.device(device).type == "cpu" else self.host.to(device)
        return t

    def unbound(self, device) -> tuple[torch.Tensor, ...]:
        """The rows of this [K, ...] tensor on ``device`` as a tuple (index_put's indices), made once."""
        key = "unbound@" + device_key(device)
        t = self.on_device.get(key)
        if t is None:
            t = self.on_device[key] = tuple(self.on(device).unbind(0))
        return t


def positions_key(positions) -> tuple:
    """A key for memoising what a pass derives from ``positions`` (edits at the same positions share it)."""
    if positions is None or isinstance(positions, str):
        return ("named", positions)
    if isinstance(positions, torch.Tensor):
        return ("tensor", id(positions))
    return ("list", repr(positions))


class Pos(Host):
    """[B, P] positions of one pass (columns this pass computes, padded), with the gather index
    each tensor shape needs, built once per pass and device."""

    def __init__(self, host: torch.Tensor):
        super().__init__(host)
        self.n = host.shape[1]
        self._index: dict[tuple, torch.Tensor] = {}

    def index(self, shape: Sequence[int], dim: int, device) -> torch.Tensor:
        """The index that gathers these positions along ``dim`` of a tensor whose dim 0 is the batch:
        ``shape`` is the result's ([..., P at dim, ...])."""
        key = (tuple(shape), dim, device_key(device))
        idx = self._index.get(key)
        if idx is None:
            view = [self.host.shape[0]] + [1] * (len(shape) - 1)
            view[dim] = self.n
            idx = self._index[key] = self.on(device).view(view).expand(*shape)
        return idx


def shape_with(shape: Sequence[int], dim: int, n: int) -> list[int]:
    """``shape`` with ``n`` at ``dim`` (a gather's result shape)."""
    out = list(shape)
    out[dim] = n
    return out
