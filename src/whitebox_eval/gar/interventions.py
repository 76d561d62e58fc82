"""Interventions on GAR heads and their effect on the answer (paper 002 sec. 5, App. E).

* Strong intervention: the head's attention row at the attending position of a
  pattern ``X->Y`` is forced to the pattern: weight 1 on X (spread evenly over X's
  tokens), 0 elsewhere (engine ``EditAttention(mode="force")``).
* Weak intervention: the row is replaced by the row, at the same attending position,
  of the head *elsewhere in the model* that complies best with the pattern (largest
  matched weight on X, heads being intervened on excluded), read from an unedited pass
  of the same example and forced in (engine ``force`` with that row as the pattern).
  The best head is chosen per example (our choice; the paper does not say).
* Knock-out: the head's output at the attending position is zeroed (``ScaleHeads``).
* True/False intervention (sec. 5): when the gold answer is Yes, strong-intervene on the
  True heads (pattern ``Q->A``) and knock out the False heads; when No, the reverse.
  The inverse intervention (App. E, table 10) swaps the roles.  Both use the gold
  label, so they are diagnostics of what the heads do, not a way to answer.

Where an edit acts (``at``, recorded as ``edit_at`` in config.yaml):

* ``"read"`` (default): the row of the last prompt token E, where the answer's
  first-token probability is read (App. C).  A pattern ``X->Y`` then forces E's row onto
  X; for ``V->E`` this is the paper's placement.
* ``"pattern"``: the row of the pattern's attending role Y, literally as sec. 5 states
  it (``Q->A`` edits the stated answer A).  An edit there reaches the output only
  through later layers' attention from E to A: a head in the last layer edited at A
  cannot change the output at all (its row at A is read by no later layer).  On
  SmolLM2-135M knocking out all 270 heads at A flips no answer.
* ``"both"``: the pattern's row and the read row.

Before/after scores are compared with :mod:`whitebox_eval.gar.metrics` (paper's rule,
argmax accuracy, mean P(target), mass on the choices, paired tests, flips).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

import torch

from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.evaluation import accuracy
from whitebox_eval.gar.metrics import intervention_summary
from whitebox_eval.gar.heads import attention_rows, matched_weight_from_rows
from whitebox_eval.gar.roles import EncodedExample, Pattern, parse_pattern
from whitebox_eval.gar.scoring import EditsFor, ExampleScore, score_examples
from whitebox_eval.internals import Batch, EditAttention, Engine, ScaleHeads, cells_from_pairs
from whitebox_eval.internals.requests import Edit

KINDS = ("strong", "weak", "knockout")
EDIT_AT = ("read", "pattern", "both")


def check_edit_at(at: str) -> str:
    if at not in EDIT_AT:
        raise WhiteboxError(f"unknown edit position {at!r}; choose one of {', '.join(EDIT_AT)} "
                            "(read = the last prompt token, where the answer is read)")
    return at


def edit_rows(enc: EncodedExample, pattern: Pattern, at: str = "read") -> list[tuple[int, list[int]]]:
    """(query position, key positions <= it) of every attention row an edit of ``pattern``
    touches in ``enc`` (module doc: ``at``).  Key lists may be empty (the key role is
    absent or after the row); ``at="pattern"`` gives no row when the attending role is absent."""
    check_edit_at(at)
    q_pat = enc.attending_position(pattern.query)
    read = enc.n_tokens - 1
    if at == "pattern":
        qs = [] if q_pat is None else [q_pat]
    elif at == "read":
        qs = [read]
    else:
        qs = sorted({q for q in (q_pat, read) if q is not None})
    keys = enc.role_tokens(pattern.key) or []
    return [(q, [k for k in keys if k <= q]) for q in qs]


def edit_positions(encoded: Sequence[EncodedExample], pattern: Pattern | str, at: str = "read") -> list[list[int]]:
    """The query positions an intervention edits in each example (written to samples.jsonl)."""
    pat = parse_pattern(pattern) if isinstance(pattern, str) else pattern
    return [[q for q, _ in edit_rows(e, pat, at)] for e in encoded]


def _by_layer(heads: Sequence[Head]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for l, h in heads:
        out[int(l)].append(int(h))
    return dict(out)


def strong_edits(encoded: Sequence[EncodedExample], batch: Batch, heads: Sequence[Head],
                 pattern: Pattern | str, at: str = "read") -> list[Edit]:
    """Force ``heads``' rows at the ``at`` positions onto ``pattern``'s key tokens (one
    ``EditAttention`` per layer); rows without a key token are left untouched."""
    pat = parse_pattern(pattern) if isinstance(pattern, str) else pattern
    pairs = [[(q, k) for q, ks in edit_rows(e, pat, at) for k in ks] for e in encoded]
    cells = cells_from_pairs(batch.size, batch.seq_len, pairs)
    return [EditAttention(layer, hs, cells, mode="force") for layer, hs in _by_layer(heads).items()]


def _best_rows(engine: Engine, encoded: Sequence[EncodedExample], batch: Batch,
               cells: Sequence[tuple[int, list[int]] | None], exclude: Sequence[Head]
               ) -> tuple[torch.Tensor, list[Head | None], list[float]]:
    """Per example, the row at ``cells[b][0]`` of the head (not in ``exclude``) with the
    largest weight on the keys ``cells[b][1]``: rows [B, S], heads, weights."""
    pos = [[c[0] if c is not None else e.n_tokens - 1] for c, e in zip(cells, encoded)]
    rows = attention_rows(engine, batch, pos)[:, :, :, 0]  # [B, L, H, S]
    mask = torch.zeros(batch.size, 1, batch.seq_len, dtype=torch.bool)
    for b, c in enumerate(cells):
        if c is not None:
            mask[b, 0, c[1]] = True
    matched = matched_weight_from_rows(rows.unsqueeze(3), mask)[..., 0]  # [B, L, H]
    for l, h in exclude:
        matched[:, l, h] = -1.0
    out = torch.zeros(batch.size, batch.seq_len)
    chosen: list[Head | None] = []
    weights: list[float] = []
    for b, c in enumerate(cells):
        if c is None or not c[1]:
            chosen.append(None)
            weights.append(float("nan"))
            continue
        flat = int(torch.argmax(matched[b]))
        l, h = divmod(flat, matched.shape[2])
        out[b] = rows[b, l, h]
        chosen.append((l, h))
        weights.append(float(matched[b, l, h]))
    return out, chosen, weights


def best_matching_rows(engine: Engine, encoded: Sequence[EncodedExample], batch: Batch,
                       pattern: Pattern | str, exclude: Sequence[Head] = (), at: str = "pattern"
                       ) -> tuple[torch.Tensor, list[Head | None], list[float]]:
    """For each example, the attention row at the first edited position (``at``) of the
    head (any layer, not in ``exclude``) with the largest matched weight on the pattern's key.

    Returns the rows [B, S] (unpadded key coordinates), the chosen heads and their
    matched weights (None / NaN where the example lacks the pattern).
    """
    pat = parse_pattern(pattern) if isinstance(pattern, str) else pattern
    cells = [(r[0] if r else None) for r in (edit_rows(e, pat, at) for e in encoded)]
    return _best_rows(engine, encoded, batch, cells, exclude)


def weak_edits(engine: Engine, encoded: Sequence[EncodedExample], batch: Batch,
               heads: Sequence[Head], pattern: Pattern | str, at: str = "read") -> list[Edit]:
    """Replace ``heads``' rows at the ``at`` positions by the best-matching other head's
    row at the same position (:func:`best_matching_rows`), one ``EditAttention(force)`` per layer."""
    pat = parse_pattern(pattern) if isinstance(pattern, str) else pattern
    per_example = [edit_rows(e, pat, at) for e in encoded]
    s = batch.seq_len
    pattern_t = torch.zeros(batch.size, s, s)
    pairs: list[list[tuple[int, int]]] = [[] for _ in encoded]
    for slot in range(max((len(r) for r in per_example), default=0)):
        cells = [r[slot] if slot < len(r) else None for r in per_example]
        rows, chosen, _ = _best_rows(engine, encoded, batch, cells, heads)
        for b, c in enumerate(cells):
            if c is None or chosen[b] is None:
                continue
            q = c[0]
            pattern_t[b, q] = rows[b]
            pairs[b] += [(q, k) for k in range(q + 1)]
    cells_t = cells_from_pairs(batch.size, s, pairs)
    return [EditAttention(layer, hs, cells_t, mode="force", pattern=pattern_t)
            for layer, hs in _by_layer(heads).items()]


def knockout_edits(encoded: Sequence[EncodedExample], heads: Sequence[Head],
                   pattern: Pattern | str, at: str = "read") -> list[Edit]:
    """Zero ``heads``' outputs at the ``at`` positions of ``pattern`` in every example."""
    pat = parse_pattern(pattern) if isinstance(pattern, str) else pattern
    pos = edit_positions(encoded, pat, at)
    for e, p in zip(encoded, pos):
        if not p:
            raise WhiteboxError(f"{e.example.task_id} #{e.example.index} has no {pat.query}; knock-out "
                                "at the pattern's position needs the attending role in every example "
                                "(or edit at the read position)")
    width = max(len(p) for p in pos)
    pos = [p + [p[-1]] * (width - len(p)) for p in pos]  # equal lengths; a repeated zeroing is a no-op
    return [ScaleHeads(layer, hs, 0.0, positions=pos) for layer, hs in _by_layer(heads).items()]


