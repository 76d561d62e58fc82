"""Paper 004's metrics ("First Token Probabilities are Unreliable Indicators for LLM
Knowledge"): first-token P(correct), free-generation scoring (exact match after 004's
normalisation, or the number :func:`whitebox_eval.tasks.numbers.extract_number` reads),
Pearson r between formats, the expected alignment error (eq. 1) and the MCQ-by-free tables."""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.stats.intervals import as_indices
from whitebox_eval.tasks.answers import normalize_answer
from whitebox_eval.tasks.numbers import EXTRACTORS, extract_number

__all__ = ["EXTRACTORS", "extract_number"]  # the extraction rules, read by the formats study from here too

FREE_GENERATION_SAMPLES = 20  # 004 sec. 2.4: 20 samples per question ...
FREE_GENERATION_TEMPERATURE = 1.0  # ... at T = 1
DEFAULT_ALIGNMENT_BINS = 10


# --------------------------------------------------------------------------- paper 004: MCQ side


def p_correct(
    option_probs: np.ndarray, gold: np.ndarray | Sequence[int], renormalize: bool = True
) -> np.ndarray:
    """First-token probability of the correct letter per question, ``[items]`` (004 sec. 2.4).

    ``option_probs``: ``[items, options]`` next-token probabilities of the letter tokens.
    ``renormalize=True`` (this library's default; 004 is silent) divides by their sum,
    i.e. P(correct) within the answer letters; ``False`` keeps the full-vocabulary value.
    """
    pr = np.asarray(option_probs, dtype=np.float64)
    if pr.ndim != 2:
        raise WhiteboxError(f"option_probs must be [items, options]; got {pr.shape}")
    if np.any(pr < 0) or np.any(~np.isfinite(pr)):
        raise WhiteboxError("option probabilities must be finite and non-negative")
    g = as_indices(gold, "gold")
    if g.shape[0] != pr.shape[0] or (g.size and (g.min() < 0 or g.max() >= pr.shape[1])):
        raise WhiteboxError("gold must give one option index in range per row of option_probs")
    if renormalize:
        total = pr.sum(axis=1, keepdims=True)
        if np.any(total <= 0):
            raise WhiteboxError("a row of option probabilities sums to zero; cannot renormalize")
        pr = pr / total
    return pr[np.arange(pr.shape[0]), g]


def mean_p_correct(per_format: Mapping[str, np.ndarray | Sequence[float]]) -> dict[str, float]:
    """Average P(correct) per prompt format (004 Table 1, Fig. 7)."""
    return {name: float(np.mean(np.asarray(v, dtype=np.float64))) for name, v in per_format.items()}


def format_correlation(x: np.ndarray | Sequence[float], y: np.ndarray | Sequence[float]) -> float:
    """Pearson correlation of per-question P(correct) between two formats (004 Table 1, ρ).

    Returns NaN when either format has no variance (the correlation is undefined).
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size < 2:
        raise WhiteboxError("need two 1-D arrays of equal length (at least 2 questions)")
    da, db = a - a.mean(), b - b.mean()
    denom = np.sqrt((da * da).sum() * (db * db).sum())
    if denom == 0:
        return float("nan")
    return float((da * db).sum() / denom)


@dataclass(frozen=True)
class Alignment:
    """Alignment chart points and expected alignment error (004 sec. 2.4.2, eq. 1)."""

    bin_x: np.ndarray  # mean MCQ P(correct) per bin
    bin_y: np.ndarray  # mean free-generation P(correct) per bin
    bin_sizes: np.ndarray
    error: float


def expected_alignment_error(
    x: np.ndarray | Sequence[float],
    y: np.ndarray | Sequence[float],
    n_bins: int = DEFAULT_ALIGNMENT_BINS,
) -> Alignment:
    """``E_alignment = (1/N) Σ_{i=1..N} |x_i - y_i|`` over ``N`` bins (004 eq. 1).

    Questions are sorted by ``x`` (MCQ P(correct)) and cut into ``n_bins`` equal-count
    bins; ``(x_i, y_i)`` is the bin's mean MCQ P(correct) and mean free-generation
    P(correct). When the count does not divide evenly the first ``len % n_bins`` bins
    get one extra question; equal ``x`` keep their input order (stable sort). The
    number of bins is not given in 004; 10 is this library's default.
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise WhiteboxError("x and y must be 1-D arrays with one value per question")
    if not 1 <= n_bins <= a.size:
        raise WhiteboxError(f"n_bins must lie in [1, number of questions = {a.size}]; got {n_bins}")
    order = np.argsort(a, kind="stable")
    bins = np.array_split(order, n_bins)
    bx = np.array([a[i].mean() for i in bins])
    by = np.array([b[i].mean() for i in bins])
    return Alignment(
        bin_x=bx,
        bin_y=by,
        bin_sizes=np.array([len(i) for i in bins]),
        error=float(np.mean(np.abs(bx - by))),
    )


