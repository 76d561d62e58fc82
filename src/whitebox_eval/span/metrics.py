"""Scores of AttentionSpan (paper 003): accuracies, rollout, reference attention, key heads.

* Accuracy, OOD accuracy and OOD partial accuracy of table 1 (teacher-forced and from
  free generation).
* Attention rollout (sec. 4; Abnar & Zuidema 2020).
* Attention score on reference tokens per target token (App. C) and its comparison
  between correctly and wrongly predicted tokens (table 2).
* Key-head ranking by summed attention on reference cells (sec. 5.1, App. G step 1).

Attention arrays are post-softmax probabilities, torch tensors or numpy arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from whitebox_eval.span.tokenization import TokenizedExample
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.lenses import attention_rollout  # noqa: F401  (rollout lives in the engine)


def _numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x)


# ------------------------------------------------------------------------- accuracies


def token_correctness(logits, tokenized: TokenizedExample) -> np.ndarray:
    """Teacher-forced per-token correctness (table 1): argmax at each prediction row.

    ``logits`` is [seq_len, vocab] for the full teacher-forced sequence
    ``tokenized.input_ids``; returns a boolean vector over target tokens.
    """
    arr = _numpy(logits)
    if arr.ndim != 2 or arr.shape[0] != tokenized.seq_len:
        raise WhiteboxError(f"logits must be [seq_len={tokenized.seq_len}, vocab]; got "
                            f"shape {tuple(arr.shape)}")
    predicted = arr[tokenized.prediction_positions].argmax(axis=-1)
    return predicted == tokenized.target_ids


def _check_rows(correct: Sequence[np.ndarray]) -> list[np.ndarray]:
    rows = [np.asarray(c, dtype=bool) for c in correct]
    if not rows:
        raise WhiteboxError("no examples to score; give at least one")
    if any(r.size == 0 for r in rows):
        raise WhiteboxError("an example has no target tokens to score")
    return rows


def exact_match_accuracy(correct: Sequence[np.ndarray]) -> float:
    """Share of examples whose whole answer is right (table 1 "Acc.")."""
    return float(np.mean([r.all() for r in _check_rows(correct)]))


def partial_accuracy(correct: Sequence[np.ndarray]) -> float:
    """Mean over examples of the share of correct target tokens (table 1 "Partial Acc.")."""
    return float(np.mean([r.mean() for r in _check_rows(correct)]))


def _clean_generation(text: str, stop: str | None, strip: bool) -> str:
    if stop:
        text = text.split(stop, 1)[0]
    return text.strip() if strip else text


def generation_correctness(generated: str, target: str, *, stop: str | None = "\n",
                           strip: bool = True) -> np.ndarray:
    """Per-character correctness of a free generation against the target.

    The generation is cut at the first ``stop`` string and, with ``strip``, both
    strings lose surrounding whitespace; character ``k`` is right when the generation
    has the target's character at position ``k`` (missing characters are wrong).
    """
    gen = _clean_generation(generated, stop, strip)
    tgt = target.strip() if strip else target
    return np.array([k < len(gen) and gen[k] == c for k, c in enumerate(tgt)], dtype=bool)


def generation_exact(generated: str, target: str, *, stop: str | None = "\n",
                     strip: bool = True) -> bool:
    """Whole-string equality of a free generation and its target (table 1, generated).

    Stop rule: the generation (already cut at EOS by the generator) is cut at the
    first ``stop`` string and, with ``strip``, both strings lose surrounding whitespace.
    Anything generated after the target counts: ``"z.reverse()"`` is not ``"z"``.
    """
    return _clean_generation(generated, stop, strip) == (target.strip() if strip else target)


def generation_accuracy(generated: Sequence[str], targets: Sequence[str], *,
                        stop: str | None = "\n", strip: bool = True) -> float:
    """Share of free generations equal to their target (:func:`generation_exact`)."""
    if len(generated) != len(targets) or not targets:
        raise WhiteboxError(f"give one generation per target: {len(generated)} "
                            f"generations for {len(targets)} targets")
    return float(np.mean([generation_exact(g, t, stop=stop, strip=strip)
                          for g, t in zip(generated, targets)]))


# ---------------------------------------------------------------------------- rollout


def attentions_from_hf(attentions: Sequence[torch.Tensor]) -> torch.Tensor:
    """Stack Hugging Face ``output_attentions`` (per layer [B, H, S, S]) to [B, L, H, S, S]."""
    if not attentions:
        raise WhiteboxError("no attention tensors: run the model with output_attentions=True")
    return torch.stack(tuple(attentions), dim=1)


# --------------------------------------------------------------- reference attention


def reference_attention_scores(attention, tokenized: TokenizedExample, *,
                               normalize: str = "context") -> np.ndarray:
    """Share of a query row's attention on its reference tokens, per target token (App. C).

    ``attention`` is one aggregated [seq, seq] matrix (a rollout or one head). For the
    query row that predicts target token ``t`` the score is
    ``sum(|a| on reference columns) / sum(|a| on normalising columns)``, where the
    normalising columns are, with ``normalize="context"`` (default, as the released
    code), every column of the data point itself (``tokenized.context_start`` onward:
    BOS, instruction and few-shot prefix are excluded), or with ``normalize="row"``
    the whole row. A row whose denominator is 0 scores 0, as in the released code.
    Rows without a reference are NaN (skipped by the means, not counted as zero).
    """
    att = _numpy(attention).astype(np.float64)
    if att.shape != (tokenized.seq_len, tokenized.seq_len):
        raise WhiteboxError(f"attention must be [{tokenized.seq_len}, {tokenized.seq_len}]"
                            f" for this example; got {att.shape}")
    if normalize not in ("context", "row"):
        raise WhiteboxError(f"normalize must be 'context' or 'row'; got {normalize!r}")
    start = tokenized.context_start if normalize == "context" else 0
    rows = np.abs(att[tokenized.prediction_positions])
    numerator = (rows * tokenized.reference_mask).sum(axis=1)
    denominator = rows[:, start:].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = np.where(denominator > 0, numerator / denominator, 0.0)
    return np.where(tokenized.valid, scores, np.nan)


def mean_reference_attention(scores: Sequence[np.ndarray], *, pooled: bool = True) -> float:
    """Mean attention score on reference tokens over a batch (App. C, table 2).

    ``pooled`` averages all valid target tokens of all samples together (table 2:
    "mean across samples and all target tokens"); otherwise the per-sample means are
    averaged. NaN rows are skipped.
    """
    rows = [np.asarray(s, dtype=np.float64) for s in scores]
    rows = [r[~np.isnan(r)] for r in rows]
    if pooled:
        flat = np.concatenate(rows) if rows else np.array([])
        return float(flat.mean()) if flat.size else float("nan")
    means = [r.mean() for r in rows if r.size]
    return float(np.mean(means)) if means else float("nan")


@dataclass
class CorrectErrorComparison:
    """Table 2: reference attention of correctly vs wrongly predicted target tokens."""

    mean_correct: float
    mean_error: float
    n_correct: int
    n_error: int
    statistic: float
    p_value: float
    test: str


def _token_groups(scores: Sequence[np.ndarray], correct: Sequence[np.ndarray]
                  ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per sample: (scores of correct tokens, scores of wrong tokens), NaN rows skipped,
    each as a [T] array with NaN where the token is not in the group (position kept)."""
    if len(scores) != len(correct):
        raise WhiteboxError(f"give one correctness vector per score vector: {len(scores)} "
                            f"vs {len(correct)}")
    out = []
    for s, c in zip(scores, correct):
        s = np.asarray(s, dtype=np.float64)
        c = np.asarray(c, dtype=bool)
        if s.shape != c.shape:
            raise WhiteboxError(f"scores {s.shape} and correctness {c.shape} differ in length")
        keep = ~np.isnan(s)
        out.append((np.where(keep & c, s, np.nan), np.where(keep & ~c, s, np.nan)))
    return out


