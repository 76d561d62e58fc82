"""``mui --save-activations``: the activations of each item's greedy response, read in the
decoder's own passes (:mod:`whitebox_eval.internals.activation_specs`,
:mod:`whitebox_eval.runs.activations`).

``generated``: one vector per generated token (the row that produced it: the prompt's last token
for the first), every generated token including the one that stopped the response; ``last``:
the prompt's last token (the prefill's row, the first of ``generated``); ``all``: every row the
decoder computed, the prompt's tokens (the prefill) then each generated token but the last (whose
row nothing read): ``generated`` is its tail from the prompt's last token on. Keyed by the
sample's id. The captures ride on the decoder's passes: samples.jsonl is the same with and without them.
Given responses (``--responses FILE``) are not generated, so they have nothing to save.
"""

from __future__ import annotations

import sys

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.activation_specs import (stored_dtype, check_activations, layers_of, parse_activations,
                                                      stored, width)
from whitebox_eval.internals.requests import Capture
from whitebox_eval.runs.activations import ActivationParts, estimate

POSITIONS = ("last", "generated", "all")


def check(cfg, loaded, task=None) -> None:
    """The specs against the model (its config.json when not loaded yet: the command checks
    before any model work) and the task, before the run folder is written."""
    if not cfg.save_activations:
        return
    if loaded is None:
        from whitebox_eval.models.config_sizes import config_sizes

        check_activations(parse_activations(cfg.save_activations, POSITIONS), config_sizes(cfg.model).n_layers)
        return
    if task.given is not None:
        raise WhiteboxError("--save-activations reads the decoder's passes; the responses here are given "
                            "(--responses FILE), nothing is generated: run without --responses")
    check_activations(parse_activations(cfg.save_activations, POSITIONS), loaded.arch.n_layers, loaded.arch)


class Saver:
    """Captures asked of the decoder, a part per batch, the merged files."""

    def __init__(self, cfg, folder, engine, task, budget: int):
        import numpy as np

        arch = engine.arch
        self.specs = parse_activations(cfg.save_activations, POSITIONS)
        self.task, self.items = task, task.items
        dtype = engine.loaded.model.dtype
        meta = {s.stem: {"layers": layers_of(s, arch.n_layers), "model_dtype": str(dtype).replace("torch.", "")}
                for s in self.specs}
        self.parts = ActivationParts(folder, self.specs, meta)
        self.captures = [Capture(s.point, "all" if s.positions == "all" else "last", layers_of(s, arch.n_layers),
                                 name=s.key()) for s in self.specs]
        self.batch: dict[str, dict] = {}
        itemsize = np.dtype(stored_dtype(dtype)).itemsize
        _, line = estimate(self.specs, len(self.items), arch.n_layers, {s.point: width(arch, s.point) for s in self.specs},
                           {"last": 1.0, "generated": float(budget), "all": self._prompt_tokens(engine) + budget - 1},
                           itemsize)
        print(line, file=sys.stderr)
        folder.log(line)

    def _prompt_tokens(self, engine) -> float:
        """The mean prompt length (``all``'s estimate; 0 when no spec reads it)."""
        if not any(s.positions == "all" for s in self.specs):
            return 0.0
        return sum(len(self.task.prompt(it, engine.tokenizer)) for it in self.items) / max(len(self.items), 1)

    def respond(self, lm, task, items, **kw):
        """:func:`~whitebox_eval.mui.responses.respond` with the captures; keeps each item's tensors."""
        from whitebox_eval.mui.responses import respond

        prompts, responses = respond(lm, task, items, captures=self.captures, **kw)
        for it, r in zip(items, responses):
            for s in self.specs:
                x = r.captures[s.key()]
                x = stored(x.reshape(*x.shape[:2], -1))
                self.batch.setdefault(s.stem, {})[str(it.id)] = x[:, :1].copy() if s.positions == "last" else x
        return prompts, responses

    def wrap(self, score):
        """The pass's ``score`` that also writes the chunk's tensors (:meth:`ActivationParts.wrap`)."""
        return self.parts.wrap(score, self)

    def merge(self) -> dict:
        return {"activations": self.parts.merge([it.id for it in self.items])}
