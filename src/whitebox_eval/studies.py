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
loaded with :func:`whitebox_eval.models.load_model`; ``batch_size="auto"`` is ``--batch-size auto``
(on a GPU it probes ``loaded`` itself). :func:`read` opens a finished run
folder the same way. There is one function per record of :mod:`whitebox_eval.suites`
(``mcqa``, ``formats``, ``mui``, ``masking``, ``span``, ``gar``; ``gar``'s first argument is
its mode), and :func:`reproduce`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from whitebox_eval import suites
from whitebox_eval.runs.finished import StudyResult, read


def _face(record: suites.Suite) -> Callable[..., StudyResult]:
    """``studies.<suite>``: runs (or resumes) one study of ``record`` (its first argument
    chooses the mode where the suite has several)."""
    config = record.mode(None).config.replace(":", ".")
    if len(record.modes) > 1:
        def study(mode: str = record.default_mode, output: str | Path = "runs", *, run_id: str | None = None,
                  resume: bool = False, show_progress: bool | None = None, loaded=None,
                  **settings: Any) -> StudyResult:
            return suites.run(record.name, mode, output, run_id=run_id, resume=resume, show_progress=show_progress,
                              loaded=loaded, **settings)

        modes = ", ".join(f"``{m}``" for m in record.modes)
        study.__doc__ = (f"{record.summary} ``mode``: {modes}; settings: that mode's config "
                         f"(default :class:`{config}`).")
    else:
        def study(output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
                  show_progress: bool | None = None, loaded=None, **settings: Any) -> StudyResult:
            return suites.run(record.name, None, output, run_id=run_id, resume=resume, show_progress=show_progress,
                              loaded=loaded, **settings)

        study.__doc__ = f"{record.summary} Settings: :class:`{config}`."
    study.__name__ = study.__qualname__ = record.name
    study.__module__ = __name__
    return study


def __getattr__(name: str) -> Callable[..., StudyResult]:
    """``studies.<suite>`` for every record of :data:`whitebox_eval.suites.SUITES` (one
    registered later included)."""
    if name in suites.SUITES:
        return _face(suites.SUITES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(suites.SUITES))


__all__ = ["StudyResult", "read", *suites.SUITES, "reproduce"]


def reproduce(papers: str | list[str] = "all", output: str | Path = "runs", *, run_id: str | None = None,
              resume: bool = False, show_progress: bool | None = None, models: list[str] | tuple[str, ...] = (),
              scale: str = "quick", data: dict[str, str] | list[str] | tuple[str, ...] = (),
              data_root: str | None = None, models_root: str | None = None, allow_code_execution: bool = False,
              reuse_only: bool = False):
    """Reproduce papers (``whitebox-eval reproduce``): ``papers`` by number or name, or
    ``"all"``; ``data`` maps benchmark names to files (``{"mmlu": "path/to/test"}``); ``models``
    as ``--model`` takes them (``"002=ID"`` for one paper); ``models_root`` as ``--models-root``;
    ``allow_code_execution`` runs the experiments scored by running the model's code;
    ``reuse_only`` runs nothing and assembles the children already finished under ``output``. Returns
    a :class:`whitebox_eval.reproduce.Reproduction` (its folder and claims.json's content)."""
    from whitebox_eval.reproduce import run

    names = [papers] if isinstance(papers, str) else list(papers)
    return run(names, models=models, scale=scale, data=data, data_root=data_root, output=output, run_id=run_id,
               resume=resume, show_progress=show_progress, models_root=models_root,
               allow_code_execution=allow_code_execution, reuse_only=reuse_only)
