"""``EditAttention``: post-softmax attention of chosen heads edited at chosen cells (add, add where
already above a threshold, force a pattern, copy another head's row); ``--edit attn:``, its cells a
:class:`~whitebox_eval.internals.requests.CellRule`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_kind import EditKind, EditSpec, ModelSizes, every_layer, heads_by_layer, number
from whitebox_eval.internals.requests import ATTENTION_MODES, CellRule, EditAttention

if TYPE_CHECKING:  # torch is imported where a pass is planned, never when specs are read
    import torch

    from whitebox_eval.internals.host_tensors import Host


class Cells:
    """The tensors of one set of attention-edit cells, shared by every edit that uses them (one set of
    cells edited in many layers is built once per pass): [B, 1, S, K] on the device."""

    def __init__(self, cells: Host, target: Host | None):
        self.cells, self.target = cells, target  # [B, 1, S, K] bool; force's normalised pattern
        self._memo: dict[tuple, torch.Tensor] = {}

    def get(self, name: str, device, make) -> torch.Tensor:
        from whitebox_eval.internals.host_tensors import device_key
        key = (name, device_key(device))
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]


class AttnEdit:
    """One :class:`EditAttention`: its cells' shared tensors and its own heads ([1, H, 1, 1])."""

    def __init__(self, e: EditAttention, cells: Cells, heads: Host, source: Host | None):
        self.e, self.cells, self.heads, self.source = e, cells, heads, source

    def apply(self, p: torch.Tensor) -> torch.Tensor:
        """Edit the probabilities ``p`` [B, H, Sq, K] (float32); returns the edited tensor (maybe ``p``)."""
        import torch
        e, c, dev = self.e, self.cells, p.device
        heads = self.heads.on(dev)
        rows = c.get("rows", dev, lambda: c.cells.on(dev).any(-1, keepdim=True))  # [B, 1, S, 1]
        rows_h = None
        if e.mode == "add":  # (value at the cells) x (1 for the edited heads, 0 for the others)
            p.add_(c.get(("add", e.value), dev, lambda: c.cells.on(dev).to(p.dtype) * e.value) * heads.to(p.dtype))
        elif e.mode == "add_above":
            above = c.get(("above", e.threshold), dev,
                          lambda: torch.where(c.cells.on(dev), e.threshold, float("inf")).to(p.dtype))
            p = torch.where((p > above) & heads, p + e.value, p)
        else:
            rows_h = rows & heads
            if e.mode == "force":
                p = torch.where(rows_h, c.target.on(dev).to(p.dtype), p)
            elif e.mode == "copy_head":
                p = torch.where(rows_h, p.index_select(1, self.source.on(dev)), p)
        if e.renormalize:
            rows_h = rows & heads if rows_h is None else rows_h
            p = torch.where(rows_h, p / p.sum(-1, keepdim=True), p)
        return p


def plan(plan, e: EditAttention, layer: int) -> None:
    arch = plan.arch
    for h in e.heads:
        arch.check_head(h)
    if e.mode not in ATTENTION_MODES:
        raise WhiteboxError(f"unknown attention edit mode {e.mode!r}: use add, add_above, force or copy_head")
    if e.mode == "copy_head":
        if e.source_head is None:
            raise WhiteboxError("copy_head needs source_head=")
        arch.check_head(e.source_head)
    plan.attn[layer].edits.append(attention_edit(plan, e))


def attention_edit(plan, e: EditAttention) -> AttnEdit:
    import torch
    from whitebox_eval.internals.edit_plan import padded_rows
    chosen = sorted({int(h) for h in e.heads})

    def make_cells():
        cells = padded_cells(plan, e.cells)  # [B, S - past, S] bool
        target = None
        if e.mode == "force":
            t = cells.float() if e.pattern is None else padded_rows(plan, e.pattern.detach().cpu().float()) * cells
            t = t / t.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
            target = plan.host(t[:, None])  # [B, 1, S, K]: every edited head takes it
        return Cells(plan.host(cells[:, None]), target)

    pattern = None if e.mode != "force" or e.pattern is None else id(e.pattern)
    rule = e.cells if isinstance(e.cells, CellRule) else id(e.cells)  # equal rules: one set of cells a pass
    cells = plan.memo(("cells", rule, pattern, e.mode == "force"), make_cells)

    def make_heads():
        heads = torch.zeros(1, plan.arch.n_heads, 1, 1, dtype=torch.bool)
        heads[0, chosen] = True
        return plan.host(heads)

    heads = plan.memo(("heads", tuple(chosen)), make_heads)
    source = None
    if e.mode == "copy_head":
        def make_source():
            src = torch.arange(plan.arch.n_heads)
            src[chosen] = e.source_head
            return plan.host(src)
        source = plan.memo(("source", tuple(chosen), e.source_head), make_source)
    return AttnEdit(e, cells, heads, source)

def padded_cells(plan, cells: torch.Tensor | CellRule) -> torch.Tensor:
    import torch
    from whitebox_eval.internals.edit_plan import padded_rows
    b, s = plan.batch.size, plan.batch.seq_len
    if isinstance(cells, CellRule):
        cells = cells.cells(plan.batch.host_lengths.tolist())
    if cells.dim() != 3 or cells.shape[0] != b or cells.shape[1] > s or cells.shape[2] > s:
        raise WhiteboxError(f"attention edit cells must be a bool tensor [batch={b}, <= {s}, <= {s}] in unpadded coordinates; got {tuple(cells.shape)}")
    return padded_rows(plan, cells.detach().cpu().to(torch.bool))