def _two_groups(good: np.ndarray, bad: np.ndarray, test: str) -> CorrectErrorComparison:
    if test not in ("welch", "mannwhitney"):
        raise WhiteboxError(f"test must be 'welch' or 'mannwhitney'; got {test!r}")
    statistic = p_value = float("nan")
    if good.size >= 2 and bad.size >= 2:
        if test == "welch":
            res = stats.ttest_ind(good, bad, equal_var=False)
        else:
            res = stats.mannwhitneyu(good, bad, alternative="two-sided")
        statistic, p_value = float(res.statistic), float(res.pvalue)
    return CorrectErrorComparison(
        mean_correct=float(good.mean()) if good.size else float("nan"),
        mean_error=float(bad.mean()) if bad.size else float("nan"),
        n_correct=int(good.size), n_error=int(bad.size),
        statistic=statistic, p_value=p_value, test=test)


def _present(values: np.ndarray) -> np.ndarray:
    return values[~np.isnan(values)]


def compare_correct_vs_error(scores: Sequence[np.ndarray], correct: Sequence[np.ndarray],
                             *, test: str = "welch") -> CorrectErrorComparison:
    """Compare attention scores of correct and wrong token predictions (table 2).

    Token-level scores (NaN rows skipped) are pooled over samples and split by
    correctness. The paper reports "a statistically significant shift" without naming
    the test; its released code uses Welch's unequal-variance t-test, the default here
    (two-sided). ``test="mannwhitney"`` gives the two-sided Mann-Whitney U test.
    Statistic and p-value are NaN when a group has fewer than 2 tokens. Pooling treats
    tokens of one sample as independent; :func:`compare_clustered` and
    :func:`compare_within_samples` do not.
    """
    groups = _token_groups(scores, correct)
    if test not in ("welch", "mannwhitney"):
        raise WhiteboxError(f"test must be 'welch' or 'mannwhitney'; got {test!r}")
    good = np.concatenate([_present(g) for g, _ in groups]) if groups else np.array([])
    bad = np.concatenate([_present(b) for _, b in groups]) if groups else np.array([])
    return _two_groups(good, bad, test)


