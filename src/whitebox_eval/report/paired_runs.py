"""Runs compared item by item: for two runs over the same items (an edited run and its
unedited twin is the main case), every per-item metric both runs record, the paired
difference with its interval and test, n, and the items that flip.

A per-item metric is read from each samples.jsonl line as the run wrote it:

* a top-level number or boolean that is not an identifier or a count (``acc,baseline``
  in lm-eval's ``metric,filter`` form, ``correct``, ``accuracy``, ``answer_logprob`` ...),
  and the numbers one level inside a dict of numbers (``p_correct.mcq``);
* where a line holds neither an lm-eval per-sample metric nor ``correct``, each scorer's
  correctness as the report reads it (:func:`~whitebox_eval.report.samples.scorers_of`:
  ``correct[qk head]`` ...);
* a line with a ``split`` (mcqa's val/test) names it, ``acc,qk_head [test]``: the split a
  head was chosen on is never pooled with the one it is reported on.

A metric whose values are all 0/1 on both sides gets the exact McNemar test and its
agreeing interval (``stats.paired.mcnemar``); any other gets the paired bootstrap
(``stats.paired.paired_bootstrap``, 10,000 resamples, seed 0). The difference is later
run minus first run (B - A). Items pair by their ``id``; ids present on one side only
are counted and left out, and a run whose ids repeat cannot be paired (named).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.report.samples import scorers_of
from whitebox_eval.stats.paired import PairedTest, mcnemar, paired_bootstrap

#: integer or identifier fields that are not per-item outcomes
NOT_METRICS = frozenset({"id", "gold", "doc_id", "n_options", "n_tokens", "n_prompt_tokens", "n_response_tokens",
                         "index", "draw", "k", "n_masked", "prompt_tokens_from", "answer", "label", "target",
                         "split", "seed", "position", "length", "n_key_units"})
FLIPS_SHOWN = 10


@dataclass
class PairedMetric:
    """One per-item metric of two runs on their shared items."""

    metric: str
    test: PairedTest
    mean_a: float
    mean_b: float
    gained: list[str] = field(default_factory=list)  # binary: 0 in A, 1 in B
    lost: list[str] = field(default_factory=list)  # binary: 1 in A, 0 in B

    @property
    def binary(self) -> bool:
        return self.test.test == "mcnemar_exact"


@dataclass
class PairedComparison:
    """Run B against run A item by item."""

    label_a: str
    label_b: str
    n_shared: int
    only_a: int
    only_b: int
    metrics: list[PairedMetric]
    notes: list[str] = field(default_factory=list)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def item_metrics(sample: Mapping[str, Any]) -> dict[str, float]:
    """The per-item metrics of one samples.jsonl line (see the module docstring)."""
    out: dict[str, float] = {}
    for key, value in sample.items():
        if key in NOT_METRICS or key.startswith(("pred_", "n_")) or key.endswith(("_hash", "_id")):
            continue
        if isinstance(value, bool):
            out[key] = float(value)
        elif isinstance(value, float) and math.isfinite(value):
            out[key] = value
        elif isinstance(value, Mapping) and value and all(_is_number(v) or isinstance(v, bool)
                                                          for v in value.values()):
            out.update({f"{key}.{k}": float(v) for k, v in value.items()})
    if not any("," in k for k in out) and "correct" not in out:
        for scorer in scorers_of(sample):
            if isinstance(scorer.correct, bool):
                out.setdefault(f"correct[{_scorer_name(scorer.name)}]", float(scorer.correct))
    split = sample.get("split")
    if isinstance(split, str) and split:  # heads chosen on val are reported on test: never pooled
        out = {f"{k} [{split}]": v for k, v in out.items()}
    return out


def _scorer_name(name: str) -> str:
    """``qk head L14H0`` -> ``qk head``: runs may pick different heads; the method pairs."""
    parts = name.split()
    return " ".join(parts[:-1]) if len(parts) > 1 and parts[-1].startswith("L") and "H" in parts[-1] else name


def _by_id(samples: Iterable[Mapping[str, Any]], label: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for s in samples:
        if "id" not in s:
            continue
        key = str(s["id"])
        if key in out:
            raise WhiteboxError(f"run {label} holds item id {key!r} twice: its items cannot be paired by id")
        out[key] = item_metrics(s)
    return out


def paired_comparison(samples_a: Iterable[Mapping[str, Any]], samples_b: Iterable[Mapping[str, Any]],
                      label_a: str = "A", label_b: str = "B") -> PairedComparison:
    """Every metric both runs record per item, B - A on the items both hold."""
    samples_a, samples_b = list(samples_a), list(samples_b)
    a, b = _by_id(samples_a, label_a), _by_id(samples_b, label_b)
    shared = [i for i in a if i in b]
    notes = []
    metrics: list[PairedMetric] = []
    names = list(dict.fromkeys(k for i in shared for k in (*a[i], *b[i])))
    for name in names:
        ids = [i for i in shared if name in a[i] and name in b[i]]
        one_side = sum((name in a[i]) != (name in b[i]) for i in shared)
        if len(ids) < 2:
            continue
        x = np.array([a[i][name] for i in ids])
        y = np.array([b[i][name] for i in ids])
        binary = bool(np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all())
        test = mcnemar(y, x) if binary else paired_bootstrap(y, x)
        m = PairedMetric(name, test, float(x.mean()), float(y.mean()))
        if binary:
            m.gained = [i for i, p, q in zip(ids, x, y) if p == 0 and q == 1]
            m.lost = [i for i, p, q in zip(ids, x, y) if p == 1 and q == 0]
        if one_side:
            notes.append(f"{name}: {one_side} shared items hold it on one side only (left out)")
        metrics.append(m)
    if not shared:
        notes.append(f"{label_a} and {label_b} share no item id: nothing to pair")
    for method, (head_a, head_b) in _chosen_heads(samples_a, samples_b).items():
        if head_a != head_b:
            notes.append(f"{method}: {label_a} chose head {head_a}, {label_b} chose {head_b}: its rows pair two "
                         "different heads' answers")
    return PairedComparison(label_a, label_b, len(shared), len(a) - len(shared), len(b) - len(shared),
                            metrics, notes)


def _chosen_heads(samples_a, samples_b) -> dict[str, tuple[str, str]]:
    """Each ``<method>_head`` record's head in each run (the first line's: a study picks one)."""
    def heads(samples):
        out: dict[str, str] = {}
        for s in samples:
            for key, value in s.items():
                if key.endswith("_head") and isinstance(value, Mapping) and isinstance(value.get("head"), list):
                    out.setdefault(key, "L{}H{}".format(*value["head"][:2]))
        return out
    ha, hb = heads(samples_a), heads(samples_b)
    return {k: (ha[k], hb[k]) for k in ha if k in hb}


def _fmt(x: float) -> str:
    return f"{x:+.4f}" if abs(x) < 10 else f"{x:+.4g}"


def format_p(p: float) -> str:
    """A p-value to six significant digits (an exact McNemar p such as 0.03125 shows in full);
    ``compare --json`` holds it unrounded."""
    return f"{p:.6g}"


def paired_lines(cmp: PairedComparison) -> list[str]:
    """The section ``compare`` prints after its table."""
    head = (f"paired, {cmp.label_b} - {cmp.label_a} on the {cmp.n_shared} items both hold"
            + (f" ({cmp.only_a} only in {cmp.label_a}, {cmp.only_b} only in {cmp.label_b}, left out)"
               if cmp.only_a or cmp.only_b else ""))
    lines = [head]
    if not cmp.metrics:
        return lines + [f"  {n}" for n in cmp.notes or ["no per-item metric on both sides"]]
    rows = [["metric", cmp.label_a, cmp.label_b, "diff", "95% interval", "p", "test", "n", "flips +/-"]]
    for m in cmp.metrics:
        t = m.test
        rows.append([m.metric, f"{m.mean_a:.4g}", f"{m.mean_b:.4g}", _fmt(t.diff), f"[{_fmt(t.lo)}, {_fmt(t.hi)}]",
                     format_p(t.p_value), "exact McNemar" if m.binary else "paired bootstrap", str(t.n),
                     f"{len(m.gained)}/{len(m.lost)}" if m.binary else ""])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, r in enumerate(rows):
        lines.append("  " + "  ".join(f"{v:<{w}}" if i == 0 or i == 6 else f"{v:>{w}}"
                                      for i, (v, w) in enumerate(zip(r, widths))).rstrip())
        if n == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    for m in cmp.metrics:
        for what, ids in (("right only in " + cmp.label_b, m.gained), ("right only in " + cmp.label_a, m.lost)):
            if ids:
                more = f" (+{len(ids) - FLIPS_SHOWN} more)" if len(ids) > FLIPS_SHOWN else ""
                lines.append(f"  {m.metric}: {what}: {', '.join(ids[:FLIPS_SHOWN])}{more}")
    lines += [f"  note: {n}" for n in cmp.notes]
    return lines
