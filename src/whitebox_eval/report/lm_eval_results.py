"""lm-evaluation-harness results files (``results_<date>.json`` from ``lm_eval --output_path``),
read for ``whitebox-eval compare`` and mapped onto our tasks and metrics.

lm-eval 0.4.13 writes ``{"results": {task: {"alias", "acc,none", "acc_stderr,none", ...}},
"n-samples": {task: {"original", "effective"}}, "group_subtasks", "configs", "versions",
"n-shot", "config": {"model", "model_args", ...}, "lm_eval_version", ...}`` under
``OUTPUT_PATH/<model_name_sanitized>/``. Matching (lm-eval's task YAMLs):

- ``hellaswag``, ``arc_challenge``, ``arc_easy`` score every option text as a
  continuation (``output_type: multiple_choice`` over the endings / answer texts): their
  ``acc,none`` / ``acc_norm,none`` are our ``acc,cloze`` / ``acc_norm,cloze``.
- ``mmlu`` and its 57 ``mmlu_<subject>`` tasks score the letters ``A``..``D`` after
  ``Answer:``: ``acc,none`` is our ``acc,baseline``. Without the ``mmlu`` group entry
  (subjects run one by one) the subjects are pooled as lm-eval's group does
  (``weight_by_size: True``): the n-weighted mean and the pooled standard error
  (``lm_eval.api.metrics.pooled_sample_stderr``).

Intervals are lm-eval's normal approximation, value +- 1.96 stderr (clipped to [0, 1]).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError

Z = 1.959963984540054
"""The standard normal 97.5% quantile: a 95% normal-approximation interval is value +- Z stderr."""

INTERVAL_METHOD = "normal-approx"

MMLU_SUBJECTS = frozenset("""
abstract_algebra anatomy astronomy business_ethics clinical_knowledge college_biology college_chemistry
college_computer_science college_mathematics college_medicine college_physics computer_security
conceptual_physics econometrics electrical_engineering elementary_mathematics formal_logic global_facts
high_school_biology high_school_chemistry high_school_computer_science high_school_european_history
high_school_geography high_school_government_and_politics high_school_macroeconomics high_school_mathematics
high_school_microeconomics high_school_physics high_school_psychology high_school_statistics
high_school_us_history high_school_world_history human_aging human_sexuality international_law jurisprudence
logical_fallacies machine_learning management marketing medical_genetics miscellaneous moral_disputes
moral_scenarios nutrition philosophy prehistory professional_accounting professional_law professional_medicine
professional_psychology public_relations security_studies sociology us_foreign_policy virology
world_religions""".split())
"""lm-eval's ``mmlu_<subject>`` tasks (``lm_eval/tasks/mmlu/default``), the hendrycks subjects."""

MMLU_CATEGORIES = frozenset({"mmlu_stem", "mmlu_other", "mmlu_social_sciences", "mmlu_humanities"})
"""The ``mmlu`` group's sub-groups (folded into the one ``mmlu`` row)."""

CLOZE_TASKS = ("hellaswag", "arc_challenge", "arc_easy")
METRIC_MAP = {"cloze": {"acc,none": "acc,cloze", "acc_norm,none": "acc_norm,cloze"},
              "letter": {"acc,none": "acc,baseline"}}
"""lm-eval metric -> our headline metric, by how the task scores an answer."""

MAPPING_NOTE = ("lm-eval's acc,none / acc_norm,none on hellaswag and arc_* score each option text as a continuation "
                "(our acc,cloze / acc_norm,cloze); on mmlu its acc,none scores the answer letter (our acc,baseline)")

_NOT_METRICS = {"alias", "name", "sample_len", "sample_count"}


