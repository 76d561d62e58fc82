"""Counting dispatched aten ops (a ``TorchDispatchMode``): the counters ``op_counts.py`` holds the
engine to and ``gpu_check.py`` reports per phase of a pass. A module of those two scripts, not a
script of its own."""

from __future__ import annotations

import collections

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = ("_local_scalar_dense", "nonzero", "item", "equal")
"""Ops that read a device tensor's value on the host (a host sync on a GPU)."""


class OpCounter(TorchDispatchMode):
    """Every dispatched aten op; host syncs also counted while ``model``'s base model runs."""

    def __init__(self, model=None):
        super().__init__()
        self.total = 0
        self.ops: collections.Counter = collections.Counter()
        self.forward_syncs: collections.Counter = collections.Counter()
        self._depth = 0
        self._handles = []
        if model is not None:
            base = getattr(model, "base_model", model)
            self._handles = [base.register_forward_pre_hook(self._enter),
                             base.register_forward_hook(self._leave, always_call=True)]

    def _enter(self, *_):
        self._depth += 1

    def _leave(self, *_):
        self._depth -= 1

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.total += 1
        self.ops[name] += 1
        if self._depth and name in SYNC_OPS:
            self.forward_syncs[name] += 1
        return func(*args, **(kwargs or {}))


class PhaseCounter(OpCounter):
    """Ops and host syncs of one call per phase: before the model's forward, during it, after it.
    A sync is one of :data:`SYNC_OPS` or a copy from a CUDA tensor to the host."""

    def __init__(self, model):
        super().__init__(model)
        self.phases = {p: {"ops": 0, "syncs": 0} for p in ("before", "forward", "after")}
        self._seen = False
        self._device = next(model.parameters()).device.type  # a read of a tensor there waits for it

    def _enter(self, *a):
        self._seen = True
        super()._enter(*a)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        phase = "forward" if self._depth else ("after" if self._seen else "before")
        self.phases[phase]["ops"] += 1
        name = func.overloadpacket.__name__
        there = any(isinstance(a, torch.Tensor) and a.device.type == self._device for a in args)
        d2h = name in ("_to_copy", "copy_") and isinstance(out, torch.Tensor) and out.device.type == "cpu" and any(
            isinstance(a, torch.Tensor) and a.device.type == "cuda" for a in args)
        if (name in SYNC_OPS and there) or d2h:
            self.phases[phase]["syncs"] += 1
        return out
