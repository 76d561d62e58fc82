"""Forward passes that stop after one decoder block, or swap that block's output.

``block_output`` runs the model only up to block ``layer`` (the blocks above it are never
run) and returns the residual stream leaving it (SAELens' ``blocks.{layer}.hook_resid_post``,
HF's ``hidden_states[layer + 1]``). ``replaced_block_output`` runs the whole model with that
stream replaced by a function of it, for loss-recovered measures.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import torch

from whitebox_eval.errors import WhiteboxError


class _Stop(Exception):
    def __init__(self, hidden: torch.Tensor):
        super().__init__()
        self.hidden = hidden


def _hidden(output):
    return output[0] if isinstance(output, tuple) else output


def _with_hidden(output, hidden: torch.Tensor):
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


@contextmanager
def _hook(module, fn):
    handle = module.register_forward_hook(fn)
    try:
        yield
    finally:
        handle.remove()


def _inner_model(lm):
    """The transformer without the LM head, when the model exposes it (saves the unembedding)."""
    base = getattr(lm.model, "base_model_prefix", None)
    return getattr(lm.model, base, None) if base else None


def block_output(lm, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, layer: int) -> torch.Tensor:
    """Residual stream leaving block ``layer``, ``[B, S, d_model]``; blocks above ``layer`` are not run."""
    layer = lm.arch.check_layer(layer)
    block = lm.arch.blocks[layer]

    def stop(_module, _args, output):
        raise _Stop(_hidden(output))

    model = _inner_model(lm) or lm.model
    with torch.no_grad(), _hook(block, stop):
        try:
            model(input_ids=input_ids.to(lm.device), attention_mask=None if attention_mask is None
                  else attention_mask.to(lm.device), use_cache=False)
        except _Stop as s:
            return s.hidden
    raise WhiteboxError(f"block {layer} was not run by the model's forward")


def replaced_block_output(
    lm, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, layer: int,
    replace: Callable[[torch.Tensor], torch.Tensor] | None,
) -> torch.Tensor:
    """Logits ``[B, S, vocab]`` with block ``layer``'s output ``h`` replaced by ``replace(h)`` (None: clean)."""
    layer = lm.arch.check_layer(layer)

    def swap(_module, _args, output):
        return _with_hidden(output, replace(_hidden(output)).to(_hidden(output).dtype))

    mask = None if attention_mask is None else attention_mask.to(lm.device)
    with torch.no_grad():
        if replace is None:
            return lm.model(input_ids=input_ids.to(lm.device), attention_mask=mask, use_cache=False).logits
        with _hook(lm.arch.blocks[layer], swap):
            return lm.model(input_ids=input_ids.to(lm.device), attention_mask=mask, use_cache=False).logits


def replaced_site(
    lm, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, module, replace: Callable[[torch.Tensor], torch.Tensor],
    *, on_input: bool = False,
) -> torch.Tensor:
    """Logits ``[B, S, vocab]`` with ``module``'s output (or, ``on_input``, its first input) ``h``
    replaced by ``replace(h)``: the sites of :mod:`.hook_points` below a block (``hook_mlp_out``:
    the family's MLP-output module; ``hook_z``: o_proj's input)."""
    def swap(_module, _args, output):
        return _with_hidden(output, replace(_hidden(output)).to(_hidden(output).dtype))

    def swap_input(_module, args):
        return (replace(args[0]).to(args[0].dtype), *args[1:])

    mask = None if attention_mask is None else attention_mask.to(lm.device)
    handle = module.register_forward_pre_hook(swap_input) if on_input else module.register_forward_hook(swap)
    try:
        with torch.no_grad():
            return lm.model(input_ids=input_ids.to(lm.device), attention_mask=mask, use_cache=False).logits
    finally:
        handle.remove()
