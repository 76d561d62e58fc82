"""The hooks of one pass: on every site it reads or writes, each applying the site's writes to a
copy and reading its captures (a reference kept, or the rows gathered at once); the attention
modules see the plan; a block the pass stops after raises :class:`Stop`."""

from __future__ import annotations

from contextlib import contextmanager

import torch

from whitebox_eval.internals.host_tensors import shape_with
from whitebox_eval.internals.pass_plan import Plan, Site


class Stop(Exception):
    """Raised by the hook on block ``stop_after``: the blocks above are never run."""

    def __init__(self, hidden: torch.Tensor):
        super().__init__()
        self.hidden = hidden


@contextmanager
def installed(plan: Plan, stop_after: int | None = None):
    """The pass's hooks on the sites it reads or writes (and the attention modules), removed after it."""
    handles = []
    trace_grads = plan.grads

    def process(site: Site, t: torch.Tensor) -> torch.Tensor | None:
        if site.writes:
            t = t.clone()
            v = site.view(t)
            for w in site.writes:
                w(v)
        for pos in site.reads.values():
            if plan.keep or pos is None:  # a reference: gathered after the pass, every layer at once
                plan.kept[site.point][site.layer] = t
            else:
                shape = shape_with(t.shape, site.seq_dim, pos.n)
                key = ("site", site.point, id(pos))
                index = pos.index(shape, site.seq_dim, t.device)
                out = plan.slot(key, site.layer, shape, t.dtype, t.device)
                plan.gathered[key][site.layer] = (t.gather(site.seq_dim, index) if out is None
                                                  else torch.gather(t, site.seq_dim, index, out=out))
        if site.grad_reads and t.requires_grad:
            def keep(g, site=site):
                gv = site.view(g)
                for name, pos in site.grad_reads:
                    got = gv if pos is None else gv.gather(1, pos.index(shape_with(gv.shape, 1, pos.n), 1, gv.device))
                    trace_grads.setdefault(name, {})[site.layer] = got.detach()
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
    if stop_after is not None:  # registered last: the block's own capture and edit hooks run first
        def stop(mod, args, out):
            raise Stop(out[0] if isinstance(out, tuple) else out)
        handles.append(plan.arch.blocks[stop_after].register_forward_hook(stop))
    attn_modules = [plan.arch.attention(l) for l in range(plan.arch.n_layers)]
    for m in attn_modules:
        m._whitebox_plan = plan if plan.attn or plan.chunked else None
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        for m in attn_modules:
            m._whitebox_plan = None
