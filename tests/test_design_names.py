"""DESIGN.md describes the code as it is: every code name it quotes in backticks exists.

Checked: paths under a package of whitebox_eval or a folder of the repository (``runs/passes.py``,
``sae/``, ``tests/...``, ``benchmarks/...``), ``module:attribute``
strings, and dotted names whose first part is a module or package of whitebox_eval
(``runs.passes.run_pass``, ``suites.register``, ``stats.wilson``), each resolved by importing it.
Words in backticks that look like none of these (options, commands, fields) are not code names."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "whitebox_eval"
DESIGN = ROOT / "DESIGN.md"
TOP = {p.stem for p in PACKAGE.iterdir() if (p.suffix == ".py" or (p / "__init__.py").is_file())} - {"__init__", "__main__"}


REPO_DIRS = {"tests", "benchmarks", "examples", "src"}


def quoted() -> list[str]:
    return re.findall(r"`([^`\s]+)`", DESIGN.read_text(encoding="utf-8"))


def _resolve(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module("whitebox_eval." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _problem(name: str) -> str | None:
    name = name.rstrip(",.;:")
    if any(re.fullmatch(r"[A-Z]+", part) for part in re.split(r"[./:(]", name)):
        return None  # a placeholder (``studies.X``, ``tasks/NAME.py``)
    if re.fullmatch(r"\w+\.py", name) and name[:-3] in TOP | {"__main__"}:
        return None if (PACKAGE / name).is_file() else f"{name}: no such module"
    if re.fullmatch(r"[\w-]+(/[\w.-]+)*/?", name) and "/" in name and name.split("/")[0] in TOP | REPO_DIRS:
        where = [ROOT / name, PACKAGE / name]
        return None if any(p.exists() for p in where) else f"{name}: no such file or folder"
    if re.fullmatch(r"[\w.]+:\w+", name) and name.split(".")[0] in ("whitebox_eval",):
        module, _, attr = name.partition(":")
        try:
            return None if hasattr(importlib.import_module(module), attr) else f"{name}: no attribute {attr}"
        except ModuleNotFoundError:
            return f"{name}: no module {module}"
    call = re.fullmatch(r"([\w.]+)(\(.*)?", name)
    if call and "." in call.group(1) and call.group(1).split(".")[0] in TOP:
        return None if _resolve(call.group(1)) else f"{name}: not found in whitebox_eval"
    return None


def test_design_is_short_and_keeps_no_changelog():
    text = DESIGN.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    assert not re.search(r"\b[Cc]hanged:", text)


def test_every_code_name_design_quotes_exists():
    checked = [n for n in quoted() if _problem(n) is None]
    problems = sorted({p for n in quoted() if (p := _problem(n))})
    assert len(checked) > 50 and not problems, problems


@pytest.mark.parametrize("name, bad", [("runs/passes.py", False), ("runs/nothere.py", True),
                                       ("suites.register", False), ("suites.unregister", True),
                                       ("whitebox_eval.mcqa.record:SUITE", False), ("whitebox_eval.mcqa.record:missing", True)])
def test_the_check_catches_a_wrong_name(name, bad):
    assert (_problem(name) is not None) == bad
