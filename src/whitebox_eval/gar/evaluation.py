"""Scoring GAR examples: the App. C correctness rule, grouped accuracies, the
compositionality gap (sec. 3) and a plot like the paper's fig. 2.

App. C: a model answers correctly when the probability of the target's first token
"exceeds the average probability of the alternative answers (33.3% for generation
tasks and 50% for classification tasks)".  The parenthesis gives the threshold as
chance level, ``1 / number of alternatives``; ``rule="chance"`` (default) uses that,
``rule="mean"`` compares with the mean of the given alternatives' probabilities
(the two agree when the probabilities are renormalised over the alternatives).

Compositionality gap (sec. 3, fig. 2c): sub-problems are the simple knowledge-recall
tasks with non-same relations (n_KV = 0) and the n_r = 0 (same, same) generation
tasks, affirmative and negative; the gap is the ratio of the sub-problems' average
accuracy to the average accuracy of the n_r = 2 generation tasks.  "Average" is a
macro average over tasks here (our choice: each task weighs the same, as in the
paper's per-task plots); ``average="example"`` pools examples instead.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Callable, Hashable, Mapping, Sequence

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.generator import GARExample
from whitebox_eval.runs.png import save_pyplot

RULES = ("chance", "mean")


def appc_correct(target_prob: float, alternative_probs: Sequence[float],
                 rule: str = "chance") -> bool:
    """App. C: is the target's first-token probability above the alternatives' average?

    ``alternative_probs`` are the first-token probabilities of all alternatives
    (the target's included).  ``"chance"``: ``target_prob > 1 / len(alternative_probs)``
    (1/3 for generation with three candidates, 1/2 for Yes/No); ``"mean"``:
    ``target_prob > mean(alternative_probs)``.
    """
    if not alternative_probs:
        raise WhiteboxError("the App. C rule needs at least one alternative probability")
    if rule == "chance":
        return target_prob > 1.0 / len(alternative_probs)
    if rule == "mean":
        return target_prob > sum(alternative_probs) / len(alternative_probs)
    raise WhiteboxError(f"unknown App. C rule {rule!r}; use one of {RULES}")


def example_correct(example: GARExample, probs: Mapping[str, float],
                    rule: str = "chance") -> bool:
    """App. C rule for one example, ``probs`` mapping each alternative to its probability."""
    missing = [a for a in example.alternatives if a not in probs]
    if missing:
        raise WhiteboxError(f"probabilities are missing for alternatives {missing} of "
                            f"{example.task_id} #{example.index}")
    return appc_correct(probs[example.target], [probs[a] for a in example.alternatives], rule)


def argmax_correct(example: GARExample, probs: Mapping[str, float]) -> bool:
    """Plain accuracy: the target has strictly the highest probability of the alternatives."""
    missing = [a for a in example.alternatives if a not in probs]
    if missing:
        raise WhiteboxError(f"probabilities are missing for alternatives {missing}")
    best = max(probs[a] for a in example.alternatives if a != example.target) \
        if len(example.alternatives) > 1 else -math.inf
    return probs[example.target] > best


def accuracy(correct: Sequence[bool]) -> float:
    """Fraction correct; NaN for an empty sequence."""
    return sum(bool(c) for c in correct) / len(correct) if len(correct) else math.nan


def _check(examples: Sequence[GARExample], correct: Sequence[bool]) -> None:
    if len(examples) != len(correct):
        raise WhiteboxError(f"{len(examples)} examples but {len(correct)} correctness values; "
                            "give one per example")


def grouped_accuracy(examples: Sequence[GARExample], correct: Sequence[bool],
                     key: Callable[[GARExample], Hashable | None],
                     average: str = "task") -> dict[Hashable, float]:
    """Accuracy per ``key(example)`` (examples whose key is None are skipped).

    ``average="task"`` averages per-task accuracies; ``"example"`` pools examples.
    """
    _check(examples, correct)
    if average not in ("task", "example"):
        raise WhiteboxError(f"average must be 'task' or 'example' (got {average!r})")
    groups: dict[Hashable, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for ex, c in zip(examples, correct):
        k = key(ex)
        if k is not None:
            groups[k][ex.task_id].append(bool(c))
    out: dict[Hashable, float] = {}
    for k, by_task in groups.items():
        if average == "task":
            out[k] = sum(accuracy(v) for v in by_task.values()) / len(by_task)
        else:
            out[k] = accuracy([c for v in by_task.values() for c in v])
    return out


def accuracy_by_form(examples: Sequence[GARExample], correct: Sequence[bool],
                     average: str = "task") -> dict[str, float]:
    """Generation vs classification accuracy (fig. 2a); KR sub-problems are left out."""
    return grouped_accuracy(  # type: ignore[return-value]
        examples, correct,
        lambda e: None if e.task.is_kr else ("classification" if e.task.g2c else "generation"),
        average)


def accuracy_by_difficulty(examples: Sequence[GARExample], correct: Sequence[bool],
                           form: str = "generation",
                           average: str = "task") -> dict[tuple[int, bool], float]:
    """Accuracy per (n_r, negate) (fig. 2b), for ``form`` generation/classification/all."""
    if form not in ("generation", "classification", "all"):
        raise WhiteboxError("form must be 'generation', 'classification' or 'all'")

    def key(e: GARExample) -> tuple[int, bool] | None:
        if e.task.is_kr or (form == "generation" and e.task.g2c) or \
                (form == "classification" and not e.task.g2c):
            return None
        return (e.task.n_r, e.task.negate)
    return grouped_accuracy(examples, correct, key, average)  # type: ignore[return-value]


def accuracy_by_syntactic_variation(examples: Sequence[GARExample], correct: Sequence[bool],
                                    average: str = "task") -> dict[str, float]:
    """Accuracy per syntactic variation: none, swapQA, swapKV, swapQA,swapKV (fig. 2d)."""
    return grouped_accuracy(  # type: ignore[return-value]
        examples, correct, lambda e: None if e.task.is_kr else e.task.syntactic, average)


def kr_accuracy(examples: Sequence[GARExample], correct: Sequence[bool],
                average: str = "task") -> float:
    """Accuracy on the knowledge-recall sub-problems (n_KV = 0)."""
    acc = grouped_accuracy(examples, correct, lambda e: "kr" if e.task.is_kr else None, average)
    return acc.get("kr", math.nan)


def compositionality_gap(examples: Sequence[GARExample], correct: Sequence[bool],
                         average: str = "task") -> float:
    """Sub-problem accuracy / n_r = 2 generation accuracy (sec. 3, fig. 2c).

    Sub-problems: the KR tasks among ``examples`` (if any) and the n_r = 0 generation
    tasks, affirmative and negative.  Returns ``inf`` when n_r = 2 accuracy is 0.
    """
    _check(examples, correct)

    def sub(e: GARExample) -> str | None:
        if e.task.is_kr or (not e.task.g2c and e.task.n_r == 0):
            return "sub"
        if not e.task.g2c and e.task.n_r == 2:
            return "hard"
        return None
    acc = grouped_accuracy(examples, correct, sub, average)
    if "sub" not in acc or "hard" not in acc:
        raise WhiteboxError("the compositionality gap needs n_r = 0 (or KR) and n_r = 2 "
                            "generation examples")
    return math.inf if acc["hard"] == 0 else acc["sub"] / acc["hard"]


def plot_gar_summary(runs: Mapping[str, tuple[Sequence[GARExample], Sequence[bool]]],
                     path: str | Path, average: str = "task") -> Path:
    """A four-panel PNG like fig. 2: (a) generation / classification accuracy,
    (b) generation accuracy by difficulty (KR, n_r × negate), (c) compositionality gap,
    (d) accuracy by syntactic variation; one bar per model in ``runs``."""
    if not runs:
        raise WhiteboxError("plot_gar_summary needs at least one run")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(runs)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    width = 0.8 / len(models)

    def bars(ax, labels: list[str], values_per_model: list[list[float]], title: str) -> None:
        for m, values in enumerate(values_per_model):
            xs = [i + m * width for i in range(len(labels))]
            ax.bar(xs, [v if math.isfinite(v) else 0.0 for v in values], width, label=models[m])
        ax.set_xticks([i + width * (len(models) - 1) / 2 for i in range(len(labels))])
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)

    forms = ["generation", "classification"]
    bars(axes[0], forms, [[accuracy_by_form(*runs[m], average).get(f, math.nan) for f in forms]
                          for m in models], "(a) accuracy")
    axes[0].set_ylim(0, 1)
    diff_keys = [(0, False), (1, False), (2, False), (0, True), (1, True), (2, True)]
    diff_labels = ["KR"] + [f"n_r={n}{' neg' if neg else ''}" for n, neg in diff_keys]
    diff_vals = []
    for m in models:
        by = accuracy_by_difficulty(*runs[m], average=average)
        diff_vals.append([kr_accuracy(*runs[m], average)] + [by.get(k, math.nan)
                                                             for k in diff_keys])
    bars(axes[1], diff_labels, diff_vals, "(b) generation accuracy by difficulty")
    axes[1].set_ylim(0, 1)
    gaps = []
    for m in models:
        try:
            gaps.append(compositionality_gap(*runs[m], average))
        except WhiteboxError:
            gaps.append(math.nan)
    bars(axes[2], ["gap"], [[g] for g in gaps], "(c) compositionality gap")
    syn = ["none", "swapQA", "swapKV", "swapQA,swapKV"]
    bars(axes[3], syn, [[accuracy_by_syntactic_variation(*runs[m], average).get(s, math.nan)
                         for s in syn] for m in models], "(d) syntactic variations")
    axes[3].set_ylim(0, 1)
    axes[0].legend(fontsize=8)
    return save_pyplot(fig, path, dpi=100)


#: the words that start a phrase, not an answer (GAR's answers are names, places, kinds, occupations)
ARTICLES = ("a", "an", "the")


def off_format(top_token: str | None) -> bool:
    """Off-format: the top next token starts no answer at all -- it holds no letter or digit
    (whitespace, a newline, punctuation), is a special token (``<...>``, ``<|...|>``), or is an
    article (:data:`ARTICLES`), which opens a phrase rather than naming an answer. Such an output is
    no error of App. C's classes (a synonym, a wrong candidate, an irrelevant answer)."""
    if top_token is None:
        return False
    text = top_token.strip()
    return (not re.search(r"[^\W_]", text) or bool(re.fullmatch(r"<\|?[^<>\s]*\|?>", text))
            or text.lower() in ARTICLES)


def error_class_of(sample) -> str | None:
    """A sample's error class as :func:`whitebox_eval.gar.scoring.error_class` gives it now: a run written before the
    off-format class kept its top token, so its ``off_candidates`` is split by :func:`off_format`."""
    cls = sample.get("error_class")
    return "off_format" if cls == "off_candidates" and off_format(sample.get("top_token")) else cls


def error_analysis(examples: Sequence[GARExample], records: Mapping[str, Mapping], *, top: int = 10) -> dict | None:
    """App. C error analysis over the generation examples (not KR) that the model gets
    wrong by its top next token over the whole vocabulary (``error_class`` of
    :func:`whitebox_eval.gar.scoring.error_class`). Off-format outputs (no answer at all:
    :func:`off_format`) are counted in their own class, ``share,off_format``
    of every wrong output, never folded into an error class; the errors (``n_errors``) are the
    rest: how many put a wrong candidate first (class 2) and how many none of the candidates
    (class 1 synonym or class 3 irrelevant, told apart only by reading ``off_candidate_tokens``),
    with Wilson intervals. The paper labels 100 sampled errors by hand; here every error is
    counted. None when no record has an error class (runs written before it existed)."""
    from whitebox_eval import stats

    gen = [records[f"{e.task_id}#{e.index}"] for e in examples if not e.task.is_kr and not e.task.g2c]
    if not gen or any(r.get("error_class") is None for r in gen):
        return None
    wrong = [{**r, "error_class": error_class_of(r)} for r in gen if r["error_class"] != "target"]
    errors = [r for r in wrong if r["error_class"] != "off_format"]
    out: dict = {"n_generation": len(gen), "n_wrong": len(wrong), "n_off_format": len(wrong) - len(errors),
                 "n_errors": len(errors)}
    if wrong:
        stats.add_proportion(out, "share,off_format", [r["error_class"] == "off_format" for r in wrong])
    if errors:
        for cls, name in (("other_candidate", "class2_wrong_candidate"), ("off_candidates", "class1or3_off_candidates")):
            stats.add_proportion(out, f"share,{name}", [r["error_class"] == cls for r in errors])
    for cls, key in (("off_candidates", "off_candidate_tokens"), ("off_format", "off_format_tokens")):
        counts: dict[str, int] = defaultdict(int)
        for r in wrong:
            if r["error_class"] == cls:
                counts[r["top_token"]] += 1
        out[key] = [{"token": t, "count": c} for t, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    return out
