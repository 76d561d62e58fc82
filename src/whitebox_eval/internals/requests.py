"""What a caller can ask of one forward pass: captures and edits.

Captures read a quantity at chosen token positions only. Edits change the pass.
All positions are in unpadded coordinates (see :mod:`whitebox_eval.internals.batching`).

Capture points and the shape of the captured tensor (``L`` = number of requested
layers, ``P`` = positions, ``S`` = padded length with keys re-indexed to unpadded
coordinates, ``H`` query heads, ``Hkv`` key/value heads, ``D`` head_dim):

==============  ========================  ==============================================
point           shape                     what
==============  ========================  ==============================================
q_proj, k_proj  [B, L, P, H|Hkv, D]       raw projection output (before any q/k norm)
q, k            [B, L, P, H|Hkv, D]       pre-RoPE, after q/k norm where the family has one
q_rot, k_rot    [B, L, P, H|Hkv, D]       post-RoPE (what the attention scores use)
v               [B, L, P, Hkv, D]         values
attn            [B, L, H, P, S]           post-softmax rows of the chosen query positions
attn_full       [B, L, H, S, S]           full post-softmax matrices (costly)
attn_mean       [B, L, S, S]              attn_full averaged over the heads (rollout reads this:
                                          1/H of the memory, never all heads kept)
head_out        [B, L, P, H, D]           per-head output, the input of o_proj
mlp_act         [B, L, P, d_ff]           input of the down projection (act(gate) * up)
mlp_gate_act    [B, L, P, d_ff]           act(gate) alone (MUI reference code's choice)
resid_pre       [B, L, P, d_model]        residual stream entering the block
resid_mid       [B, L, P, d_model]        residual between attention and MLP (capture only;
                                          none in a parallel-residual family)
resid           [B, L, P, d_model]        residual stream leaving the block
attn_out        [B, L, P, d_model]        what attention adds to the residual (after the
                                          post-attention norm in gemma2/3, olmo2)
mlp_out         [B, L, P, d_model]        what the MLP adds to the residual (after the
                                          post-MLP norm in gemma2/3, olmo2)
==============  ========================  ==============================================

A capture or patch may also name its point as SAELens / TransformerLens do
(``blocks.5.hook_mlp_out``, ``hook_z``...): :mod:`whitebox_eval.internals.hook_points`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal, Sequence

if TYPE_CHECKING:  # the requests are read when a spec is (planning, --help): torch only where a pass runs
    import torch

    from whitebox_eval.internals.batching import Positions

CAPTURE_POINTS = (
    "q_proj", "k_proj", "q", "k", "q_rot", "k_rot", "v",
    "attn", "attn_full", "attn_mean", "head_out", "mlp_act", "mlp_gate_act", "resid_pre", "resid",
    "resid_mid", "attn_out", "mlp_out",
)
PATCH_POINTS = ("q_proj", "k_proj", "q", "k", "v", "head_out", "mlp_act", "mlp_gate_act", "resid_pre", "resid",
                "attn_out", "mlp_out")


@dataclass(frozen=True)
class Capture:
    """Record ``point`` at ``positions`` (query positions for ``attn``) in ``layers`` (None = all)."""

    point: str
    positions: Positions = "last"
    layers: Sequence[int] | None = None
    name: str | None = None
    """Key in the trace (defaults to ``point``); lets one pass capture a point twice."""
    keep_grad: bool = False
    """Also record the gradient reaching this point when the caller back-propagates
    (``Trace.grad(key)``); needs ``run(..., grad=True)``. Not for attn points."""

    @property
    def key(self) -> str:
        return self.name or self.point


@dataclass(frozen=True)
class ScaleHeads:
    """Multiply chosen heads' outputs (before o_proj) by ``scale``; 0 = zero-ablation (000 sec. 6)."""

    layer: int
    heads: Sequence[int]
    scale: float = 0.0
    positions: Positions = None  # None = every position


@dataclass(frozen=True)
class MaskNeurons:
    """Set chosen MLP neurons (inputs of the down projection) to ``value`` (001 sec. 3.8)."""

    layer: int
    neurons: Sequence[int]
    value: float = 0.0
    positions: Positions = None


AttentionMode = Literal["add", "add_above", "force", "copy_head"]
ATTENTION_MODES = ("add", "add_above", "force", "copy_head")


@dataclass(frozen=True)
class CellRule:
    """Attention cells by rule, built for each pass from its examples' lengths (the command line's
    ``--edit attn:``): ``queries`` and ``keys`` are ``last`` / ``all`` / ``first`` / a position
    (negative: from the end), and for keys also ``self`` and ``prev`` (relative to the query).
    Keys after a query are never cells (causal attention cannot reach them)."""

    queries: str | int = "last"
    keys: str | int = "first"

    def cells(self, lengths: Sequence[int]) -> torch.Tensor:
        """[B, S, S] bool in unpadded coordinates, S the longest length (a few whole-tensor ops)."""
        import torch
        n = torch.as_tensor([int(x) for x in lengths])[:, None, None]  # [B, 1, 1]
        s = int(n.max())
        q, k = torch.arange(s)[None, :, None], torch.arange(s)[None, None, :]
        keys = {"self": k == q, "prev": k == q - 1, "all": k <= q}.get(self.keys) if isinstance(self.keys, str) else None
        keys = _rule_at(self.keys, k, n) if keys is None else keys
        return _rule_at(self.queries, q, n) & keys & (k <= q) & (k < n)