@dataclass
class LMEvalFile:
    """One lm-eval results file."""

    path: Path
    data: dict[str, Any]

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.data["results"].items() if isinstance(v, Mapping)}

    @property
    def version(self) -> str | None:
        value = self.data.get("lm_eval_version")
        return None if value is None else str(value)

    @property
    def model(self) -> str | None:
        config = self.data.get("config") if isinstance(self.data.get("config"), Mapping) else {}
        args = config.get("model_args")
        if isinstance(args, Mapping) and args.get("pretrained"):
            return str(args["pretrained"])
        if isinstance(args, str) and "pretrained=" in args:
            return args.split("pretrained=", 1)[1].split(",", 1)[0]
        for value in (self.data.get("model_name"), config.get("model")):
            if value:
                return str(value)
        return None

    def n(self, task: str) -> int | None:
        """Documents evaluated for ``task`` (``n-samples`` effective, else ``sample_len``)."""
        counts = self.data.get("n-samples")
        if isinstance(counts, Mapping) and isinstance(counts.get(task), Mapping):
            value = counts[task].get("effective")
            if _number(value):
                return int(value)
        value = self.results.get(task, {}).get("sample_len")
        return int(value) if _number(value) else None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def looks_like_lm_eval(data: Any) -> bool:
    """Whether parsed JSON is an lm-eval results dict (not our results.json)."""
    return isinstance(data, Mapping) and isinstance(data.get("results"), Mapping) and "headline" not in data and \
        any(k in data for k in ("versions", "n-samples", "configs", "lm_eval_version"))


def load_lm_eval_file(path: str | Path) -> LMEvalFile:
    """Read one results file; a file that is not one raises in one line."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WhiteboxError(f"cannot read {path} as an lm-eval results file ({exc}); give the results_*.json "
                            "that lm_eval --output_path wrote") from None
    if not looks_like_lm_eval(data):
        raise WhiteboxError(f"{path} is not an lm-eval results file (no 'results' with 'versions' / 'n-samples'); "
                            "give the results_*.json that lm_eval --output_path wrote, or a run folder")
    return LMEvalFile(path, data)


def find_results_files(folder: str | Path) -> list[Path]:
    """The ``results_*.json`` files under ``folder`` (lm-eval nests them under a model-name
    folder), oldest name first; [] when there are none."""
    return sorted(Path(folder).rglob("results_*.json"), key=lambda p: (str(p.parent), p.name))


PROPORTIONS = ("acc", "acc_norm", "exact_match", "pa")
"""Metrics that are shares of items: their intervals are clipped to [0, 1]."""


def _estimate(value: Any, stderr: Any, n: int | None, metric: str = "acc") -> tuple[float, dict | None]:
    if not _number(stderr):  # lm-eval writes "N/A" when it has none
        return float(value), None
    lo, hi = value - Z * stderr, value + Z * stderr
    if metric in PROPORTIONS:
        lo, hi = max(0.0, lo), min(1.0, hi)
    return float(value), {"lo": lo, "hi": hi, "n": n, "method": INTERVAL_METHOD, "stderr": float(stderr)}


def pooled(values: list[float], stderrs: list[float], sizes: list[int]) -> tuple[float, float]:
    """lm-eval's group aggregate with ``weight_by_size``: the n-weighted mean and
    ``pooled_sample_stderr`` = sqrt(sum((n_i - 1) n_i se_i^2) / (N - k) / N)."""
    total = sum(sizes)
    mean = sum(v * n for v, n in zip(values, sizes)) / total
    var = sum((n - 1) * se * se * n for se, n in zip(stderrs, sizes)) / (total - len(sizes))
    return mean, math.sqrt(var / total)


def _mmlu(f: LMEvalFile, subjects: set[str] | None = None) -> tuple[dict[str, tuple[float, dict | None]], str | None]:
    """Our ``acc,baseline`` on MMLU: pooled over ``subjects`` (the subjects our runs
    evaluated) when the file has each of them, else the group entry, else pooled over
    every subject the file has."""
    res = f.results
    group = res.get("mmlu", {})
    have = {t[5:] for t in res if t.startswith("mmlu_") and t[5:] in MMLU_SUBJECTS and _number(res[t].get("acc,none"))}
    if subjects and subjects <= have and subjects != have:
        rows, pool_note = _pool(f, sorted(f"mmlu_{s}" for s in subjects))
        if not rows:
            return rows, pool_note
        if len(subjects) == 1:
            return rows, f"{f.path.name}: mmlu = its mmlu_{next(iter(subjects))}, the one subject the runs evaluated"
        return rows, (f"{f.path.name}: mmlu = its {len(subjects)} subject tasks the runs evaluated, pooled as "
                      "lm-eval's group pools them (n-weighted mean, pooled stderr)")
    note = None
    if subjects and not subjects <= have:
        missing = sorted(subjects - have)
        note = (f"{f.path.name} lacks {len(missing)} subject(s) the runs evaluated ({', '.join(missing[:5])}"
                f"{', ...' if len(missing) > 5 else ''}): its mmlu row covers other items")
    if _number(group.get("acc,none")):
        n = f.n("mmlu")
        if n is None:
            leaves = [t for t in res if t.startswith("mmlu_") and t[5:] in MMLU_SUBJECTS]
            ns = [f.n(t) for t in leaves]
            n = sum(ns) if leaves and None not in ns else None
        return {"acc,baseline": _estimate(group["acc,none"], group.get("acc_stderr,none"), n)}, note
    if not have:
        return {}, None
    rows, pooled_note = _pool(f, sorted(f"mmlu_{s}" for s in have))
    return rows, note or pooled_note


def _pool(f: LMEvalFile, leaves: list[str]) -> tuple[dict[str, tuple[float, dict | None]], str | None]:
    """The subject tasks ``leaves`` pooled as lm-eval's ``mmlu`` group pools them."""
    res = f.results
    sizes = [f.n(t) for t in leaves]
    stderrs = [res[t].get("acc_stderr,none") for t in leaves]
    if None in sizes:
        return {}, f"{f.path.name}: its mmlu subjects give no sample counts (n-samples), so they cannot be pooled"
    values = [float(res[t]["acc,none"]) for t in leaves]
    if len(leaves) == 1:
        return {"acc,baseline": _estimate(values[0], stderrs[0], sizes[0])}, None
    if all(_number(s) for s in stderrs) and sum(sizes) > len(sizes):
        mean, se = pooled(values, stderrs, sizes)
    else:
        mean, se = sum(v * n for v, n in zip(values, sizes)) / sum(sizes), None
    note = (f"{f.path.name}: mmlu = the n-weighted mean of its {len(leaves)} subject tasks, pooled stderr "
            "(lm-eval's group rule, weight_by_size)")
    return {"acc,baseline": _estimate(mean, se, sum(sizes))}, note