def truncate_answer(text: str) -> str:
    """Keep the generation up to the first ``.`` or newline (004 sec. 2.4.1)."""
    return re.split(r"[.\n]", text, maxsplit=1)[0]


def normalize_generation(text: str) -> str:
    """004 sec. 2.4.1 for a generated answer: truncate at ``.``/newline, then normalise."""
    return normalize_answer(truncate_answer(text))


def exact_match(generation: str, golds: str | Sequence[str], truncate_gold: bool = False) -> bool:
    """Whether the normalised generation equals the normalised gold or any alias (004 sec. 2.4).

    The generation is truncated at its first ``.``/newline; gold answers are only
    normalised (004 truncates "generated answers"), unless ``truncate_gold``.
    An empty normalised generation never matches.
    """
    gold_list = [golds] if isinstance(golds, str) else list(golds)
    if not gold_list:
        raise WhiteboxError("exact_match needs at least one gold answer")
    norm = normalize_answer if not truncate_gold else normalize_generation
    targets = {norm(g) for g in gold_list} - {""}
    pred = normalize_generation(generation)
    return bool(pred) and pred in targets


def number_match(generation: str, gold: int | float, rule: str = "paper") -> bool:
    """Whether the extracted number (default: the first, 004 sec. 2.4.1) equals the gold."""
    v = extract_number(generation, rule)
    return v is not None and v == gold


def fraction_correct(
    samples: Sequence[str],
    gold: str | Sequence[str] | int | float,
    answer_type: Literal["text", "number"] = "text",
    extract: str = "paper",
    truncate_gold: bool = False,
) -> float:
    """Share of the sampled generations that are correct (004 sec. 2.4: 20 samples at T=1).

    ``text``: :func:`exact_match` against gold and aliases (TriviaQA; ``truncate_gold``
    normalises the gold like the generation); ``number``: :func:`number_match` of the
    number ``extract`` reads (arithmetic; default the paper's first number).
    """
    if len(samples) == 0:
        raise WhiteboxError("fraction_correct needs at least one sampled generation")
    if answer_type == "text":
        if isinstance(gold, numbers.Real):
            raise WhiteboxError("answer_type='text' needs a string gold answer (or aliases)")
        flags = [exact_match(s, gold, truncate_gold=truncate_gold) for s in samples]
    elif answer_type == "number":
        if not isinstance(gold, numbers.Real) or isinstance(gold, bool):
            raise WhiteboxError("answer_type='number' needs a numeric gold answer")
        flags = [number_match(s, gold, extract) for s in samples]
    else:
        raise WhiteboxError(f"answer_type must be 'text' or 'number'; got {answer_type!r}")
    return float(np.mean(flags))


# ------------------------------------------------------------ paper 004: across items


def correlation_or_reason(x: np.ndarray | Sequence[float], y: np.ndarray | Sequence[float],
                          names: tuple[str, str] = ("x", "y")) -> tuple[float | None, str | None]:
    """Pearson r (004 Table 1) or, when it is undefined, None and why ("no variance in free")."""
    r = format_correlation(x, y)
    if np.isfinite(r):
        return r, None
    flat = [n for n, v in zip(names, (x, y)) if np.ptp(np.asarray(v, dtype=np.float64)) == 0]
    return None, "no variance in " + " and ".join(flat)


#: MCQ P(correct) bin edges for the distribution tables (004 Tables 2-3).
TABLE_EDGES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def mcq_by_free_partition(mcq: np.ndarray | Sequence[float], free: np.ndarray | Sequence[float],
                          threshold: float = 0.5, edges: Sequence[float] = TABLE_EDGES) -> dict:
    """MCQ P(correct) distribution split by free-generation P(correct) (004 Tables 2-3).

    Two partitions: questions with free P(correct) >= ``threshold`` and below it (the
    tables' numbers did not survive in the paper's text; the split at 0.5 and the bins
    are this library's). Each partition gives n, mean, median and the share of its
    questions per MCQ P(correct) bin ``[e_i, e_{i+1})`` (the last bin includes 1).
    """
    m, f = np.asarray(mcq, dtype=np.float64), np.asarray(free, dtype=np.float64)
    if m.shape != f.shape or m.ndim != 1:
        raise WhiteboxError("mcq and free need one value per question")
    e = np.asarray(edges, dtype=np.float64)
    labels = [f"[{lo:.1f},{hi:.1f}{']' if i == len(e) - 2 else ')'}" for i, (lo, hi) in enumerate(zip(e[:-1], e[1:]))]
    out = {"threshold": threshold, "bins": labels, "partitions": {}}
    for name, mask in ((f"free>={threshold:g}", f >= threshold), (f"free<{threshold:g}", f < threshold)):
        v = m[mask]
        counts = np.histogram(v, bins=e)[0] if v.size else np.zeros(len(labels), dtype=int)
        out["partitions"][name] = {
            "n": int(v.size),
            "mean": float(v.mean()) if v.size else None,
            "median": float(np.median(v)) if v.size else None,
            "share": [float(c / v.size) if v.size else None for c in counts],
        }
    return out


