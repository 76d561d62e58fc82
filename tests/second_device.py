"""A second device on a CPU-only machine, to catch suite code that mixes devices.

Under a device map the head and the final norm (hence the logits and the captures) sit on
another GPU than the embedding, where the inputs go. A tensor built on the input's device and
combined with one from the head raises there, on the first batch. Here, inside
:class:`SecondDevice`, tensors of modules moved by :func:`put_on_second_device` are
:class:`Elsewhere` tensors: CPU data that reports the ``meta`` device and follows the rules CUDA
enforces: combining one with a CPU tensor (other than a 0-dim scalar, or an index) raises,
``.numpy()`` refuses, ``.cpu()`` / ``.to("cpu")`` come back, and factories or ``.to()`` aimed at
``meta`` land there. Values are exact, so results compare with the unsplit model's.
"""

from __future__ import annotations

import copy

import torch
from accelerate.hooks import AlignDevicesHook, add_hook_to_module
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

SECOND = torch.device("meta")
_DEVICE_ARG = (str, torch.device)


class Elsewhere(torch.Tensor):
    """CPU data standing for a tensor on the second device."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__self__", None) is torch.Tensor.device:  # the .device getter
            return SECOND
        return super().__torch_function__(func, types, args, kwargs or {})


def _plain(t):
    return t.as_subclass(torch.Tensor) if isinstance(t, Elsewhere) else t


def _there(t):
    return t.as_subclass(Elsewhere) if isinstance(t, torch.Tensor) and not isinstance(t, Elsewhere) else t


def _second(device) -> bool:
    return isinstance(device, _DEVICE_ARG) and torch.device(device) == SECOND


class SecondDevice(TorchFunctionMode):
    """Active while a test runs suite code on a model split by :func:`put_on_second_device`."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        flat = tree_flatten((args, kwargs))[0]
        there = any(isinstance(t, Elsewhere) for t in flat)
        if func in (torch.Tensor.to, torch.Tensor.cpu):
            target = "cpu" if func is torch.Tensor.cpu else kwargs.pop("device", None)
            rest = [a for a in args[1:] if not isinstance(a, _DEVICE_ARG)]
            target = next((a for a in args[1:] if isinstance(a, _DEVICE_ARG)), target)
            out = _plain(args[0]).to(*rest, **kwargs) if (rest or kwargs) else _plain(args[0])
            return _there(out) if (_second(target) or (target is None and there)) else out
        if func is torch.Tensor.numpy and there:
            raise TypeError("can't convert a tensor on the second device to numpy: copy it with .cpu() first")
        if _second(kwargs.get("device")):  # a factory aimed at the second device
            kwargs["device"] = "cpu"
            return _there(func(*args, **kwargs))
        if there and func not in (torch.Tensor.__getitem__, torch.Tensor.__setitem__):  # CPU indices are allowed
            mixed = [t for t in flat if isinstance(t, torch.Tensor) and not isinstance(t, Elsewhere) and t.dim() > 0]
            if mixed:
                raise RuntimeError(f"{getattr(func, '__name__', func)}: expected all tensors on the same device, "
                                   f"got the second device and {mixed[0].device} {tuple(mixed[0].shape)}")
        return func(*args, **kwargs)


def put_on_second_device(lm, modules) -> None:
    """Move ``modules`` of ``lm.model`` (names) to the second device as accelerate's dispatch does:
    their weights there, a hook moving their inputs there, and ``hf_device_map`` saying so."""
    placed = {name: "cpu" for name, _ in lm.model.named_children()}
    for name in modules:
        module = lm.model.get_submodule(name)
        for sub in module.modules():
            for pname, p in list(sub.named_parameters(recurse=False)):
                setattr(sub, pname, torch.nn.Parameter(_there(p.detach()), requires_grad=p.requires_grad))
        add_hook_to_module(module, AlignDevicesHook(execution_device=SECOND, io_same_device=False))
        placed[name] = "meta"
    lm.model.hf_device_map = {"model.embed_tokens": "cpu", **placed}


SPLIT = ["model.layers.2", "model.norm", "lm_head"]
"""The last layer, the final norm and the head: the logits, the final hidden state and every
capture (stacked on its device) come from the second device."""


def split_pair(lm):
    """(an unsplit copy of ``lm``, ``lm`` with :data:`SPLIT` on the second device)."""
    from whitebox_eval.models.architectures import Architecture
    from whitebox_eval.models.loading import LoadedModel

    copied = copy.deepcopy(lm.model)
    plain = LoadedModel(model=copied, tokenizer=lm.tokenizer, arch=Architecture.of(copied), spec=lm.spec, source=lm.source)
    put_on_second_device(lm, SPLIT)
    assert lm.device == torch.device("cpu")  # inputs go to the embedding's device, not the head's
    return plain, lm