ATTN_KEYS = ("first", "last", "all", "self", "prev")


def parse(text: str, rest: str, last_only: bool) -> EditSpec:
    """``attn:HEADS:QUERIES>KEYS:MODE[,renorm]`` (the module docstring's table)."""
    parts = rest.split(":")
    if len(parts) != 3 or ">" not in parts[1]:
        raise WhiteboxError(f"--edit {text}: attn needs HEADS:QUERIES>KEYS:MODE (attn:14.0:last>first:add=0.5)")
    if last_only:
        raise WhiteboxError(f"--edit {text}: attn names its query positions itself (last>...); drop @last")
    heads = tuple(Head.parse_list(parts[0]))
    queries, _, keys = (x.strip() for x in parts[1].partition(">"))

    def where(x: str, allowed: tuple[str, ...], side: str) -> str | int:
        if x in allowed:
            return x
        if re.fullmatch(r"-?\d+", x):
            return int(x)
        raise WhiteboxError(f"--edit {text}: {side} {x!r} is not one of {', '.join(allowed)} or a position")

    rule = CellRule(where(queries, ("last", "first", "all"), "queries"), where(keys, ATTN_KEYS, "keys"))
    mode_text, *flags = [m.strip() for m in parts[2].split(",")]
    if any(f != "renorm" for f in flags):
        raise WhiteboxError(f"--edit {text}: after the mode only ,renorm is read")
    name, eq, value = mode_text.partition("=")
    if name == "add" and eq:
        return EditSpec(text, "attn", heads=heads, rule=rule, mode="add", value=number(value, text),
                        renormalize=bool(flags))
    if name == "force" and not eq:
        return EditSpec(text, "attn", heads=heads, rule=rule, mode="force", renormalize=bool(flags))
    if name == "copy" and eq and value.strip().isdecimal():
        return EditSpec(text, "attn", heads=heads, rule=rule, mode="copy_head", units=(int(value),),
                        renormalize=bool(flags))
    raise WhiteboxError(f"--edit {text}: the mode is add=C, force or copy=HEAD (a head of the same layer)")


def build(spec: EditSpec, sizes: ModelSizes) -> list:
    source = spec.units[0] if spec.units else None
    if source is not None and source >= sizes.n_heads:
        raise WhiteboxError(f"--edit {spec.text}: copy={source} is outside this model's {sizes.n_heads} heads (from 0)")
    return [EditAttention(layer, hs, spec.rule, spec.mode, spec.value, source_head=source,
                          renormalize=spec.renormalize) for layer, hs in heads_by_layer(spec, sizes)]


_CELLS: dict = {}


def _cells(batch):
    """The last row of every example edited at three keys; one tensor per batch, shared by the edits of
    every layer as the suites share theirs (GAR's forced rows, AttentionSpan's reinforced ones)."""
    import torch
    if id(batch) not in _CELLS:
        b, s = batch.size, batch.seq_len
        cells = torch.zeros(b, s, s, dtype=torch.bool)
        for i, n in enumerate(batch.lengths.tolist()):
            cells[i, n - 1, [0, 1, n - 2]] = True
        pattern = cells.float() * torch.arange(1.0, s + 1)
        _CELLS[id(batch)] = (batch, cells, pattern)
    return _CELLS[id(batch)][1:]


def op_cases() -> dict:
    out = {}
    for mode in ATTENTION_MODES:
        for renorm in (False, True):
            def make(lm, e, b, o, l, mode=mode, renorm=renorm):
                cells, pattern = _cells(b)
                return EditAttention(l, [0, 2], cells, mode=mode, value=0.1, threshold=0.05,
                                     pattern=pattern if mode == "force" else None,
                                     source_head=1 if mode == "copy_head" else None, renormalize=renorm)
            out[f":{mode}{'+renorm' if renorm else ''}"] = every_layer(make)
    # --edit attn:: an equal rule in every layer (cells built once a pass)
    out[":rule"] = every_layer(lambda lm, e, b, o, l: EditAttention(l, [0, 2], CellRule("all", "prev"), mode="add", value=0.1))
    return out


def covers(spec: EditSpec, n: int) -> bool:
    """Whether ``spec``'s cells hold any cell of a prompt of ``n`` tokens (what :meth:`CellRule.cells`
    builds, counted without the [n, n] grid): a query in the prompt with a key at or before it."""
    queries, keys = spec.rule.queries, spec.rule.keys
    at = lambda x: {"first": 0, "last": n - 1}.get(x, x) if isinstance(x, str) else (x + n if x < 0 else x)  # noqa: E731
    if queries == "all":  # query q = the key itself (or the one after prev's key)
        return n >= (2 if keys == "prev" else 1) and (keys in ATTN_KEYS or 0 <= at(keys) < n)
    q = at(queries)
    if not 0 <= q < n:
        return False
    k = {"self": q, "prev": q - 1, "all": q}.get(keys) if isinstance(keys, str) and keys in ("self", "prev", "all") \
        else at(keys)
    return 0 <= k <= q


KIND = EditKind(EditAttention, plan, {"attn": parse}, build, "attn:HEADS:QUERIES>KEYS:add=C|force|copy=HEAD", op_cases,
                covers)
