"""Comparing checkpoints and fitting the Utility Law over runs (paper 001 sec. 3.2-3.4, Corollaries 1-2).

* :func:`compare_checkpoints`: the regression test of Corollary 1. Two checkpoints of a
  model (before / after some training) are run on the same tasks with the same
  settings; the move of each task's (performance, MUI) point is classified as
  evolving, accumulating, coarsening or collapsing (sec. 3.3, fig. 4). An increase of
  MUI on a fixed dataset may signal degraded unseen abilities; a contaminated task
  typically moves up in both (sec. 3.4).
* :func:`fit_runs`: the Utility Law ``MUI = A ln(P) + B`` fitted over the (accuracy %,
  MUI %) points of finished runs (several models or checkpoints), with R^2 and the plot
  of fig. 2-3. Runs with zero accuracy cannot enter a logarithmic fit and are skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.statistics import jackknife_mui_difference
from whitebox_eval.tasks.spec import TaskSpec
from whitebox_eval.mui.finished import Finished, finished, load_key_sets, run_point
from whitebox_eval.mui.study import MUIConfig, run_mui
from whitebox_eval.mui.utility_law import Direction, UtilityLawFit, classify_direction, fit_utility_law
from whitebox_eval.runs import RunFolder


@dataclass(frozen=True)
class TaskComparison:
    """One task's move from the ``before`` checkpoint to ``after`` (percent units)."""

    task: str
    before: tuple[float, float]  # (accuracy %, MUI %)
    after: tuple[float, float]
    direction: Direction
    before_run: str
    after_run: str
    accuracy_test: dict | None = None  # exact McNemar on the same items (after vs before)
    mui_test: dict | None = None  # paired jackknife of MUI(after) - MUI(before), fractions

    def verdicts(self) -> list[str]:
        """Sentences for the summary: is each move larger than chance on these items?"""
        out = []
        if self.accuracy_test:
            out.append(stats.verdict(self.accuracy_test, f"{self.task}: accuracy after minus before"))
        if self.mui_test:
            t = dict(self.mui_test)
            for k in ("diff", "lo", "hi"):
                t[k] = 100 * t[k]
            out.append(stats.verdict(t, f"{self.task}: MUI after minus before (points)"))
        return out

    @property
    def delta_performance(self) -> float:
        return self.after[0] - self.before[0]

    @property
    def delta_mui(self) -> float:
        return self.after[1] - self.before[1]


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return s[-60:] or "run"


def checkpoint_run_id(model: str, task: str, limit) -> str:
    """Run id of one checkpoint's run: its folder's last name plus a hash of the full path, so
    ``/ckpts/base/model`` and ``/ckpts/tuned/model`` never share a run folder."""
    p = Path(model).expanduser()
    full = str(p.resolve()) if p.exists() else model
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return _slug(f"mui-{p.name}-{digest}-{TaskSpec.parse(task).label}-{limit}")


def compare_checkpoints(
    before: str, after: str, tasks: Sequence[str], base: MUIConfig, output: str | Path = "runs", *,
    tol_performance: float = 0.0, tol_mui: float = 0.0, loaded_before=None, loaded_after=None,
    show_progress: bool | None = None,
) -> list[TaskComparison]:
    """Run both checkpoints on every task (runs are reused with --resume semantics) and classify each move.

    ``base`` carries every setting but the model and task; ``tol_*`` (percentage points)
    make a smaller change ``undetermined``.
    """
    if not tasks:
        raise WhiteboxError("give at least one --task to compare on")
    from whitebox_eval.models import load_model

    models = {0: loaded_before, 1: loaded_after}
    out: list[TaskComparison] = []
    for task in tasks:
        points, runs = [], []
        for which, model in enumerate((before, after)):
            cfg = dataclasses.replace(base, model=model, task=task)
            if models[which] is None:
                models[which] = load_model(model, dtype=cfg.dtype)
            loaded = models[which]
            run_id = checkpoint_run_id(model, task, cfg.limit)
            folder = run_mui(cfg, output, run_id=run_id, resume=True, loaded=loaded, show_progress=show_progress)
            points.append(run_point(folder))
            runs.append(str(folder.path))
        direction = classify_direction(points[0], points[1], tol_performance=tol_performance, tol_mui=tol_mui)
        acc_test, mui_test = paired_tests(runs[0], runs[1])
        out.append(TaskComparison(task, points[0], points[1], direction, runs[0], runs[1], acc_test, mui_test))
    return out


