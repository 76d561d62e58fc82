"""Heads of the GAR circuits: activation, matched attention, attribution, True/False heads.

* Head activation (paper 002 sec. 5, "Head Activation"): at an attending position (a
  row of the attention matrix) a head is *activated* when its largest weight goes to a
  token other than the first (the sink); its activation value is the largest weight to
  any token other than the first.  App. E subtracts the first token's weight to get
  more distinctive features (``subtract_first=True``).  The paper's models (Vicuna)
  start every prompt with ``<s>``; tokenizers that add no BOS (SmolLM2, GPT-2) make
  the prompt's *first word* the excluded token.  We keep it excluded (such models use
  their first token as the attention sink whatever it is) and the truth-heads run
  records which case applies (``results.json`` ``first_token``).
* Matched attention weight (sec. 5, fig. 4a): the weight the attending token of a
  pattern ``X->Y`` puts on X (summed over X's tokens), per head.
* Attribution (sec. 4): integrated-gradients attribution patching (EAP-IG) with the KL
  divergence to the clean output as the metric, over head outputs, their query / key /
  value inputs and MLPs, from the engine's :func:`integrated_gradients`.
* True / False heads (sec. 4-5, table 9): on classification tasks, the heads with the
  largest attribution whose activation at the stated answer A is higher on true
  statements (True heads) or on false ones (False heads).

Positions passed to the engine-level functions are in unpadded token coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.roles import EncodedExample, parse_pattern
from whitebox_eval.gar.scoring import make_batch
from whitebox_eval.internals import Batch, Capture, Engine, integrated_gradients, kl_divergence_metric


# --------------------------------------------------------------------------- pure tensor math


def activation_from_rows(rows: torch.Tensor, *, subtract_first: bool = False) -> torch.Tensor:
    """Sec. 5 activation value of attention rows [..., S] (keys in unpadded coordinates).

    ``max_{k >= 1} w_k`` (the largest weight to any token but the first), minus ``w_0``
    when ``subtract_first`` (App. E).  Keys beyond a row's length must hold zeros (as the
    engine's unpadded captures do).
    """
    if rows.shape[-1] < 2:
        raise WhiteboxError("head activation needs at least two key positions")
    value = rows[..., 1:].max(dim=-1).values
    return value - rows[..., 0] if subtract_first else value


def is_activated(rows: torch.Tensor) -> torch.Tensor:
    """Sec. 5: True where a row's largest weight is not on the first token."""
    return rows[..., 1:].max(dim=-1).values > rows[..., 0]