@dataclass
class InterventionResult:
    """Scores of the same examples before and after an intervention."""

    name: str
    before: list[ExampleScore]
    after: list[ExampleScore]

    @property
    def accuracy_before(self) -> float:
        return accuracy([s.correct for s in self.before])

    @property
    def accuracy_after(self) -> float:
        return accuracy([s.correct for s in self.after])

    @property
    def argmax_before(self) -> float:
        return accuracy([s.correct_argmax for s in self.before])

    @property
    def argmax_after(self) -> float:
        return accuracy([s.correct_argmax for s in self.after])

    @property
    def flipped(self) -> int:
        """Examples whose argmax prediction changed."""
        return sum(a.prediction != b.prediction for a, b in zip(self.before, self.after))

    def summary(self) -> dict:
        """:func:`whitebox_eval.gar.metrics.intervention_summary` of the two score lists."""
        return intervention_summary(self.before, self.after)


def intervention_edits(engine: Engine, kind: str, heads: Sequence[Head],
                       pattern: Pattern | str, at: str = "read") -> EditsFor:
    """The ``edits_for`` callable of a strong, weak or knock-out intervention on ``heads``
    at the ``at`` positions (module doc)."""
    check_edit_at(at)
    if kind not in KINDS:
        raise WhiteboxError(f"unknown intervention {kind!r}; choose one of {KINDS}")
    if not heads:
        raise WhiteboxError("an intervention needs at least one head")
    pat = parse_pattern(pattern) if isinstance(pattern, str) else pattern
    for l, h in heads:
        engine.arch.check_layer(l)
        engine.arch.check_head(h)

    def edits_for(chunk: Sequence[EncodedExample], batch: Batch) -> list[Edit]:
        if kind == "strong":
            return strong_edits(chunk, batch, heads, pat, at)
        if kind == "weak":
            return weak_edits(engine, chunk, batch, heads, pat, at)
        return knockout_edits(chunk, heads, pat, at)

    return edits_for


