"""Studies with signatures: ``studies.<suite>`` shows its config dataclass's
fields with their defaults, read only when asked for; every record's lazy references resolve to
a config dataclass and a run function that takes it."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import pytest

from whitebox_eval import studies, suites
from whitebox_eval.lazy import resolve

FIXED = ["output", "run_id", "resume", "show_progress", "loaded"]


@pytest.mark.parametrize("name", list(suites.SUITES))
def test_each_study_shows_its_configs_fields(name):
    record = suites.SUITES[name]
    sig = inspect.signature(getattr(studies, name))
    fields = [f for f in dataclasses.fields(resolve(record.mode(None).config)) if f.name != "volatile"]
    several = len(record.modes) > 1
    names = list(sig.parameters)
    assert names[:len(FIXED) + several] == (["mode"] if several else []) + FIXED
    shown = {n: p for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY and n not in FIXED}
    assert list(shown) == [f.name for f in fields]
    for f in fields:
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        assert shown[f.name].default == default, (name, f.name)
    assert (sig.parameters.get("settings") is not None) == several  # another mode's fields


@pytest.mark.parametrize("name", list(suites.SUITES))
def test_every_mode_reference_resolves_to_a_config_and_its_run(name):
    for mode_name, mode in suites.SUITES[name].modes.items():
        cls, run = resolve(mode.config), resolve(mode.run)
        assert dataclasses.is_dataclass(cls) and callable(run), (name, mode_name)
        params = inspect.signature(run).parameters
        assert list(params)[:2] == ["cfg", "output"] and {"run_id", "resume", "loaded", "show_progress"} <= set(params)
        assert suites.SUITES[name].config(mode_name, {}).__class__ is cls  # the record builds its own config


def test_the_faces_import_no_suite_until_asked():
    probe = ("import sys, inspect; from whitebox_eval import studies; f = studies.mcqa; "
             "print('whitebox_eval.mcqa.config' in sys.modules, f.__name__); inspect.signature(f); "
             "print('whitebox_eval.mcqa.config' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "mcqa", "True"]


def test_a_face_still_runs_by_keyword_and_position(monkeypatch):
    calls = []
    monkeypatch.setattr(suites, "run", lambda *a, **k: calls.append((a, k)))
    studies.gar("probe", "out", heads="1.0")
    studies.gar(mode="attribute", limit=2)
    studies.span("there", mode="conditional")  # span's own setting named mode
    assert calls[0][0] == ("gar", "probe", "out") and calls[0][1]["heads"] == "1.0"
    assert calls[1][0] == ("gar", "attribute", "runs") and calls[1][1]["limit"] == 2
    assert calls[2][0] == ("span", None, "there") and calls[2][1]["mode"] == "conditional"