def paired_tests(before_run: str | Path, after_run: str | Path, ids: Sequence[str] | None = None) -> tuple[dict, dict]:
    """Exact McNemar of the per-item correctness and the paired jackknife of MUI, after vs before,
    on every item or on ``ids`` alone (e.g. contamination's tested half).

    Both runs hold the same items (same task, limit and seed), so the moves are paired by item.
    """
    a, b = RunFolder.open(before_run), RunFolder.open(after_run)
    ka, kb = load_key_sets(a), load_key_sets(b)
    ca = {str(s["id"]): bool(s["correct"]) for s in a.read_samples()}
    cb = {str(s["id"]): bool(s["correct"]) for s in b.read_samples()}
    if ka.sample_ids != kb.sample_ids:
        raise WhiteboxError(f"{a.path} and {b.path} hold different items; compare runs of the same task, limit and seed")
    if ids is not None:
        ka, kb = ka.subset(ka.positions(ids)), kb.subset(kb.positions(ids))
    acc = stats.mcnemar([cb[i] for i in kb.sample_ids], [ca[i] for i in ka.sample_ids])
    return acc.as_dict(), jackknife_mui_difference(ka, kb).as_dict()


def comparison_table(rows: Sequence[TaskComparison]) -> str:
    """A plain-text table of the per-task moves."""
    lines = [f"{'task':28s} {'acc before':>10s} {'acc after':>9s} {'MUI before':>10s} {'MUI after':>9s}  direction"]
    for r in rows:
        lines.append(f"{r.task[:28]:28s} {r.before[0]:9.1f}% {r.after[0]:8.1f}% {r.before[1]:9.3f}% {r.after[1]:8.3f}%  "
                     f"{r.direction.value}")
    return "\n".join(lines)


def _estimates(run: str | Path) -> dict:
    """A run's accuracy and MUI (fractions) with their intervals, as its results.json holds them."""
    res = RunFolder.open(run).load_results()
    keys = [k for name in ("accuracy", "mui") for k in (name, *(stats.derived_key(name, s) for s in stats.DERIVED_SUFFIXES))]
    return {k: res[k] for k in keys if k in res}


def save_comparison(rows: Sequence[TaskComparison], output: str | Path, *, before: str, after: str,
                    run_id: str | None = None) -> RunFolder:
    """Write a ``mui-compare`` run folder: results.json with every move and the arrow plot."""
    from whitebox_eval.mui.plots import plot_directions

    folder = RunFolder.create(output, {"suite": "mui-compare", "model": after, "before": before,
                                       "task": ",".join(r.task for r in rows)}, run_id=run_id)
    head: dict = {}  # per task: the direction, and the changes (fractions) with their paired intervals
    for r in rows:
        head[f"direction,{r.task}"] = r.direction.value
        if r.accuracy_test:
            stats.add_difference(head, f"accuracy_change,{r.task}", r.accuracy_test)
        if r.mui_test:
            stats.add_difference(head, f"mui_change,{r.task}", r.mui_test)
    folder.save_results({
        "before": before, "after": after,
        "tasks": {r.task: {"before": _estimates(r.before_run), "after": _estimates(r.after_run),
                           "direction": r.direction.value, "before_run": r.before_run, "after_run": r.after_run,
                           "paired_tests": {"accuracy_mcnemar": r.accuracy_test, "mui_jackknife": r.mui_test}}
                  for r in rows},
        "headline": head,
    })
    plot_directions({r.task: (r.before, r.after, r.direction.value) for r in rows}, folder.plot_path("directions"),
                    title=f"{Path(before).name} -> {Path(after).name}")
    return folder


LAW_SETTINGS: tuple[str, ...] = (
    "score", "activation", "final_norm", "response_level", "threshold", "threshold_value", "unit", "score_token",
    "ties", "ig_steps", "sae", "responses", "shots", "chat", "max_new_tokens", "limit",
)
"""config.yaml keys that change a run's MUI scale; runs fitted together must agree on them (and on n)."""


@dataclass
class LawFitResult:
    """The Utility Law fitted over runs, and the points that entered it."""

    fit: UtilityLawFit
    labels: list[str]
    performance: list[float]
    mui: list[float]
    skipped: list[str]
    mixed: list[str] = dataclasses.field(default_factory=list)


def _settings(run: Finished) -> dict:
    cfg = run.config
    out = {k: cfg.get(k, MUIConfig.defaults().get(k) if k != "unit" else "neuron") for k in LAW_SETTINGS}
    out["sae"] = sae_recipe(out["sae"], Path(run.path).parent.parent)
    out["n"] = run.results.get("n_items")  # MUI is a union: it grows with n
    return out