def lm_eval_rows(f: LMEvalFile, mmlu_subjects: set[str] | None = None
                 ) -> tuple[dict[tuple[str, str], tuple[float, dict | None]], list[str]]:
    """``{(task, metric): (value, interval)}`` of a results file in our names, and notes.

    Tasks we know (:data:`CLOZE_TASKS`, MMLU) get our metric names; any other task keeps
    lm-eval's task and ``metric,filter`` names. MMLU's subject and category entries fold
    into one ``mmlu`` row (over ``mmlu_subjects`` when given and all present).
    """
    rows: dict[tuple[str, str], tuple[float, dict | None]] = {}
    notes: list[str] = []
    mmlu, note = _mmlu(f, mmlu_subjects)
    rows.update({("mmlu", k): v for k, v in mmlu.items()})
    if note:
        notes.append(note)
    groups = f.data.get("group_subtasks") if isinstance(f.data.get("group_subtasks"), Mapping) else {}
    mmlu_parts = set(groups.get("mmlu", [])) | {c for g in groups.get("mmlu", []) for c in groups.get(g, [])}
    for task, entry in f.results.items():
        if task == "mmlu" or task in mmlu_parts or task in MMLU_CATEGORIES or \
                (task.startswith("mmlu_") and task[5:] in MMLU_SUBJECTS):
            continue
        mapping = METRIC_MAP["cloze"] if task in CLOZE_TASKS else None
        for key, value in entry.items():
            name, sep, filt = key.partition(",")
            if key in _NOT_METRICS or not sep or name.endswith("_stderr") or not _number(value):
                continue
            ours = mapping.get(key, key) if mapping else key
            rows[(task, ours)] = _estimate(value, entry.get(f"{name}_stderr,{filt}"), f.n(task), name)
    return rows, notes
