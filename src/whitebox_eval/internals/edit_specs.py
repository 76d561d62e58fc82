"""``--edit SPEC``: the engine's edits written on a command line, read in two steps so a
mistake is one line before any model work:

1. :func:`parse_edit` reads the text (no model needed): a malformed spec is refused here;
2. :func:`build_edits` turns the parsed specs into engine edits for one model's sizes: a
   layer, head or neuron out of range is refused here, before the first pass.

Specs (heads as ``LAYER.HEAD`` or ``LxHy``, comma separated; ``@last`` limits an edit to
the last prompt position, ``@all`` or nothing is every position):

===========================================  ==================================================
``ablate:14.0,L17H1``                        zero those heads' outputs (000 sec. 6's ablation)
``scale:14.0,L17H1=0.5``                     multiply those heads' outputs by 0.5
``neurons:5:10,20,31``                       zero MLP neurons 10, 20, 31 of layer 5 (001 sec. 3.8)
``neurons:5:10,20=1.5``                      set them to 1.5
``steer:resid:12:v.pt*4``                    add 4 x the vector in ``v.pt`` to the residual leaving
                                             block 12 (steering; ``*COEF`` defaults to 1)
``steer:blocks.12.hook_resid_post:v.npy``    the same point by its TransformerLens name (the
                                             layer in the name); points: resid_pre, resid,
                                             attn_out, mlp_out, mlp_act, head_out (hook_z)
``steer:mlp_out:3:v.safetensors#dir*-2``     tensor ``dir`` of a .safetensors file (a file of one
                                             tensor needs no ``#NAME``; likewise a .pt dict)
``patch:resid:12:act.npy@last``              set the residual leaving block 12 to a saved
                                             activation (patching; the same points and files)
``sae:123,456=8:12=PATH``                    clamp features 123 and 456 of the SAE ``PATH`` read
                                             at layer 12 (as ``mui --sae 12=PATH``: a folder, an
                                             SAE study's run, ``hf:...``, ``saelens:...``; its
                                             hook from its files) to 8
``sae:123*0:blocks.12.hook_resid_post=PATH``  scale feature 123 by 0 (ablate it) at that hook
``attn:14.0,L17H1:last>first:add=0.5``        add 0.5 to those heads' post-softmax attention
                                             from the last position to the first (003 sec. 5.1's
                                             reinforcement; ``,renorm`` re-normalises the rows)
``attn:14.0:all>prev:force``                 every query attends only to the position before it
                                             (GAR's strong intervention, 002 sec. 5)
``attn:L14H0:last>all:copy=3``               the last row of head 14.0 becomes head 14.3's
                                             (GAR's weak intervention)
===========================================  ==================================================

Attention cells are written QUERIES>KEYS: ``last``, ``first``, ``all`` or a position (negative:
from the end), and for keys also ``self`` and ``prev``; they are built for every pass from its
prompts' lengths (generated tokens included). A study that generates refuses ``last`` and
positions from the end: they move at every generated token, and the cache keeps earlier rows as
they were computed.

A vector is one token's values at the point: ``.pt`` (``torch.load(weights_only=True)``),
``.safetensors`` or ``.npy`` (``numpy.load(allow_pickle=False)``), ``[width]`` (or ``[1, width]``),
width checked against the model. An SAE edit encodes the point, changes the features, decodes and
adds the SAE's error back (``x + decode(f') - decode(f)``): a feature left as it was leaves the
model as it was. The vector is read by :func:`parse_edit`, the SAE by :func:`build_edits` (through
the ``load_sae`` it is given: ``whitebox_eval.sae.feature_edits``).

Each spec kind is read by the edit kind that declares it (:mod:`whitebox_eval.internals.edit_registry`;
a plug-in's kind adds its own specs). Every number in a spec is finite: NaN and infinity are one line.
"""

from __future__ import annotations

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditSpec, ModelSizes
from whitebox_eval.internals.edit_registry import kinds, spec_kinds

__all__ = ["EditSpec", "build_edits", "parse_edit", "usage"]


def usage() -> str:
    """The one line naming every spec kind (plug-ins' included)."""
    return ("write " + ", ".join(k.usage for k in kinds() if k.usage) + " (heads as 14.0 or L14H0, comma separated; "
            "@last after the spec for the last position only)")


def parse_edit(spec: str) -> EditSpec:
    """The structure of one ``--edit`` text; a malformed one is one line naming the fix."""
    text = str(spec).strip()
    body, last_only = (text[:-len("@last")], True) if text.endswith("@last") else (text, False)
    body = body[:-len("@all")] if body.endswith("@all") else body
    name, sep, rest = body.partition(":")
    kind = spec_kinds().get(name)
    if not sep or kind is None:
        raise WhiteboxError(f"--edit {text}: unknown edit {name!r}; {usage()}")
    try:
        return kind.specs[name](text, rest, last_only)
    except WhiteboxError as error:
        if str(error).startswith("--edit"):
            raise
        raise WhiteboxError(f"--edit {text}: {error}") from None


def build_edits(specs, n_layers: int, n_heads: int, d_ff: int, *, d_model: int | None = None,
                head_dim: int | None = None, load_sae=None) -> list:
    """Engine edits for a model of these sizes; anything out of range is one line. A steering
    vector's width is checked where the point's width is known (``d_model``, ``head_dim``; the engine
    checks it again). ``load_sae(source) -> (sae, point, layer)`` reads an ``sae:`` edit's SAE."""
    sizes = ModelSizes(n_layers, n_heads, d_ff, d_model, head_dim, load_sae)
    by_spec = spec_kinds()
    edits: list = []
    for spec in (s if isinstance(s, EditSpec) else parse_edit(s) for s in specs):
        edits += by_spec[spec.kind].build(spec, sizes)
    return edits
