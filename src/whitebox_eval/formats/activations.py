"""``formats --save-activations``: the activations of each question's MCQ prompt and of its free
answers (:mod:`whitebox_eval.internals.activation_specs`, :mod:`whitebox_eval.runs.activations`).

``last``, ``options`` and ``all`` read the MCQ prompt's own pass (the one that scores the
letters): its last token, each option's label token, every token (cached demonstrations' rows
from one pass over them). ``generated`` reads the decoder's passes of every free answer
(``<id>/<format>/<sample>``: one vector per generated token, the row that produced it, up to the
token that ended the answer). The captures ride on the scoring passes: samples.jsonl is the same
with and without them.
"""

from __future__ import annotations

import sys

import numpy as np

from whitebox_eval.internals.activation_specs import (POSITIONS, stored_dtype, batch_captures, batch_rows,
                                                      check_activations, generated_rows, generation_captures,
                                                      layers_of, parse_activations, width)
from whitebox_eval.runs.activations import ActivationParts, estimate


def check(cfg, loaded) -> None:
    """The specs against the model (its config.json when not loaded yet: the command checks
    before any model work), before the run folder is written."""
    if not cfg.save_activations:
        return
    specs = parse_activations(cfg.save_activations, POSITIONS)
    if loaded is None:
        from whitebox_eval.models.config_sizes import config_sizes

        check_activations(specs, config_sizes(cfg.model).n_layers)
    else:
        check_activations(specs, loaded.arch.n_layers, loaded.arch)


class Saver:
    """The study's saved activations: captures per question, a part per batch, the merged files."""

    def __init__(self, cfg, folder, engine, items, demos, formats: tuple[str, ...], main: bool):
        arch = engine.arch
        self.cfg, self.engine, self.items, self.formats = cfg, engine, items, formats
        self.specs = parse_activations(cfg.save_activations, POSITIONS)
        self.n_layers = arch.n_layers
        dtype = engine.loaded.model.dtype
        meta = {s.stem: {"layers": layers_of(s, arch.n_layers), "model_dtype": str(dtype).replace("torch.", "")}
                for s in self.specs}
        self.parts = ActivationParts(folder, self.specs, meta)
        self.memo: dict = {}
        self.batch: dict[str, dict] = {}
        self.gen_captures = generation_captures(self.specs, arch.n_layers)
        if main:
            tok = engine.tokenizer
            from whitebox_eval.tasks.prompts import render_prompt

            lengths = [len(it.options) for it in items]
            positions = {"last": 1.0, "options": float(np.mean(lengths)),
                         "generated": float(len(formats) * cfg.n_samples * cfg.max_new_tokens)}
            if any(s.positions == "all" for s in self.specs):
                positions["all"] = float(np.mean([len(tok(render_prompt(it, fmt="mcq_plain", demos=demos).text)["input_ids"])
                                                  for it in items[:50]]))  # the first 50 questions' mean
            itemsize = np.dtype(stored_dtype(dtype)).itemsize
            _, line = estimate(self.specs, len(items), arch.n_layers, {s.point: width(arch, s.point) for s in self.specs},
                               positions, itemsize)
            print(line, file=sys.stderr)
            folder.log(line)

    # the MCQ prompt's pass ---------------------------------------------------------------
    def captures(self, t) -> list:
        return batch_captures(self.specs, self.n_layers, [t.label_positions])

    def prompt(self, item_id, t, trace, prefix) -> None:
        for stem, rows in batch_rows(self.engine, self.specs, trace, [t.label_positions], prefix, self.memo).items():
            self.batch.setdefault(stem, {})[str(item_id)] = rows[0]

    # the free answers ----------------------------------------------------------------------
    def on_generation(self, item_id, fmt: str) -> dict:
        """:func:`~whitebox_eval.formats.generation.sample_prompt`'s ``captures`` and ``keep`` for one
        format's answers ({} without ``generated`` specs)."""
        if not self.gen_captures:
            return {}

        def keep(gens) -> None:
            for s, g in enumerate(gens):
                for stem, x in generated_rows(self.specs, g).items():
                    self.batch.setdefault(stem, {})[f"{item_id}/{fmt}/{s}"] = x
        return {"captures": self.gen_captures, "keep": keep}

    def wrap(self, score):
        """The pass's ``score`` that also writes the chunk's tensors (:meth:`ActivationParts.wrap`)."""
        return self.parts.wrap(score, self)

    def merge(self) -> dict:
        ids = [it.id for it in self.items]
        keys = {s.stem: [f"{i}/{f}/{k}" for i in ids for f in self.formats for k in range(self.cfg.n_samples)]
                for s in self.specs if s.positions == "generated"}
        out = self.parts.merge(ids, keys)
        for stem in keys:
            out[stem]["key"] = "<sample id>/<format>/<sample>: one free answer"
            out[stem]["item_shape_axes"] = ["layer", "generated token", "width"]
        return out