def matched_weight_from_rows(rows: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """Weight each row puts on its pattern's key tokens: rows [B, L, H, P, S] and
    key_mask [B, P, S] (bool) -> [B, L, H, P]."""
    return (rows.float() * key_mask[:, None, None].to(rows.device).float()).sum(-1)


# --------------------------------------------------------------------------- engine level


def attention_rows(engine: Engine, batch: Batch, positions: Sequence[Sequence[int]],
                   layers: Sequence[int] | None = None) -> torch.Tensor:
    """Post-softmax rows [B, L, H, P, S] of the attending ``positions`` (one list per example)."""
    trace = engine.run(batch, [Capture("attn", [list(p) for p in positions], layers)], logits=False)
    return trace["attn"].float().cpu()


def head_activations(engine: Engine, batch: Batch, positions: Sequence[Sequence[int]], *,
                     layers: Sequence[int] | None = None, subtract_first: bool = False) -> torch.Tensor:
    """Activation value per head per attending position: [B, L, H, P] (sec. 5)."""
    rows = attention_rows(engine, batch, positions, layers)
    return activation_from_rows(rows, subtract_first=subtract_first)


def _pad_positions(lists: Sequence[Sequence[int]]) -> list[list[int]]:
    """Equal-length position lists (the engine needs them) by repeating each last entry;
    repeated rows change neither a max nor a mean of distinct rows."""
    width = max(len(p) for p in lists)
    return [list(p) + [p[-1]] * (width - len(p)) for p in lists]


def max_activation(engine: Engine, batch: Batch, positions: Sequence[Sequence[int]], *,
                   layers: Sequence[int] | None = None, subtract_first: bool = False) -> torch.Tensor:
    """Largest activation over each example's attending ``positions`` (lists may differ in
    length): [B, L, H].  Sec. 5: "the largest such weight across the whole attention
    matrix"; App. E restricts the rows to the statement's tokens."""
    if any(len(p) == 0 for p in positions):
        raise WhiteboxError("every example needs at least one attending position")
    act = head_activations(engine, batch, _pad_positions(positions), layers=layers,
                           subtract_first=subtract_first)
    return act.max(dim=-1).values


@dataclass
class MatchedAttention:
    """Matched attention weight per example, pattern and head (sec. 5, fig. 4a).

    ``weights`` is [N, n_patterns, L, H], NaN where the example lacks a pattern's role.
    """

    patterns: list[str]
    weights: np.ndarray
    task_ids: list[str]

    def mean(self, pattern: str, select: Sequence[bool] | None = None) -> np.ndarray:
        """[L, H] mean over examples that have the pattern (optionally a subset)."""
        w = self.weights[:, self.patterns.index(pattern)]
        if select is not None:
            w = w[np.asarray(select, dtype=bool)]
        with np.errstate(invalid="ignore"):
            return np.nanmean(w, axis=0) if len(w) else np.full(w.shape[1:], np.nan)

    def head_mean(self, pattern: str, heads: Sequence[Head],
                  select: Sequence[bool] | None = None) -> float:
        """Mean matched weight of a class of heads (fig. 4a bars)."""
        m = self.mean(pattern, select)
        return float(np.nanmean([m[l, h] for l, h in heads]))


def matched_attention(engine: Engine, encoded: Sequence[EncodedExample],
                      patterns: Sequence[str], *, batch_size: int = 8) -> MatchedAttention:
    """Every head's matched attention weight on every pattern, one pass per batch."""
    pats = [parse_pattern(p) for p in patterns]
    n_layers, n_heads = engine.arch.n_layers, engine.arch.n_heads
    out = np.full((len(encoded), len(pats), n_layers, n_heads), np.nan, dtype=np.float32)
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        batch = make_batch(engine, chunk)
        s = batch.seq_len
        positions, masks, present = [], torch.zeros(len(chunk), len(pats), s, dtype=torch.bool), []
        for b, enc in enumerate(chunk):
            row_pos, row_present = [], []
            for j, pat in enumerate(pats):
                cells = enc.pattern_cells(pat)
                if cells is None:
                    row_pos.append(enc.n_tokens - 1)
                    row_present.append(False)
                    continue
                q, keys = cells
                row_pos.append(q)
                masks[b, j, keys] = True
                row_present.append(True)
            positions.append(row_pos)
            present.append(row_present)
        rows = attention_rows(engine, batch, positions)
        w = matched_weight_from_rows(rows, masks).permute(0, 3, 1, 2).numpy()  # [B, P, L, H]
        w[~np.asarray(present)] = np.nan
        out[start:start + len(chunk)] = w
    return MatchedAttention([p.text for p in pats], out, [e.example.task_id for e in encoded])


def first_token_note(tokenizer: Any) -> dict:
    """Which token head activation treats as "the first" (sec. 5): a BOS the tokenizer adds,
    or, for tokenizers that add none (SmolLM2), the prompt's own first word."""
    ids = tokenizer("x", add_special_tokens=True)["input_ids"]
    bos = getattr(tokenizer, "bos_token_id", None)
    is_bos = bool(ids) and bos is not None and ids[0] == bos
    return {"adds_bos": is_bos,
            "note": "the first token is the BOS token" if is_bos else
            "this tokenizer adds no BOS: the first token (excluded from head activation as the attention "
            "sink) is the prompt's first word"}


# --------------------------------------------------------------------------- attribution


@dataclass
class HeadAttribution:
    """EAP-IG attributions (KL metric) averaged over examples (sec. 4).

    ``head_out`` and ``q`` are [L, H]; ``k`` and ``v`` [L, H_kv]; ``mlp`` [L] (summed over
    neurons).  Negative values lower the KL to the clean output, i.e. the component
    carries what distinguishes the clean input from the baseline; heads are ranked by
    the magnitude of their ``head_out`` attribution.  ``per_example`` keeps [N, L, H]
    ``head_out`` scores.
    """

    head_out: np.ndarray
    q: np.ndarray | None
    k: np.ndarray | None
    v: np.ndarray | None
    mlp: np.ndarray | None
    per_example: np.ndarray
    n_examples: int
    baseline: str
    skipped: list[str] = field(default_factory=list)

    def ranked_heads(self, top: int | None = None) -> list[Head]:
        """Heads by decreasing |head_out attribution|."""
        flat = np.argsort(-np.abs(self.head_out), axis=None)
        heads = [Head(*(int(x) for x in np.unravel_index(i, self.head_out.shape))) for i in flat]
        return heads[:top] if top else heads


def pair_partner(encoded: Sequence[EncodedExample]) -> dict[int, int]:
    """Index of each classification example's partner: the other label of the same loop
    (the generator writes a loop's Yes then No example at indices 2i, 2i+1)."""
    by_key = {(e.example.task_id, e.example.index): i for i, e in enumerate(encoded)}
    out = {}
    for i, e in enumerate(encoded):
        if not e.example.is_classification:
            continue
        j = by_key.get((e.example.task_id, e.example.index ^ 1))
        if j is not None:
            out[i] = j
    return out


def attribute_heads(engine: Engine, encoded: Sequence[EncodedExample], *,
                    baseline: str = "pair", steps: int = 5, batch_size: int = 4,
                    points: Sequence[str] = ("head_out", "q", "k", "v", "mlp_act")) -> HeadAttribution:
    """EAP-IG with the KL metric (sec. 4) averaged over ``encoded``.

    ``baseline="pair"`` (classification): the corrupted input of each example is its
    Yes/No partner from the same loop, which differs only in the stated answer; pairs
    whose two prompts tokenize to different lengths are skipped (the engine needs
    token-aligned inputs) and listed in ``skipped``.  ``baseline="zero"``: zero input
    embeddings (any task).
    """
    if baseline not in ("pair", "zero"):
        raise WhiteboxError(f"baseline must be 'pair' or 'zero' (got {baseline!r})")
    if "head_out" not in points:
        points = ("head_out", *points)
    use: list[tuple[EncodedExample, EncodedExample | None]] = []
    skipped: list[str] = []
    if baseline == "pair":
        partners = pair_partner(encoded)
        for i, e in enumerate(encoded):
            j = partners.get(i)
            if j is None or encoded[j].n_tokens != e.n_tokens:
                skipped.append(f"{e.example.task_id}#{e.example.index}")
                continue
            use.append((e, encoded[j]))
        if not use:
            raise WhiteboxError("no classification example has a Yes/No partner of the same token "
                                "length to serve as the corrupted input; give classification "
                                "(g2c) tasks with both examples of each pair, or use baseline='zero'")
    else:
        use = [(e, None) for e in encoded]
    sums: dict[str, np.ndarray] = {}
    per_example = []
    for start in range(0, len(use), batch_size):
        chunk = use[start:start + batch_size]
        batch = make_batch(engine, [c for c, _ in chunk])
        base = make_batch(engine, [b for _, b in chunk]) if baseline == "pair" else None
        clean_logits = engine.run(batch).logits
        attr = integrated_gradients(engine, batch, kl_divergence_metric(clean_logits),
                                    points=points, steps=steps, baseline=base)
        for p, s in attr.scores.items():
            s = s.detach().float().cpu()
            if p == "mlp_act":
                s = s.sum(-1)  # [B, L]
            sums[p] = sums.get(p, 0) + s.sum(0).numpy()
            if p == "head_out":
                per_example.append(s.numpy())
    n = len(use)
    mean = {p: v / n for p, v in sums.items()}
    return HeadAttribution(head_out=mean["head_out"], q=mean.get("q"), k=mean.get("k"),
                           v=mean.get("v"), mlp=mean.get("mlp_act"),
                           per_example=np.concatenate(per_example), n_examples=n,
                           baseline=baseline, skipped=skipped)


# --------------------------------------------------------------------------- True / False heads


def stated_answer_activation(engine: Engine, encoded: Sequence[EncodedExample], *,
                             batch_size: int = 8, subtract_first: bool = False,
                             role: str = "A") -> np.ndarray:
    """Activation value of every head at the stated answer's last token: [N, L, H]."""
    out = []
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        pos = []
        for e in chunk:
            p = e.attending_position(role)
            if p is None:
                raise WhiteboxError(f"{e.example.task_id} #{e.example.index} has no {role} in its "
                                    "prompt; True/False heads are read on classification (g2c) tasks")
            pos.append([p])
        act = head_activations(engine, make_batch(engine, chunk), pos, subtract_first=subtract_first)
        out.append(act[..., 0].numpy())
    return np.concatenate(out)


@dataclass
class TrueFalseHeads:
    """True and False heads found on classification tasks (sec. 4-5, table 9)."""

    true_heads: list[Head]
    false_heads: list[Head]
    candidates: list[Head]
    attribution: HeadAttribution
    activation: np.ndarray  # [N, L, H] at the stated answer
    labels: list[str]       # "Yes" / "No" per example
    activation_gap: np.ndarray  # [L, H] mean(Yes) - mean(No)

    def to_dict(self) -> dict:
        return {
            "true_heads": [list(h) for h in self.true_heads],
            "false_heads": [list(h) for h in self.false_heads],
            "candidates": [{"head": list(h),
                            "attribution": float(self.attribution.head_out[h]),
                            "activation_gap_yes_minus_no": float(self.activation_gap[h])}
                           for h in self.candidates],
            "attribution_examples": self.attribution.n_examples,
            "attribution_skipped": len(self.attribution.skipped),
        }


def split_true_false(candidates: Sequence[Head], activation_gap: np.ndarray, *,
                     n_true: int = 2, n_false: int = 2) -> tuple[list[Head], list[Head]]:
    """Candidates whose activation is higher on true statements (gap > 0, largest first)
    are True heads, those higher on false statements (gap < 0, most negative first)
    False heads."""
    pos = sorted((h for h in candidates if activation_gap[h] > 0), key=lambda h: -activation_gap[h])
    neg = sorted((h for h in candidates if activation_gap[h] < 0), key=lambda h: activation_gap[h])
    return list(pos[:n_true]), list(neg[:n_false])


def find_true_false_heads(engine: Engine, encoded: Sequence[EncodedExample], *,
                          n_candidates: int = 10, n_true: int = 2, n_false: int = 2,
                          steps: int = 5, batch_size: int = 4,
                          attribution: HeadAttribution | None = None,
                          activation: np.ndarray | None = None) -> TrueFalseHeads:
    """Attribute (EAP-IG, KL, Yes/No partner as baseline), keep the ``n_candidates`` heads
    with the largest |attribution|, and split them by their activation gap at A."""
    cls = [e for e in encoded if e.example.is_classification]
    if len(cls) != len(encoded) or not cls:
        raise WhiteboxError("True/False heads are found on classification tasks: give only g2c "
                            "task ids (e.g. 'GendersOfPersons/same,CountriesOfCities/inCountryOf×3 [g2c]')")
    attribution = attribution or attribute_heads(engine, cls, steps=steps, batch_size=batch_size)
    if activation is None:
        activation = stated_answer_activation(engine, cls, batch_size=max(batch_size, 8))
    labels = [e.example.label or "" for e in cls]
    yes = np.array([lab == "Yes" for lab in labels])
    if yes.all() or not yes.any():
        raise WhiteboxError("True/False heads need both Yes and No examples")
    gap = activation[yes].mean(0) - activation[~yes].mean(0)
    candidates = attribution.ranked_heads(n_candidates)
    t, f = split_true_false(candidates, gap, n_true=n_true, n_false=n_false)
    return TrueFalseHeads(t, f, candidates, attribution, activation, labels, gap)


def parse_heads(text: str) -> list[Head]:
    """``"14.18,L14H46"`` -> [Head(14, 18), Head(14, 46)] (:meth:`Head.parse_list`)."""
    return Head.parse_list(text)


def format_heads(heads: Sequence[Head]) -> str:
    return ",".join(f"{l}.{h}" for l, h in heads)
