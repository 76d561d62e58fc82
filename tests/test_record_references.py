"""The records' lazy references: ``--help`` and planning import no suite's study code, and every
reference a record names resolves and fits its mode's config dataclass."""

from __future__ import annotations

import dataclasses
import importlib.resources
import inspect
import json
import subprocess
import sys
import typing

import pytest

from whitebox_eval import suites
from whitebox_eval.lazy import resolve

PROBE = """
import json, sys
from whitebox_eval.cli import main
try:
    main({argv!r})
except SystemExit as e:
    assert e.code in (0, None), e.code
print("MODULES=" + json.dumps(sorted(m for m in sys.modules if m.startswith("whitebox_eval.") or m in {heavy!r})))
"""


HEAVY = {"torch", "transformers", "scipy"}
"""What planning and ``--help`` never import (the engine's and the studies' libraries)."""


def _imported(argv: list[str]) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1].removeprefix("MODULES=")))


def _planned(paper: str, output, data_root) -> set[str]:
    """What ``reproduce PAPER --plan-only`` imports, given the shared samples where this clone has them;
    a paper whose plan needs benchmark files a clone lacks is skipped with its one-line reason."""
    argv = ["reproduce", paper, "--plan-only", "--scale", "micro", "--output", str(output)]
    try:
        return _imported(argv + (["--data-root", str(data_root)] if data_root else []))
    except subprocess.CalledProcessError as e:
        lines = [x for x in (e.stdout + e.stderr).splitlines() if x.lower().startswith("error:") and "--data" in x]
        if data_root is None and lines:
            pytest.skip(f"real-format dataset samples not found: {lines[0]}")
        raise


def _module(reference: str) -> str:
    return reference.partition(":")[0]


def _packages() -> set[str]:
    """Each suite's package (its run function's module's parent): ``whitebox_eval.mcqa``, ..."""
    return {_module(r.modes[r.default_mode].run).rpartition(".")[0] for r in suites.SUITES.values()}


def _study_code() -> set[str]:
    """The modules a record names for running or drawing a study (not its configs)."""
    names = set()
    for r in suites.SUITES.values():
        names |= {_module(m.run) for m in r.modes.values()}
        names |= {_module(x) for x in (r.command, r.views, r.figures) if x}
        names |= {_module(ref) for ref, _ in r.commands.values()}
        names |= {_module(s.compute) for s in r.statistics}
    return names


def test_help_imports_only_the_records():
    got = _imported(["--help"])
    packages = _packages()
    suite_modules = {m for m in got if any(m == p or m.startswith(p + ".") for p in packages)}
    assert suite_modules == packages | {p + ".record" for p in packages}, sorted(suite_modules)


def test_planning_imports_the_configs_and_no_study_code(tmp_path, shared_datasets_optional):
    """``reproduce 000 --plan-only`` builds each child's config (mcqa's, from ``mcqa/config.py``) and
    estimates it from the record; no run function, command, view, figure or statistic is imported."""
    got = _planned("000", tmp_path, shared_datasets_optional)
    assert "whitebox_eval.mcqa.config" in got  # the plan did build mcqa configs
    assert not got & _study_code(), sorted(got & _study_code())


PAPERS = ("000", "001", "002", "003", "004", "all")


@pytest.mark.parametrize("paper", PAPERS)
def test_planning_a_paper_imports_no_study_code_and_no_torch(paper, tmp_path, shared_datasets_optional):
    """``reproduce PAPER --plan-only`` builds every child's config from its record's config module:
    no run function, command, view, figure or statistic module is imported, and neither is torch."""
    got = _planned(paper, tmp_path, shared_datasets_optional)
    assert not got & _study_code(), sorted(got & _study_code())
    assert not got & HEAVY, sorted(got & HEAVY)


def _every_reference():
    for r in suites.SUITES.values():
        yield from ((r.name, f"mode {m}", ref) for m, mode in r.modes.items() for ref in (mode.config, mode.run))
        yield from ((r.name, what, ref) for what, ref in (("command", r.command), ("views", r.views),
                                                            ("figures", r.figures)) if ref)
        yield from ((r.name, f"command {c}", ref) for c, (ref, _) in r.commands.items())
        yield from ((r.name, f"statistic {s.name}", s.compute) for s in r.statistics)


@pytest.mark.parametrize("suite, what, reference", list(_every_reference()))
def test_every_reference_resolves(suite, what, reference):
    assert callable(resolve(reference)), (suite, what, reference)


@pytest.mark.parametrize("name", list(suites.SUITES))
def test_each_mode_runs_its_own_config(name):
    """The run function takes the mode's config class (its ``cfg`` annotation), the record builds that
    class from no settings, and ``work`` counts it; a statistic takes what its ``reads`` says."""
    record = suites.SUITES[name]
    for mode_name, mode in record.modes.items():
        cls, run = resolve(mode.config), resolve(mode.run)
        assert dataclasses.is_dataclass(cls)
        assert typing.get_type_hints(run)["cfg"] is cls, (name, mode_name)
        cfg = record.config(mode_name, {})
        assert type(cfg) is cls
        items, units = record.work(cfg, mode_name)  # gar's probe reads an earlier run's captures: (0, 0)
        assert isinstance(items, int) and items >= 0 and float(units) >= 0, (name, mode_name, items, units)
    for s in record.statistics:
        params = list(inspect.signature(resolve(s.compute)).parameters)
        assert params[:3] == (["study", "spec", "kit"] if s.reads == "study" else ["studies", "labels", "kit"]), s.name


@pytest.mark.parametrize("name", [n for n, r in suites.SUITES.items() if r.script])
def test_each_view_script_is_package_data(name):
    package, _, path = suites.SUITES[name].script.partition(":")
    assert importlib.resources.files(package).joinpath(path).is_file()