def _rule_at(which: str | int, grid: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Where ``grid`` (positions) is the rule's ``first`` / ``last`` / ``all`` / position inside lengths ``n``."""
    if which == "all":
        return grid < n
    i = {"first": 0, "last": n - 1}.get(which, which) if isinstance(which, str) else which
    i = i + n if isinstance(i, int) and i < 0 else i
    return (grid == i) & (grid < n)


@dataclass(frozen=True)
class EditAttention:
    """Edit post-softmax attention of ``heads`` in ``layer`` at ``cells``.

    ``cells`` is a bool tensor [B, S_q, S_k] in unpadded coordinates (see
    :func:`cells_from_pairs`), or a :class:`CellRule` built for each pass. Modes:

    - ``add``: w += value at the cells (AttentionSpan reinforcement, 003 sec. 5.1);
    - ``add_above``: the same, only where w > threshold already (conditional reinforcement);
    - ``force``: every query row that has a cell becomes ``pattern`` restricted to the
      cells and normalised (uniform when ``pattern`` is None): GAR strong intervention;
    - ``copy_head``: rows that have a cell take head ``source_head``'s row of the same
      layer (GAR weak intervention; for a head of another layer capture its row first
      and use ``force`` with that row as ``pattern``).

    ``renormalize`` re-normalises edited rows to sum to one (off by default: 003 adds C
    to post-softmax weights without renormalising).
    """

    layer: int
    heads: Sequence[int]
    cells: torch.Tensor | CellRule
    mode: AttentionMode = "add"
    value: float = 0.0
    threshold: float = 0.0
    pattern: torch.Tensor | None = None  # [B, S_q, S_k] weights for "force"
    source_head: int | None = None
    renormalize: bool = False


@dataclass(frozen=True)
class Patch:
    """Replace ``point`` at ``positions`` of ``layer`` with ``values`` (e.g. from another run).

    ``values`` has the shape of one layer's capture of that point: [B, P, ...].
    ``heads`` restricts a per-head point (q, k, v, head_out...) to those heads.
    """

    point: str
    layer: int
    positions: Positions
    values: torch.Tensor
    heads: Sequence[int] | None = None


@dataclass(frozen=True)
class Replace:
    """Replace ``point`` of ``layer`` by ``fn(x)`` (SAE fidelity: the residual leaving a block
    swapped for its reconstruction; a block's output zeroed).

    ``x`` holds the point's values at the tokens this pass computes, left-aligned: row ``i``'s
    ``j``-th computed token at ``[i, j]`` and zeros after its last token (without a cached
    prefix these are example coordinates, [B, S, ...] as a right-padded batch lays them
    out). ``fn`` returns a tensor of that shape; the real tokens take its values, pads keep theirs.
    """

    point: str
    layer: int
    fn: Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True, eq=False)
class AddVector:
    """Add ``coef * vector`` to ``point`` of ``layer`` at ``positions`` (None = every position):
    steering. ``vector`` holds one token's values at the point (``[width]``, per-head points
    concatenated over the heads, or already ``[heads, head_dim]``); ``coef = 0`` leaves the pass
    bit-identical. The point may be a hook name (``blocks.12.hook_resid_post``)."""

    point: str
    layer: int
    vector: torch.Tensor
    coef: float = 1.0
    positions: Positions = None
    replace: bool = False
    """Set the point to ``coef * vector`` at the positions instead of adding it (patching a saved
    activation, ``--edit patch:``)."""


@dataclass(frozen=True, eq=False)
class ClampFeature:
    """Clamp (``value``) or scale (``scale``) SAE features at ``point`` of ``layer``: with
    ``f = sae.encode(x)`` and ``f'`` that ``f`` with ``features`` set to ``value`` (or times
    ``scale``), ``x`` becomes ``x + decode(f') - decode(f)``: the reconstruction changes, the SAE's
    error term is added back, so an unchanged feature leaves ``x`` exactly as it was (the
    difference ``(f' - f) W_dec`` is zero). ``sae`` is a :class:`whitebox_eval.sae.encoding.SAE`
    (any object with its fields) reading that point."""

    point: str
    layer: int
    sae: object
    features: Sequence[int]
    value: float | None = None
    scale: float | None = None
    positions: Positions = None


Edit = ScaleHeads | MaskNeurons | EditAttention | Patch | Replace | AddVector | ClampFeature


def cells_from_pairs(batch_size: int, seq_len: int, pairs: Sequence[Sequence[tuple[int, int]]]) -> torch.Tensor:
    """A [B, S, S] bool cell mask from one list of (query, key) pairs per example."""
    import torch
    if len(pairs) != batch_size:
        raise ValueError(f"pairs for {len(pairs)} examples, batch has {batch_size}")
    cells = torch.zeros(batch_size, seq_len, seq_len, dtype=torch.bool)
    for b, plist in enumerate(pairs):
        for q, k in plist:
            cells[b, q, k] = True
    return cells


@dataclass
class Trace:
    """What one pass returned: logits at the requested positions and every capture."""

    logits: torch.Tensor | None
    captures: dict[str, torch.Tensor] = field(default_factory=dict)
    layers: dict[str, list[int]] = field(default_factory=dict)
    positions: dict[str, torch.Tensor] = field(default_factory=dict)
    grads: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict, repr=False)

    def grad(self, key: str) -> torch.Tensor:
        """Gradient at a ``keep_grad`` capture, same shape as the capture (after backward)."""
        import torch
        per_layer = self.grads.get(key)
        if not per_layer or len(per_layer) < len(self.layers[key]):
            raise RuntimeError(f"no gradient recorded for {key!r}: capture it with keep_grad=True, run with grad=True, then call backward()")
        device = self.captures[key].device  # like the capture: layers may sit on several devices
        return torch.stack([per_layer[l].to(device) for l in self.layers[key]], dim=1)

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.captures[key]

    def __contains__(self, key: str) -> bool:
        return key in self.captures