_NOT_RECIPE = ("_volatile", "created", "model", "placement", "python_version", "run_id", "torch_version",
               "transformers_version", "whitebox_eval_git_commit", "whitebox_eval_version")


def sae_recipe(entries, base: Path | None = None):
    """The ``sae`` setting as what makes SAE-based MUIs comparable across models: each model has
    its own SAE, so an SAE that ``whitebox-eval sae`` trained (its run folder) stands for its
    training recipe (width, k, layer, data, steps; not the model, the run id or the machine's
    paths); any other entry (a released SAE's id) stands as given. A relative entry is found from
    the working folder, else from ``base`` (a reproduction's folder, whose children name the SAE
    they read as ``runs/<sae run>``, so a checkpoint reassembled elsewhere still reads it)."""
    if not entries:
        return entries
    out = []
    for entry in entries:
        try:
            where = Path(str(entry))
            if base is not None and not where.is_absolute() and not where.exists():
                where = base / where
            cfg = RunFolder.open(where).config
        except (WhiteboxError, OSError, TypeError):
            cfg = {}
        if cfg.get("suite") != "sae":
            out.append(entry)
            continue
        recipe = {k: v for k, v in cfg.items() if k not in _NOT_RECIPE}
        recipe["text"] = [Path(str(t)).name for t in recipe.get("text") or ()]
        out.append("sae recipe " + ", ".join(f"{k}={v}" for k, v in sorted(recipe.items()) if k != "suite"))
    return tuple(out)


def mixed_settings(runs: Sequence) -> list[str]:
    """``"name (a vs b)"`` for every setting that differs between the runs (folders, or runs
    already read: :func:`.finished.finished`; runs before the ``unit`` option existed used the
    unique-neuron rule)."""
    rows = [_settings(finished(r)) for r in runs]
    out = []
    for key in rows[0]:
        values = []
        for r in rows:
            v = r[key]
            v = tuple(v) if isinstance(v, list) else v
            if v not in values:
                values.append(v)
        if len(values) > 1:
            out.append(f"{key} ({' vs '.join(str(v) for v in values)})")
    return out


def comparable_groups(runs: Sequence) -> list[list[int]]:
    """Indices of ``runs`` grouped by equal MUI settings (those :func:`mixed_settings` compares),
    the largest group first (ties: the group whose first run comes first)."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault(repr(sorted(_settings(finished(r)).items())), []).append(i)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0]))


def fit_runs(runs: Sequence, plot: str | Path | None = None, *, labels: Sequence[str] | None = None,
             allow_mixed: bool = False) -> LawFitResult:
    """Fit ``MUI = A ln(P) + B`` (percent units, sec. 3.2) over finished MUI runs; optionally plot it.

    ``runs``: folders, or runs already read (:func:`.finished.finished`). Runs whose MUI settings differ (threshold, unit, score, responses, budget, limit / n,
    ...) are not comparable and are refused unless ``allow_mixed``; R^2 and the intervals
    of A and B need >= 3 runs.
    """
    from whitebox_eval.mui.plots import plot_utility_law

    if labels is not None and len(labels) != len(runs):
        raise WhiteboxError(f"got {len(labels)} labels for {len(runs)} runs")
    folders = [finished(r) for r in runs]
    for f in folders:
        if f.config.get("suite") != "mui":
            raise WhiteboxError(f"{f.path} is not a MUI run (suite {f.config.get('suite')!r})")
    mixed = mixed_settings(folders) if len(folders) > 1 else []
    if mixed and not allow_mixed:
        raise WhiteboxError("these runs differ in " + "; ".join(mixed)
                            + ": their MUIs are not comparable (rerun with equal settings, or pass --allow-mixed)")
    names, perf, mui, skipped = [], [], [], []
    for n, folder in enumerate(folders):
        p, m = run_point(folder)
        label = labels[n] if labels is not None else f"{folder.config.get('model')} / {folder.config.get('task')}"
        if p <= 0:
            skipped.append(f"{label} (accuracy 0)")
            continue
        names.append(label)
        perf.append(p)
        mui.append(m)
    if len(perf) < 2:
        raise WhiteboxError(f"the Utility Law needs at least two runs with accuracy > 0; got {len(perf)} "
                            f"(skipped: {', '.join(skipped) or 'none'})")
    fit = fit_utility_law(perf, mui)
    if plot is not None:
        plot_utility_law(perf, mui, plot, labels=names, fit=fit)
    return LawFitResult(fit, names, perf, mui, skipped, mixed)
