"""Evaluating a model on AttentionSpan examples through the engine (paper 003, sec. 4).

* :func:`teacher_forced_pass`: one batched engine pass gives, for every example, the
  logits at all its prediction rows (teacher-forced token correctness, table 1 "Acc." /
  "Partial Acc."), and optionally the full attention matrices (attention rollout, sec. 4,
  and its reference score per target token, App. C) and the per-head attention rows of
  the prediction positions (per-head reference scores; App. G key-head sums).
  Attention edits (:mod:`whitebox_eval.span.reinforcement`) ride on the same pass.
* :func:`generate_greedy_edited`: greedy generation through the engine's decoder with its
  key/value cache, so attention edits apply to each new row while the model writes its
  own answer; :func:`generate_greedy` is the same without edits.
* :func:`summarize`: accuracies, mean reference attention and the correct-vs-error
  comparison with its significance test (table 2) over a list of scored examples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from whitebox_eval.span.metrics import (
    CorrectErrorComparison,
    attention_rollout,
    compare_by_position,
    compare_clustered,
    compare_correct_vs_error,
    compare_within_samples,
    exact_match_accuracy,
    generation_correctness,
    generation_exact,
    mean_reference_attention,
    partial_accuracy,
    reference_attention_scores,
)
from whitebox_eval.span.tokenization import TokenizedExample
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Batch, Capture, Engine, batch_from_ids
from whitebox_eval.internals.generation import generate
from whitebox_eval.internals.requests import Edit

EditsFor = Callable[[Sequence[TokenizedExample]], list[Edit]]
"""Builds the attention edits for one batch of examples (e.g. ``Reinforcement.edits``)."""


@dataclass
class ExampleScores:
    """What one teacher-forced pass says about one example.

    ``correct[t]`` / ``predicted[t]``: argmax at the row predicting target token ``t``.
    ``rollout_scores[t]``: share of the rollout row on the reference tokens (App. C),
    NaN for rows without a reference. ``head_scores`` [L, H, T]: the same share for each
    head's own attention row. ``head_reference_sum`` [L, H]: post-softmax attention on
    reference cells summed over the valid rows (App. G step 1). ``rollout`` [S, S] is
    kept only when asked (for heatmaps).
    """

    correct: np.ndarray
    predicted: np.ndarray
    rollout_scores: np.ndarray | None = None
    head_scores: np.ndarray | None = None
    head_reference_sum: np.ndarray | None = None
    rollout: np.ndarray | None = None

    @property
    def exact(self) -> bool:
        return bool(self.correct.all())

    @property
    def partial(self) -> float:
        return float(self.correct.mean())


def _pad_rows(rows: Sequence[np.ndarray]) -> list[list[int]]:
    """Same number of positions per example (the engine asks it): repeat the last one."""
    width = max(len(r) for r in rows)
    return [list(map(int, r)) + [int(r[-1])] * (width - len(r)) for r in rows]


def make_batch(engine: Engine, tokenized: Sequence[TokenizedExample]) -> Batch:
    """Left-padded batch of the examples' full teacher-forced sequences."""
    if not tokenized:
        raise WhiteboxError("no examples to evaluate")
    if any(len(t.target_positions) == 0 for t in tokenized):
        raise WhiteboxError("an example has no target tokens; give every example a target")
    return batch_from_ids([t.input_ids.tolist() for t in tokenized], pad_id=engine.loaded.pad_id).to(engine.loaded.device)


def head_reference_shares(rows: np.ndarray, tokenized: TokenizedExample) -> np.ndarray:
    """Per-head share of attention on reference tokens per target token (App. C per head).

    ``rows`` [L, H, T, S] are the heads' post-softmax rows at the prediction positions.
    Normalised like :func:`reference_attention_scores` with ``normalize="context"``;
    rows without a reference are NaN. Returns [L, H, T].
    """
    mask = tokenized.reference_mask[None, None]
    numerator = (rows * mask).sum(-1)
    denominator = rows[..., tokenized.context_start:].sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(denominator > 0, numerator / denominator, 0.0)
    return np.where(tokenized.valid[None, None], share, np.nan)


