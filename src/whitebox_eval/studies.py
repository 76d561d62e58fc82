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

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from whitebox_eval import suites
from whitebox_eval.runs.finished import StudyResult, read


class _Study:
    """``studies.<suite>``: runs (or resumes) one study of its record (the first argument chooses
    the mode where the suite has several). Its signature is the default mode's config dataclass,
    field by field with its default, read when asked for (``inspect.signature``, an editor):
    building the face imports no suite."""

    def __init__(self, record: suites.Suite) -> None:
        self._record = record
        self.__name__ = self.__qualname__ = record.name
        self.__module__ = __name__
        config = record.mode(None).config.replace(":", ".")
        if len(record.modes) > 1:
            modes = ", ".join(f"``{m}``" for m in record.modes)
            self.__doc__ = (f"{record.summary} ``mode``: {modes}; settings: that mode's config "
                            f"(default :class:`{config}`; another mode's fields as further keywords).")
        else:
            self.__doc__ = f"{record.summary} Settings: :class:`{config}`."

    def __call__(self, *args: Any, output: str | Path = "runs", run_id: str | None = None, resume: bool = False,
                 show_progress: bool | None = None, loaded=None, **settings: Any) -> StudyResult:
        several = len(self._record.modes) > 1
        if len(args) > (2 if several else 1):
            raise TypeError(f"{self.__name__}() takes {'mode and output' if several else 'output'} positionally; "
                            "settings by name")
        # (mode, output), or one positional: a mode's name, else the output (a suite that gains a mode keeps its calls)
        if several and (len(args) == 2 or (args and isinstance(args[0], str) and args[0] in self._record.modes)):
            mode, args = args[0], args[1:]
        else:
            mode = settings.pop("mode", None) if several else None
        if args:
            output = args[0]
        return suites.run(self._record.name, mode, output, run_id=run_id, resume=resume,
                          show_progress=show_progress, loaded=loaded, **settings)

    def __repr__(self) -> str:
        return f"<study {self.__name__}{self.__signature__}>"

    @property
    def __signature__(self) -> inspect.Signature:
        import dataclasses

        from whitebox_eval.lazy import resolve

        P = inspect.Parameter
        params = []
        if len(self._record.modes) > 1:
            params.append(P("mode", P.POSITIONAL_OR_KEYWORD, default=self._record.default_mode, annotation=str))
        params.append(P("output", P.POSITIONAL_OR_KEYWORD, default="runs", annotation="str | Path"))
        for name, default, note in (("run_id", None, "str | None"), ("resume", False, "bool"),
                                    ("show_progress", None, "bool | None"), ("loaded", None, "LoadedModel | None")):
            params.append(P(name, P.KEYWORD_ONLY, default=default, annotation=note))
        cls = resolve(self._record.mode(None).config)
        for f in dataclasses.fields(cls):
            if f.name == "volatile" or not f.init:
                continue
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else P.empty)
            params.append(P(f.name, P.KEYWORD_ONLY, default=default, annotation=f.type))
        if len(self._record.modes) > 1:
            params.append(P("settings", P.VAR_KEYWORD))
        return inspect.Signature(params, return_annotation="StudyResult")


def _face(record: suites.Suite) -> _Study:
    """``studies.<suite>`` for ``record``."""
    return _Study(record)


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
