"""``mcqa --save-activations``: the main pass's extra captures and the files they fill
(:mod:`whitebox_eval.internals.activation_specs`, :mod:`whitebox_eval.runs.activations`).

The captures ride on the main pass's own forward (one more capture of that pass, nothing
else changes: samples.jsonl is the same with and without them). ``last`` is the prompt's last
token, ``options`` each option's label token (``A``, ``B``..., in option order; not the
representative token the head scores read, ``--representative``, the line's end by default), ``all`` every prompt token (cached demonstrations' rows from one pass over them, as
their cache was computed).
"""

from __future__ import annotations

import sys

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture
from whitebox_eval.internals.activation_specs import (batch_captures, batch_rows, check_activations, layers_of,
                                                      parse_activations, width, stored_dtype)
from whitebox_eval.mcqa.config import SAVE_POSITIONS
from whitebox_eval.runs.activations import ActivationParts, estimate


def check(cfg, loaded) -> None:
    """The specs against the model (its config.json when not loaded yet), before the run folder."""
    if not cfg.save_activations:
        return
    from whitebox_eval.mcqa.config import LETTER_METHODS

    if not any(m in LETTER_METHODS for m in cfg.methods):
        raise WhiteboxError("--save-activations reads the main pass's prompts (options listed); a cloze-only study "
                            "has none: add baseline to --methods")
    specs = parse_activations(cfg.save_activations, SAVE_POSITIONS)
    if loaded is not None:
        check_activations(specs, loaded.arch.n_layers, loaded.arch)
    else:
        from whitebox_eval.models.config_sizes import config_sizes

        check_activations(specs, config_sizes(cfg.model).n_layers)


class Saver:
    """The study's saved activations: captures per batch, parts, the merged files."""

    def __init__(self, study):
        arch = study.loaded.arch
        self.specs = parse_activations(study.cfg.save_activations, SAVE_POSITIONS)
        check_activations(self.specs, arch.n_layers, arch)
        self.study, self.n_layers = study, arch.n_layers
        dtype = study.loaded.model.dtype
        self.meta = {s.stem: {"layers": layers_of(s, arch.n_layers), "model_dtype": str(dtype).replace("torch.", "")}
                     for s in self.specs}
        self.parts = ActivationParts(study.folder, self.specs, self.meta)
        self.every = any(s.positions == "all" for s in self.specs)
        self.memo: dict = {}  # the cached demonstrations' own rows (``all``)
        if study.world.main:
            self.announce(arch, dtype)

    def announce(self, arch, dtype) -> None:
        st = self.study
        tok = st.loaded.tokenizer
        positions = {"last": 1.0, "options": float(np.mean([len(r.options) for r in st.rendered]))}
        if self.every:
            positions["all"] = float(np.mean([len(tok(r.text)["input_ids"]) for r in st.rendered]))
        itemsize = np.dtype(stored_dtype(dtype)).itemsize
        _, line = estimate(self.specs, len(st.items), self.n_layers, {s.point: width(arch, s.point) for s in self.specs},
                           positions, itemsize)
        print(line, file=sys.stderr)
        st.folder.log(line)

    def captures(self, toks) -> list[Capture]:
        return batch_captures(self.specs, self.n_layers, [t.label_positions for t in toks])

    def write(self, chunk, toks, trace, prefix=None) -> None:
        """One batch's tensors into their parts (before the pass's own part)."""
        ids = [self.study.items[i].id for i in chunk]
        rows = batch_rows(self.study.engine, self.specs, trace, [t.label_positions for t in toks], prefix, self.memo)
        self.parts.write(chunk[0], {stem: dict(zip(ids, r)) for stem, r in rows.items()})

    def merge(self) -> dict:
        return self.parts.merge([it.id for it in self.study.items])