def teacher_forced_pass(engine: Engine, tokenized: Sequence[TokenizedExample], *,
                        edits_for: EditsFor | None = None, rollout: bool = False,
                        head_rows: bool = False, keep_rollout: Sequence[bool] | bool = False,
                        ) -> list[ExampleScores]:
    """Score one batch in one engine pass (table 1, App. C, App. G).

    Logits come at every prediction row of every example; ``rollout`` captures the head
    mean of every layer's post-softmax matrix (``attn_mean``: rollout averages the heads, so
    the per-head matrices are never kept) and rolls it out per example (sec. 4); ``head_rows`` captures each head's rows at the prediction positions only.
    ``edits_for(tokenized)`` supplies attention edits applied during the pass (their
    effect shows in the logits and the captured attention alike).
    """
    batch = make_batch(engine, tokenized)
    positions = _pad_rows([t.prediction_positions for t in tokenized])
    captures = []
    if rollout:
        captures.append(Capture("attn_mean"))
    if head_rows:
        captures.append(Capture("attn", positions, name="rows"))
    edits = list(edits_for(tokenized)) if edits_for is not None else []
    trace = engine.run(batch, captures, edits, logits=positions)
    predicted_all = trace.logits.argmax(-1).cpu().numpy()  # [B, P]
    keep = [bool(keep_rollout)] * len(tokenized) if isinstance(keep_rollout, bool) else list(keep_rollout)
    # the whole batch rolled out at once (an example's tail past its length is zero: its rollout is the
    # top-left block) and every array brought to the host in one copy
    rolls = attention_rollout(trace["attn_mean"][:, :, None]).cpu().numpy() if rollout else None  # [B, S, S]
    rows_all = trace["rows"].to(torch.float64).cpu().numpy() if head_rows else None
    out = []
    for i, tok in enumerate(tokenized):
        n_t = len(tok.target_positions)
        predicted = predicted_all[i, :n_t]
        scores = ExampleScores(correct=predicted == tok.target_ids, predicted=predicted)
        if rollout:
            n = tok.seq_len
            roll = np.ascontiguousarray(rolls[i, :n, :n])  # the heads were averaged in the pass (attn_mean)
            scores.rollout_scores = reference_attention_scores(roll, tok)
            if keep[i]:
                scores.rollout = roll
        if head_rows:
            rows = rows_all[i, :, :, :n_t, : tok.seq_len]
            scores.head_scores = head_reference_shares(rows, tok)
            valid_mask = tok.reference_mask & tok.valid[:, None]
            scores.head_reference_sum = (rows * valid_mask[None, None]).sum(axis=(2, 3))
        out.append(scores)
    return out


def batches(items: Sequence, size: int) -> Iterator[Sequence]:
    """Consecutive chunks of ``size`` items."""
    if size < 1:
        raise WhiteboxError(f"batch size must be at least 1; got {size}")
    for start in range(0, len(items), size):
        yield items[start:start + size]


def evaluate_teacher_forced(engine: Engine, tokenized: Sequence[TokenizedExample], *,
                            batch_size: int = 8, edits_for: EditsFor | None = None,
                            rollout: bool = False, head_rows: bool = False) -> list[ExampleScores]:
    """:func:`teacher_forced_pass` over all examples, ``batch_size`` at a time."""
    out: list[ExampleScores] = []
    for chunk in batches(tokenized, batch_size):
        out += teacher_forced_pass(engine, chunk, edits_for=edits_for, rollout=rollout,
                                   head_rows=head_rows)
    return out


# ----------------------------------------------------------------------- generation


def _decode(tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True)


def _max_new(tokenized: Sequence[TokenizedExample], extra: int) -> int:
    return max(len(t.target_positions) for t in tokenized) + extra


def generate_greedy(lm, tokenized: Sequence[TokenizedExample], *, max_new_tokens: int | None = None,
                    extra_tokens: int = 2) -> list[str]:
    """Free greedy generation from each prompt (table 1): :func:`generate_greedy_edited` without edits.

    Prompts are left-padded; ``max_new_tokens`` defaults to the longest target plus
    ``extra_tokens``. Returns the decoded continuations (special tokens dropped).
    """
    return generate_greedy_edited(Engine(lm), tokenized, None, max_new_tokens=max_new_tokens,
                                  extra_tokens=extra_tokens)


def generate_greedy_edited(engine: Engine, tokenized: Sequence[TokenizedExample],
                           edits_for: EditsFor | None, *, max_new_tokens: int | None = None,
                           extra_tokens: int = 2) -> list[str]:
    """Greedy generation through the engine with attention edits at every step (sec. 5.1).

    Uses the engine's key/value cache (:func:`whitebox_eval.internals.generation.generate`):
    each step computes the new query row under ``edits_for`` of the examples cut to
    their current length, so reference cells beyond it vanish; a row's cells must not
    change once it is computed (refused otherwise). Each example stops at one of the
    model's stop ids (:attr:`~whitebox_eval.models.loading.LoadedModel.stop_ids`).
    """
    prompts = [t.input_ids[: t.prompt_length].tolist() for t in tokenized]
    edits = () if edits_for is None else (
        lambda lengths: edits_for([truncated(t, n) for t, n in zip(tokenized, lengths)]))
    gens = generate(engine, prompts, max_new_tokens=max_new_tokens or _max_new(tokenized, extra_tokens), edits=edits)
    return [_decode(engine.tokenizer, g.content_ids) for g in gens]