def intervene(engine: Engine, encoded: Sequence[EncodedExample], heads: Sequence[Head],
              pattern: Pattern | str, kind: str = "strong", *, batch_size: int = 8,
              rule: str = "chance", before: list[ExampleScore] | None = None,
              at: str = "read") -> InterventionResult:
    """Scores before/after a strong, weak or knock-out intervention on ``heads``."""
    pat = parse_pattern(pattern) if isinstance(pattern, str) else pattern
    edits_for = intervention_edits(engine, kind, heads, pat, at)
    if before is None:
        before = score_examples(engine, encoded, batch_size=batch_size, rule=rule)
    after = score_examples(engine, encoded, batch_size=batch_size, edits_for=edits_for, rule=rule)
    return InterventionResult(f"{kind} {pat.text}", before, after)


def true_false_scores(engine: Engine, encoded: Sequence[EncodedExample],
                      true_heads: Sequence[Head], false_heads: Sequence[Head], *,
                      inverse: bool = False, pattern: str = "Q->A", batch_size: int = 8,
                      rule: str = "chance", at: str = "read") -> list[ExampleScore]:
    """Scores under the True/False intervention (or its inverse), in the order of ``encoded``.

    Yes examples: strong ``pattern`` on the True heads, knock-out of the False heads, both
    at the ``at`` positions (module doc); No examples: the reverse.  ``inverse`` boosts the
    heads of the wrong answer and knocks out those of the right one (App. E).
    """
    check_edit_at(at)
    if set(true_heads) & set(false_heads):
        raise WhiteboxError("a head cannot be both a True and a False head")
    if not true_heads and not false_heads:
        raise WhiteboxError("the True/False intervention needs True or False heads")
    pat = parse_pattern(pattern)
    for e in encoded:
        if e.example.label not in ("Yes", "No"):
            raise WhiteboxError("the True/False intervention works on classification (g2c) examples")
    after: list[ExampleScore | None] = [None] * len(encoded)
    for label in ("Yes", "No"):
        idx = [i for i, e in enumerate(encoded) if e.example.label == label]
        if not idx:
            continue
        boost, knock = (true_heads, false_heads) if (label == "Yes") != inverse else (false_heads, true_heads)

        def edits_for(chunk: Sequence[EncodedExample], batch: Batch, boost=boost, knock=knock) -> list[Edit]:
            edits: list[Edit] = []
            if boost:
                edits += strong_edits(chunk, batch, boost, pat, at)
            if knock:
                edits += knockout_edits(chunk, knock, pat, at)
            return edits

        scores = score_examples(engine, [encoded[i] for i in idx], batch_size=batch_size,
                                edits_for=edits_for, rule=rule)
        for i, s in zip(idx, scores):
            after[i] = s
    return [s for s in after if s is not None]


def true_false_intervention(engine: Engine, encoded: Sequence[EncodedExample],
                            true_heads: Sequence[Head], false_heads: Sequence[Head], *,
                            inverse: bool = False, pattern: str = "Q->A", batch_size: int = 8,
                            rule: str = "chance", before: list[ExampleScore] | None = None,
                            at: str = "read") -> InterventionResult:
    """Sec. 5 True/False intervention (App. E inverse when ``inverse``): before/after scores."""
    after = true_false_scores(engine, encoded, true_heads, false_heads, inverse=inverse,
                              pattern=pattern, batch_size=batch_size, rule=rule, at=at)
    if before is None:
        before = score_examples(engine, encoded, batch_size=batch_size, rule=rule)
    return InterventionResult("inverse True/False" if inverse else "True/False", before, after)