def compare_within_samples(scores: Sequence[np.ndarray], correct: Sequence[np.ndarray]) -> dict:
    """Table 2 within samples: per sample holding both correct and wrong tokens, the
    mean reference attention of its correct tokens minus that of its wrong tokens;
    Wilcoxon signed-rank test of those paired means (``stats.wilcoxon``).

    Samples with only correct or only wrong tokens carry no within-sample contrast and
    are skipped (counted in ``n_skipped``). ``test`` is None when no sample qualifies.
    """
    from whitebox_eval import stats as st

    mc, me = [], []
    for g, b in _token_groups(scores, correct):
        g, b = _present(g), _present(b)
        if g.size and b.size:
            mc.append(float(g.mean()))
            me.append(float(b.mean()))
    out = {"n_samples": len(mc), "n_skipped": len(scores) - len(mc),
           "mean_correct": float(np.mean(mc)) if mc else None,
           "mean_error": float(np.mean(me)) if me else None, "test": None}
    if mc:
        out["test"] = st.wilcoxon(mc, me).as_dict()
    return out


def compare_clustered(scores: Sequence[np.ndarray], correct: Sequence[np.ndarray]) -> dict:
    """Table 2 with the sequence as the unit: pooled mean reference attention of correct
    minus wrong tokens, cluster-robust t over sequences
    (:func:`whitebox_eval.stats.clustered_difference`). Tokens of one sequence share its
    prompt and are not independent, so this test, not the pooled one, decides. ``test`` is
    None (with ``why``) when a group is empty or fewer than 3 sequences hold tokens."""
    from whitebox_eval import stats as st

    values, in_a, seq = [], [], []
    for i, (g, b) in enumerate(_token_groups(scores, correct)):
        for group, flag in ((_present(g), True), (_present(b), False)):
            values.extend(group.tolist())
            in_a.extend([flag] * group.size)
            seq.extend([i] * group.size)
    out: dict = {"n_tokens": len(values), "n_sequences": len(set(seq)), "test": None}
    try:
        out["test"] = st.clustered_difference(values, in_a, seq).as_dict()
    except WhiteboxError as e:
        out["why"] = str(e)
    return out


def compare_by_position(scores: Sequence[np.ndarray], correct: Sequence[np.ndarray], *,
                        test: str = "welch") -> list[dict]:
    """Table 2 per target position ``t`` (0 = first answer token): correct vs wrong tokens
    at the same position across samples, so answer length and distance from the
    reference cannot drive the contrast when lengths differ. Positions where either
    group is empty are listed with their counts (statistic and p NaN below 2 tokens).
    """
    groups = _token_groups(scores, correct)
    width = max((len(g) for g, _ in groups), default=0)
    out = []
    for t in range(width):
        good = _present(np.array([g[t] for g, _ in groups if t < len(g)]))
        bad = _present(np.array([b[t] for _, b in groups if t < len(b)]))
        if good.size + bad.size == 0:
            continue
        out.append({"position": t, **_two_groups(good, bad, test).__dict__})
    return out


# -------------------------------------------------------------------------- key heads


def key_head_scores(attentions: Sequence, tokenized: Sequence[TokenizedExample], *,
                    rows_gathered: bool = False) -> np.ndarray:
    """Per-head summed post-softmax attention on reference cells (App. G, step 1).

    ``attentions[i]`` is sample ``i``'s attention, [L, H, seq, seq] (or, with
    ``rows_gathered``, [L, H, n_target_tokens, seq] holding only the prediction rows).
    Sums over samples and valid target rows; returns [L, H].
    """
    if len(attentions) != len(tokenized) or not tokenized:
        raise WhiteboxError(f"give one attention array per example: {len(attentions)} "
                            f"arrays for {len(tokenized)} examples")
    total = None
    for att, tok in zip(attentions, tokenized):
        arr = _numpy(att).astype(np.float64)
        n_rows = len(tok.target_positions) if rows_gathered else tok.seq_len
        if arr.ndim != 4 or arr.shape[2:] != (n_rows, tok.seq_len):
            raise WhiteboxError(f"attention must be [layers, heads, {n_rows}, {tok.seq_len}]"
                                f" for this example; got {arr.shape}")
        rows = arr if rows_gathered else arr[:, :, tok.prediction_positions, :]
        mask = tok.reference_mask & tok.valid[:, None]
        contribution = (rows * mask[None, None]).sum(axis=(2, 3))
        total = contribution if total is None else total + contribution
    return total


def rank_key_heads(scores, top_n: int | None = None) -> list[tuple[int, int]]:
    """(layer, head) pairs by descending score (App. G); ties keep (layer, head) order."""
    arr = _numpy(scores)
    if arr.ndim != 2:
        raise WhiteboxError(f"scores must be [layers, heads]; got shape {arr.shape}")
    order = np.argsort(-arr.ravel(), kind="stable")
    if top_n is not None:
        order = order[:top_n]
    n_heads = arr.shape[1]
    return [(int(i // n_heads), int(i % n_heads)) for i in order]