def truncated(tok: TokenizedExample, length: int) -> TokenizedExample:
    """``tok`` seen as a sequence of ``length`` tokens: target rows whose prediction row
    lies inside it are kept (with reference columns < length); used while generating."""
    keep = tok.prediction_positions < length
    mask = tok.reference_mask[keep][:, :length]
    return TokenizedExample(
        input_ids=np.zeros(length, dtype=np.int64), input_positions=tok.input_positions,
        target_positions=tok.target_positions[keep], reference_mask=mask,
        valid=tok.valid[keep], context_start=tok.context_start,
        prompt_length=tok.prompt_length, example=tok.example)


def generation_scores(generated: Sequence[str], tokenized: Sequence[TokenizedExample]
                      ) -> list[np.ndarray]:
    """Per-character correctness of generations against the targets (partial accuracy)."""
    return [generation_correctness(g, t.example.target) for g, t in zip(generated, tokenized)]


def generation_verdicts(generated: Sequence[str], tokenized: Sequence[TokenizedExample]) -> list[bool]:
    """Whole-string equality of generations and targets (table 1 accuracy, generated)."""
    return [generation_exact(g, t.example.target) for g, t in zip(generated, tokenized)]


# -------------------------------------------------------------------------- summary


@dataclass
class SpanSummary:
    """Table 1 / table 2 numbers for one set of scored examples.

    ``extra`` holds the intervals (``stats`` keys beside each accuracy: ``accuracy_ci``,
    ``accuracy_n``, ...), the within-sample and per-position correct-vs-error tests.
    """

    n_examples: int
    accuracy: float
    partial_accuracy: float
    generation_accuracy: float | None = None
    generation_partial_accuracy: float | None = None
    reference_attention: float | None = None
    correct_vs_error: CorrectErrorComparison | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("correct_vs_error", "extra")}
        if self.correct_vs_error is not None:
            d["correct_vs_error"] = dict(self.correct_vs_error.__dict__)
        d.update(self.extra)
        return d


def summarize(correct: Sequence[np.ndarray], *, rollout_scores: Sequence[np.ndarray] | None = None,
              generation_correct: Sequence[np.ndarray] | None = None,
              generation_exact: Sequence[bool] | None = None,
              test: str = "welch") -> SpanSummary:
    """Accuracy, partial accuracy (table 1), mean reference attention (App. C) and the
    correct-vs-error comparison of reference attention with its test (table 2).

    Accuracies carry Wilson intervals, partial accuracy a bootstrap interval over
    examples (``stats``). Free generation: ``generation_exact`` (whole-string equality,
    :func:`~whitebox_eval.span.metrics.generation_exact`) gives its accuracy,
    ``generation_correct`` (per character) its partial accuracy. The token-pooled test
    of table 2 comes with a within-sample test (Wilcoxon on per-sample mean
    differences) in ``within_sample``, a cluster-robust one with the sequence as the unit in
    ``clustered`` (the one that decides) and a per-position one in ``by_position``.
    """
    from whitebox_eval import stats

    rows = [np.asarray(c, dtype=bool) for c in correct]
    summary = SpanSummary(n_examples=len(rows), accuracy=exact_match_accuracy(rows),
                          partial_accuracy=partial_accuracy(rows))
    stats.add_proportion(summary.extra, "accuracy", [r.all() for r in rows])
    stats.add_mean(summary.extra, "partial_accuracy", [r.mean() for r in rows])
    if generation_exact is not None:
        if len(generation_exact) != len(rows):
            raise WhiteboxError(f"give one generation verdict per example: {len(generation_exact)} "
                                f"for {len(rows)}")
        summary.generation_accuracy = float(np.mean(generation_exact))
        stats.add_proportion(summary.extra, "generation_accuracy", [bool(g) for g in generation_exact])
    if generation_correct is not None:
        summary.generation_partial_accuracy = partial_accuracy(generation_correct)
    if rollout_scores is not None:
        summary.reference_attention = mean_reference_attention(rollout_scores)
        summary.correct_vs_error = compare_correct_vs_error(rollout_scores, rows, test=test)
        summary.extra["clustered"] = compare_clustered(rollout_scores, rows)
        summary.extra["within_sample"] = compare_within_samples(rollout_scores, rows)
        summary.extra["by_position"] = compare_by_position(rollout_scores, rows, test=test)
    return summary
