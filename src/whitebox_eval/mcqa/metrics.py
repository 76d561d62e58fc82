"""MCQA metrics of paper 000 (accuracy, Permutation Accuracy, selection bias) and
paper 004 (first-token P(correct), free-generation scoring, alignment error).

000 = "Listening to the Wise Few: Select-and-Copy Attention Heads for MCQA";
004 = "First Token Probabilities are Unreliable Indicators for LLM Knowledge".
Option indices are 0-based (0 = "A").
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.answers import normalize_answer

FREE_GENERATION_SAMPLES = 20  # 004 sec. 2.4: 20 samples per question ...
FREE_GENERATION_TEMPERATURE = 1.0  # ... at T = 1
DEFAULT_ALIGNMENT_BINS = 10


def _int_array(values: np.ndarray | Sequence[int], name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise WhiteboxError(f"{name} must be a 1-D array of option indices; got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise WhiteboxError(f"{name} must hold integer option indices (0 = first option)")
    return arr.astype(np.int64)


def _pair(
    pred: np.ndarray | Sequence[int], gold: np.ndarray | Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    p, g = _int_array(pred, "predictions"), _int_array(gold, "gold")
    if p.shape != g.shape:
        raise WhiteboxError(f"predictions ({p.shape[0]}) and gold ({g.shape[0]}) differ in length")
    if p.size == 0:
        raise WhiteboxError("need at least one item to score")
    return p, g


# --------------------------------------------------------------------------- paper 000


def accuracy(predictions: np.ndarray | Sequence[int], gold: np.ndarray | Sequence[int]) -> float:
    """Share of items whose predicted option equals the gold option."""
    p, g = _pair(predictions, gold)
    return float(np.mean(p == g))


def per_layer_accuracy(option_scores: np.ndarray, gold: np.ndarray | Sequence[int]) -> np.ndarray:
    """Accuracy of ``argmax_i`` per layer for ``[items, layers, options]`` scores, ``[layers]``.

    For the logit lens of 000 App. F eq. 6 (``P_l(d_i) = softmax(W_U · LN(h^(l)))_{d_i}``);
    the argmax of the logits equals the argmax of the softmax.
    """
    s = np.asarray(option_scores)
    if s.ndim != 3:
        raise WhiteboxError(f"option_scores must be [items, layers, options]; got {s.shape}")
    g = _int_array(gold, "gold")
    if g.shape[0] != s.shape[0]:
        raise WhiteboxError(f"gold has {g.shape[0]} items but option_scores has {s.shape[0]}")
    return (np.argmax(s, axis=-1) == g[:, None]).mean(axis=0)


def permutation_accuracy(
    predictions: np.ndarray | Sequence[int],
    gold: np.ndarray | Sequence[int],
    permuted_predictions: np.ndarray | Sequence[int],
    permuted_gold: np.ndarray | Sequence[int],
) -> float:
    """Permutation Accuracy ``PA = (1/N) Σ_i I_i · I_i^p`` (000 sec. 5.3, after Gupta et al. 2024).

    ``I_i``: correct on the original item; ``I_i^p``: correct on the same item after its
    option contents (not letters) were shuffled; ``permuted_gold`` is the index of
    the correct content in the shuffled item.
    """
    p, g = _pair(predictions, gold)
    pp, pg = _pair(permuted_predictions, permuted_gold)
    if p.shape != pp.shape:
        raise WhiteboxError("original and permuted runs must cover the same items in the same order")
    return float(np.mean((p == g) & (pp == pg)))


@dataclass(frozen=True)
class SelectionBias:
    """Selection bias of 000 App. J (Fig. 28, Table 3).

    ``prediction_distribution[i]``: share of all predictions that are letter ``i``.
    ``recall[i]``: accuracy on the items whose gold letter is ``i`` (NaN if none).
    ``recall_std``: population standard deviation of ``recall`` over the letters that
    occur as gold — the RStd of Zheng et al. 2024; 0 means no selection bias.
    """

    prediction_distribution: np.ndarray
    recall: np.ndarray
    gold_counts: np.ndarray
    recall_std: float


def selection_bias(
    predictions: np.ndarray | Sequence[int], gold: np.ndarray | Sequence[int], n_options: int
) -> SelectionBias:
    """Prediction distribution, per-gold-letter recall and their spread (000 App. J)."""
    p, g = _pair(predictions, gold)
    if p.max() >= n_options or g.max() >= n_options or min(p.min(), g.min()) < 0:
        raise WhiteboxError(f"option indices must lie in [0, {n_options - 1}]")
    dist = np.bincount(p, minlength=n_options) / p.size
    gold_counts = np.bincount(g, minlength=n_options)
    hits = np.bincount(g[p == g], minlength=n_options)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(gold_counts > 0, hits / np.maximum(gold_counts, 1), np.nan)
    present = recall[gold_counts > 0]
    return SelectionBias(
        prediction_distribution=dist,
        recall=recall,
        gold_counts=gold_counts,
        recall_std=float(np.std(present)),
    )


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
    g = _int_array(gold, "gold")
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


# ------------------------------------------------------------ paper 004: generation side

_NUMBER = re.compile(r"[-\u2212]?\d+(?:,\d{3})*(?:\.\d+)?")


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


def first_number(text: str) -> int | float | None:
    """The first number in a generation (004 sec. 2.4.1, arithmetic), or None.

    Accepts a leading ``-`` (or Unicode minus), thousands separators ``6,237`` and a
    decimal part; integral values come back as ``int``.
    """
    m = _NUMBER.search(text)
    return None if m is None else _as_number(m.group(0))


def _as_number(s: str) -> int | float:
    s = s.replace("\u2212", "-").replace(",", "")
    if "." in s:
        v = float(s)
        return int(v) if v.is_integer() else v
    return int(s)


#: Answer extraction rules for arithmetic: ``paper`` is 004 sec. 2.4.1 ("take the first
#: number"); the stricter ones read "9 + 2 = 11" as 11: ``last-number`` takes the last
#: number of the (one-line) answer, ``after-equals`` the first number after its last
#: ``=`` (the paper's rule when there is no ``=``).
EXTRACTORS = ("paper", "last-number", "after-equals")


def extract_number(text: str, rule: str = "paper") -> int | float | None:
    """The answer number of a generation under one of EXTRACTORS, or None."""
    if rule == "paper":
        return first_number(text)
    if rule == "last-number":
        found = _NUMBER.findall(text)
        return _as_number(found[-1]) if found else None
    if rule == "after-equals":
        return first_number(text.rsplit("=", 1)[-1])
    raise WhiteboxError(f"unknown answer extraction rule {rule!r}; choose one of {', '.join(EXTRACTORS)}")


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


# --------------------------------------------------------------------------- mixed option counts


def chance_accuracy(option_counts: np.ndarray | Sequence[int]) -> float:
    """Expected accuracy of a uniform random pick: the mean of ``1 / n_i`` over the items."""
    counts = np.asarray(option_counts, dtype=np.float64)
    if counts.size == 0 or np.any(counts < 1):
        raise WhiteboxError("chance needs at least one item, each with at least one option")
    if np.all(counts == counts[0]):
        return 1.0 / counts[0]  # exactly 1 / n for one count
    return float(np.mean(1.0 / counts))


def by_option_count(option_counts: np.ndarray | Sequence[int],
                    correct: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, dict]:
    """Per number of options ``n``: its items, chance ``1 / n`` and each method's accuracy on
    that method's items with ``n`` options. ``correct``: name -> (item indices, 0/1 per
    index), e.g. the baseline on every item and a selected head on the test items."""
    counts = np.asarray(option_counts, dtype=np.int64)
    table: dict[str, dict] = {}
    for n in sorted(set(counts.tolist())):
        row: dict = {"n_items": int((counts == n).sum()), "chance": 1.0 / n}
        for name, (items, hits) in correct.items():
            mask = counts[np.asarray(items, dtype=np.int64)] == n
            row[f"{name}_n"] = int(mask.sum())
            row[name] = float(np.asarray(hits)[mask].mean()) if mask.any() else None
        table[str(n)] = row
    return table
