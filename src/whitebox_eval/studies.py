"""Every suite from Python: one function per suite runs (or resumes) a study and returns it.

Each function takes the study's settings as keyword arguments -- the fields of the
suite's config dataclass, which are the command's options with ``_`` for ``-`` -- writes
the same run folder as the command, and returns a :class:`StudyResult`::

    from whitebox_eval import studies

    r = studies.mcqa(model="smollm2-135m", task="ssd", limit=200, methods=("baseline", "qk"))
    r.headline                   # the headline estimates, with their intervals
    r.results["paired_tests"]    # all of results.json
    r.samples[0]                 # one dict per item (samples.jsonl)
    r.arrays["qk_acc_val"]       # arrays/*.npy, read when first used

``output`` (default ``runs``), ``run_id``, ``resume`` and ``show_progress`` work as the
command's ``--output``, ``--run-id``, ``--resume``; ``loaded`` reuses a model already
loaded with :func:`whitebox_eval.models.load_model`. :func:`read` opens a finished run
folder the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.errors import WhiteboxError

__all__ = ["StudyResult", "read", "mcqa", "formats", "mui", "masking", "span", "gar", "reproduce"]


class _Arrays(Mapping):
    """``arrays/*.npy`` by name, each read on first use."""

    def __init__(self, folder: Path) -> None:
        self._folder, self._cache = folder, {}

    def _names(self) -> list[str]:
        return sorted(p.stem for p in (self._folder / "arrays").glob("*.npy"))

    def __getitem__(self, name: str):
        import numpy as np

        if name not in self._cache:
            path = self._folder / "arrays" / f"{name}.npy"
            if not path.is_file():
                raise KeyError(f"{name!r}: the run has {', '.join(self._names()) or 'no arrays'}")
            self._cache[name] = np.load(path, allow_pickle=False)
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


@dataclass
class StudyResult:
    """A finished study: its folder, config, results.json, samples and arrays."""

    folder: Path
    config: dict[str, Any]
    results: dict[str, Any]
    samples: list[dict[str, Any]]
    arrays: Mapping[str, Any] = field(repr=False)

    @property
    def headline(self) -> dict[str, Any]:
        """results.json's ``headline`` block: the numbers the summary prints first."""
        return dict(self.results.get("headline") or {})


def read(folder: str | Path) -> StudyResult:
    """Open a finished run folder as a :class:`StudyResult`."""
    from whitebox_eval.runs import RunFolder

    run = RunFolder.open(folder)
    return StudyResult(run.path, dict(run.config), run.load_results(), list(run.read_samples()), _Arrays(run.path))


def _run(runner: Callable, config_class: type, options: dict[str, Any], output, run_id, resume, show_progress,
         loaded) -> StudyResult:
    names = {f.name for f in dataclasses.fields(config_class) if f.name != "volatile"}
    unknown = sorted(set(options) - names)
    if unknown:
        raise WhiteboxError(f"unknown setting(s) {', '.join(unknown)} for {config_class.__name__}; "
                            f"the settings are: {', '.join(sorted(names))}")
    kinds = {f.name: f.type for f in dataclasses.fields(config_class)}
    for key, value in options.items():  # lists for tuple settings, as a user would write them
        if isinstance(value, list) and "tuple" in str(kinds[key]):
            options[key] = tuple(value)
    if loaded is not None and "model" not in options:
        options["model"] = loaded.spec
    folder = runner(config_class(**options), output, run_id=run_id, resume=resume, loaded=loaded,
                    show_progress=show_progress)
    return read(folder.path)


def mcqa(output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
         show_progress: bool | None = None, loaded=None, **settings: Any) -> StudyResult:
    """Paper 000's MCQA study (``whitebox-eval mcqa``); settings: :class:`whitebox_eval.mcqa.study.MCQAConfig`."""
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    return _run(run_mcqa, MCQAConfig, settings, output, run_id, resume, show_progress, loaded)


def formats(output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
            show_progress: bool | None = None, loaded=None, **settings: Any) -> StudyResult:
    """Paper 004's first-token vs free generation study (``whitebox-eval formats``); settings:
    :class:`whitebox_eval.mcqa.formats_study.FormatsConfig`."""
    from whitebox_eval.mcqa.formats_study import FormatsConfig, run_formats

    return _run(run_formats, FormatsConfig, settings, output, run_id, resume, show_progress, loaded)


def mui(output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
        show_progress: bool | None = None, loaded=None, **settings: Any) -> StudyResult:
    """Paper 001's MUI study (``whitebox-eval mui``); settings: :class:`whitebox_eval.mui.study.MUIConfig`."""
    from whitebox_eval.mui.study import MUIConfig, run_mui

    return _run(run_mui, MUIConfig, settings, output, run_id, resume, show_progress, loaded)


def masking(output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
            show_progress: bool | None = None, loaded=None, **settings: Any) -> StudyResult:
    """Paper 001's masking validation (``whitebox-eval mui masking``); settings:
    :class:`whitebox_eval.mui.masking.MaskingConfig`."""
    from whitebox_eval.mui.masking import MaskingConfig, run_masking

    return _run(run_masking, MaskingConfig, settings, output, run_id, resume, show_progress, loaded)


def span(output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
         show_progress: bool | None = None, loaded=None, **settings: Any) -> StudyResult:
    """Paper 003's AttentionSpan study (``whitebox-eval span``); settings:
    :class:`whitebox_eval.attentionspan.study.SpanConfig`."""
    from whitebox_eval.attentionspan.study import SpanConfig, run_span

    return _run(run_span, SpanConfig, settings, output, run_id, resume, show_progress, loaded)


_GAR_MODES = {
    "evaluate": ("whitebox_eval.gar.evaluate_study", "GARConfig", "run_gar"),
    "attribute": ("whitebox_eval.gar.attribute_study", "GARAttributeConfig", "run_gar_attribute"),
    "truth-heads": ("whitebox_eval.gar.truth_heads", "GARHeadsConfig", "run_gar_heads"),
    "intervene": ("whitebox_eval.gar.intervene_study", "GARInterveneConfig", "run_gar_intervene"),
    "probe": ("whitebox_eval.gar.probe_study", "GARProbeConfig", "run_gar_probe"),
}


def gar(mode: str = "evaluate", output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
        show_progress: bool | None = None, loaded=None, **settings: Any) -> StudyResult:
    """Paper 002's GAR studies (``whitebox-eval gar --mode MODE``): ``evaluate``, ``attribute``,
    ``truth-heads``, ``intervene`` or ``probe``; settings: that mode's config in :mod:`whitebox_eval.gar`
    (e.g. ``heads=("20.3",)``, ``pattern="V->E"`` for intervene)."""
    import importlib

    if mode not in _GAR_MODES:
        raise WhiteboxError(f"unknown GAR mode {mode!r}; choose one of {', '.join(_GAR_MODES)}")
    module, config, runner = _GAR_MODES[mode]
    module = importlib.import_module(module)
    return _run(getattr(module, runner), getattr(module, config), settings, output, run_id, resume, show_progress,
                loaded)


def reproduce(papers: str | list[str] = "all", output: str | Path = "runs", *, run_id: str | None = None,
              resume: bool = False, show_progress: bool | None = None, models: list[str] | tuple[str, ...] = (),
              scale: str = "quick", data: dict[str, str] | list[str] | tuple[str, ...] = (),
              data_root: str | None = None):
    """Reproduce papers (``whitebox-eval reproduce``): ``papers`` by number or name, or
    ``"all"``; ``data`` maps benchmark names to files (``{"mmlu": "path/to/test"}``). Returns
    a :class:`whitebox_eval.reproduce.Reproduction` (its folder and claims.json's content)."""
    from whitebox_eval.reproduce import run

    names = [papers] if isinstance(papers, str) else list(papers)
    return run(names, models=models, scale=scale, data=data, data_root=data_root, output=output, run_id=run_id,
               resume=resume, show_progress=show_progress)
